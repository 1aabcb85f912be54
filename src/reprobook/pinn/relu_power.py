r"""Two-layer ReLU\ :sup:`p` networks, their input derivatives and parameter gradients in closed form.

The network of the PINN convergence theory (Gao et al. 2023; Song, Park & Kang 2024) is

.. math:: u(x) = \frac{1}{\sqrt m}\sum_{r=1}^m a_r\,\sigma_p(w_r\cdot x + b_r),
          \qquad \sigma_p(z) = \max(z, 0)^p,

with :math:`w_r \sim N(0, I_d)`, :math:`b_r \sim N(0, 1)` and :math:`a_r` uniform on
:math:`\{-1, 1\}` (fixed, as in the theory, unless the outer layer is trained too). Because the
activation is a power of a ReLU, every derivative is a lower power of the same ReLU:

.. math:: \sigma_p^{(j)}(z) = \frac{p!}{(p-j)!}\,\max(z,0)^{p-j} \quad (j \le p),

where :math:`\max(z,0)^0` is the step :math:`1[z>0]`. A ridge function :math:`\sigma(w\cdot x+b)`
has Laplacian :math:`|w|^2\sigma''(w\cdot x+b)`, so the :math:`k`-th power of the Laplacian is

.. math:: \Delta^k u(x) = \frac{1}{\sqrt m}\sum_r a_r\,\frac{p!}{(p-2k)!}\,|w_r|^{2k}\,
          \max(w_r\cdot x+b_r, 0)^{p-2k},

and in one dimension the :math:`j`-th derivative is
:math:`u^{(j)}(x) = m^{-1/2}\sum_r a_r\,\frac{p!}{(p-j)!}\,w_r^j\max(w_rx+b_r,0)^{p-j}`.
:math:`\sigma_p^{(j)}` is continuous for :math:`j < p`; the theory asks for :math:`p \ge k+1`
for a PDE of order :math:`k`, so that the residual is continuous.

The parameter gradients of :math:`\Delta^k u(x)` are closed form as well (with
:math:`q = p - 2k`, :math:`\rho = \max(\cdot, 0)`, :math:`C = p!/(p-2k)!`):

.. math:: \partial_{a_r} = \tfrac{C}{\sqrt m}|w_r|^{2k}\rho^q,\quad
          \partial_{b_r} = \tfrac{C}{\sqrt m}a_r|w_r|^{2k}q\rho^{q-1},\quad
          \partial_{w_r} = \tfrac{C}{\sqrt m}a_r\big(2k|w_r|^{2k-2}w_r\rho^q
          + |w_r|^{2k}q\rho^{q-1}x\big),

(the step's derivative, a Dirac mass, is zero almost everywhere and dropped, as autograd does).
Everything is batched over independent runs: parameters carry a leading run axis ``S``, so one
call trains many seeds and learning rates at once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..seeding import rng

__all__ = ["falling_factorial", "relu_power", "ReLUPowerNet", "init_net", "laplacian_power",
           "laplacian_coefficients", "apply_coefficients", "derivative_1d", "laplacian_power_vjp",
           "RhoPowers"]


def falling_factorial(p: int, j: int) -> int:
    """:math:`p!/(p-j)! = p(p-1)\\cdots(p-j+1)`, the constant of the j-th derivative of z^p."""
    if j < 0 or j > p:
        raise ValueError(f"derivative order j must be in 0..p={p}, got {j}")
    return math.prod(range(p - j + 1, p + 1))


def relu_power(z: torch.Tensor, q: int, relu: torch.Tensor | None = None) -> torch.Tensor:
    """:math:`\\max(z,0)^q`, with :math:`q = 0` the step :math:`1[z > 0]`; ``relu`` may pass a
    precomputed ``max(z, 0)``."""
    if q < 0:
        raise ValueError(f"the power q must be >= 0, got {q}")
    if q == 0:
        return (z > 0).to(z.dtype)
    r = torch.relu(z) if relu is None else relu
    out = r
    for _ in range(q - 1):
        out = out * r
    return out


@dataclass
class ReLUPowerNet:
    """Parameters of ``S`` independent two-layer ReLU^p networks of width ``m`` on R^d.

    ``W`` (S, m, d), ``b`` (S, m), ``a`` (S, m); ``p`` the power of the activation.
    """

    W: torch.Tensor
    b: torch.Tensor
    a: torch.Tensor
    p: int

    def __post_init__(self):
        if isinstance(self.p, bool) or not isinstance(self.p, (int, np.integer)) or self.p < 1:
            raise ValueError(f"p (the power of the ReLU) must be an int >= 1, got {self.p!r}")
        self.p = int(self.p)
        if self.W.dim() != 3:
            raise ValueError(f"W must have shape (runs, width, dim), got {tuple(self.W.shape)}")
        S, m, _ = self.W.shape
        for name, t in (("b", self.b), ("a", self.a)):
            if tuple(t.shape) != (S, m):
                raise ValueError(f"{name} must have shape ({S}, {m}), got {tuple(t.shape)}")

    @property
    def runs(self) -> int:
        return self.W.shape[0]

    @property
    def width(self) -> int:
        return self.W.shape[1]

    @property
    def dim(self) -> int:
        return self.W.shape[2]

    def preactivation(self, X: torch.Tensor) -> torch.Tensor:
        """:math:`z = w_r\\cdot x_i + b_r`, shape (S, N, m), for points ``X`` of shape (N, d)."""
        X = _points(X, self.dim).to(self.W)
        S = self.runs
        return torch.baddbmm(self.b[:, None, :], X.expand(S, *X.shape), self.W.transpose(1, 2))

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        """The network's values, shape (S, N)."""
        return laplacian_power(self, X, 0)


def _points(X, d: int) -> torch.Tensor:
    if not isinstance(X, torch.Tensor):
        X = torch.as_tensor(np.asarray(X, dtype=np.float64))
    if X.dim() == 1 and d == 1:
        X = X[:, None]
    if X.dim() != 2 or X.shape[1] != d:
        raise ValueError(f"points must have shape (N, {d}), got {tuple(X.shape)}")
    return X


def init_net(width: int, dim: int, p: int, seeds, *, stream: int = 0, dtype=torch.float64,
             device="cpu") -> ReLUPowerNet:
    """The theory's initialisation, one independent network per seed: :math:`w_r \\sim N(0, I)`,
    :math:`b_r \\sim N(0,1)`, :math:`a_r \\in \\{-1, 1\\}` uniformly.

    Run ``i`` draws from a torch generator seeded from ``reprobook.rng(seeds[i], stream, width,
    dim)`` on the CPU (so every device gets the same numbers): the same seed gives the same
    initial network to every arm that shares ``stream``, width and dimension, whatever its ``p``
    (common random numbers across arms).
    """
    for name, v in (("width", width), ("dim", dim)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    seeds = [int(s) for s in np.atleast_1d(seeds)]
    if not seeds:
        raise ValueError("init_net needs at least one seed")
    Ws, bs, as_ = [], [], []
    for s in seeds:
        g = torch.Generator().manual_seed(int(rng(s, stream, width, dim).integers(2**62)))
        Ws.append(torch.randn(width, dim, generator=g, dtype=torch.float64))
        bs.append(torch.randn(width, generator=g, dtype=torch.float64))
        as_.append(torch.randint(0, 2, (width,), generator=g).to(torch.float64) * 2 - 1)
    to = dict(dtype=dtype, device=device)
    return ReLUPowerNet(torch.stack(Ws).to(**to), torch.stack(bs).to(**to),
                        torch.stack(as_).to(**to), p)


def _check_k(net: ReLUPowerNet, k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"the Laplacian power k must be an int >= 0, got {k!r}")
    if 2 * k > net.p:
        raise ValueError(f"Delta^{k} needs p >= {2 * k}, but the network has p = {net.p}")
    return int(k)


def laplacian_power(net: ReLUPowerNet, X, k: int, z: torch.Tensor | None = None) -> torch.Tensor:
    """:math:`\\Delta^k u` at the points ``X`` (N, d) in closed form, shape (S, N).

    ``z`` may pass a precomputed :meth:`ReLUPowerNet.preactivation` of the same points.
    """
    k = _check_k(net, k)
    z = net.preactivation(X) if z is None else z
    q = net.p - 2 * k
    return apply_coefficients(relu_power(z, q), laplacian_coefficients(net, k))


def laplacian_coefficients(net: ReLUPowerNet, k: int) -> torch.Tensor:
    r""":math:`a_r\,p!/(p-2k)!\,|w_r|^{2k}/\sqrt m`, shape (S, m): Delta^k u = rho^{p-2k} @ this."""
    sq = net.W.pow(2).sum(-1)
    return net.a * sq ** k * (falling_factorial(net.p, 2 * k) / math.sqrt(net.width))


def apply_coefficients(rho_q: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:
    """``sum_r rho_q[s, i, r] coef[s, r]``, shape (S, N), as one batched matrix-vector product."""
    return torch.bmm(rho_q, coef[:, :, None])[..., 0]


def derivative_1d(net: ReLUPowerNet, x, j: int) -> torch.Tensor:
    """:math:`d^ju/dx^j` of a network on R (any order ``j <= p``), closed form, shape (S, N)."""
    if net.dim != 1:
        raise ValueError(f"derivative_1d needs a network on R (dim 1), got dim {net.dim}")
    if isinstance(j, bool) or not isinstance(j, (int, np.integer)) or not 0 <= j <= net.p:
        raise ValueError(f"the derivative order j must be an int in 0..p={net.p}, got {j!r}")
    z = net.preactivation(x)
    w = net.W[..., 0]
    coef = net.a * w ** j * (falling_factorial(net.p, j) / math.sqrt(net.width))
    return apply_coefficients(relu_power(z, net.p - j), coef)


class RhoPowers:
    """``max(z, 0)^q`` for the preactivation ``z`` of one network at one set of points, each
    power computed once (by multiplying the next lower one) and kept."""

    def __init__(self, z: torch.Tensor):
        self.z = z
        self._relu = torch.relu(z)
        self._cache: dict[int, torch.Tensor] = {1: self._relu}

    def __call__(self, q: int) -> torch.Tensor:
        if q not in self._cache:
            if q == 0:
                self._cache[0] = torch.sign(self._relu)          # 1[z > 0], in z's dtype
            else:
                self._cache[q] = self(q - 1) * self._relu
        return self._cache[q]


def laplacian_power_vjp(net: ReLUPowerNet, X, k: int, g: torch.Tensor,
                        rho: RhoPowers | None = None):
    """Vector-Jacobian product of :math:`\\Delta^k u(X)` with ``g`` (S, N), in closed form.

    Returns ``(dW, db, da)``: the gradients of :math:`\\sum_i g_{si}\\,\\Delta^k u_s(x_i)` with
    respect to each run's parameters. ``rho`` may pass the :class:`RhoPowers` of these points.
    """
    k = _check_k(net, k)
    X = _points(X, net.dim).to(net.W.dtype)
    rho = RhoPowers(net.preactivation(X)) if rho is None else rho
    q = net.p - 2 * k
    c = falling_factorial(net.p, 2 * k) / math.sqrt(net.width)
    sq = net.W.pow(2).sum(-1)                                   # |w|^2, (S, m)
    gq = torch.bmm(g[:, None, :], rho(q))[:, 0, :]              # sum_i g_i rho^q, (S, m)
    da = c * sq ** k * gq
    dW = torch.zeros_like(net.W)
    db = torch.zeros_like(net.b)
    if k > 0:
        dW = dW + (c * 2 * k * net.a * sq ** (k - 1) * gq)[..., None] * net.W
    if q > 0:
        lo = rho(q - 1).transpose(1, 2)                         # (S, m, N)
        scale = c * q * net.a * sq ** k                          # (S, m)
        db = scale * torch.bmm(lo, g[:, :, None])[..., 0]
        gX = g[:, :, None] * X[None, :, :]                       # (S, N, d)
        dW = dW + scale[..., None] * torch.bmm(lo, gX)
    return dW, db, da
