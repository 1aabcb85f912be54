r"""ControlSynth Neural ODEs (CSODE) and the neural-ODE baselines it is compared with.

**CSODE** (Mei, Zheng & Li, NeurIPS 2024). The state obeys

.. math::  \dot x = A_0 x + \sum_{j=1}^{M} A_j f_j(W_j x + b_j) + g(\dot u),\qquad \dot u = h(u),
           \quad u(0) = x(0),

``M`` nonlinear sub-networks (a linear read-in ``W_j``, an elementwise activation ``f_j``, a
linear read-out ``A_j``) plus a *control term*: an auxiliary state ``u`` started at ``x(0)`` that
evolves by its own learned dynamics ``h`` and drives ``x`` through ``g`` (the identity here, as in
the official code). The solver is the paper's forward Euler scheme on both states::

    u̇_k = h(u_k);  u_{k+1} = u_k + Δt u̇_k;  x_{k+1} = x_k + Δt (F(x_k) + u̇_k).

For a grid-valued state (Gray–Scott) ``h`` is a periodic convolution on the grid (the official
code's "adaptive" control); otherwise ``h`` is linear. ``A_0`` is a full matrix, or a diagonal one
for large states (a full ``A_0`` on 512 states would hold most of the parameter budget).

**NODE** (Chen et al. 2018): ``ẋ = MLP(x)`` (two tanh hidden layers). **ANODE** (Dupont et al.
2019): the same on ``(x, a)`` with ``a(0) = 0`` augmented dimensions, read out on ``x``. Both are
integrated with torchdiffeq's fixed-grid Euler, one step per sample, like CSODE.

Every model maps a batch of starts ``x0`` (B, n) to a trajectory (n_steps + 1, B, n).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import nn

_ACT = {"tanh": nn.Tanh, "relu": nn.ReLU}


def param_count(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def match_width(build: Callable[[int], nn.Module], target: int, lo: int = 1, hi: int = 2048) -> int:
    """The width ``w`` in ``[lo, hi]`` whose ``param_count(build(w))`` is closest to ``target``.

    Parameter counts grow with width, so a bisection finds the crossing; ties go to the smaller.
    """
    if target < 1 or lo < 1 or hi < lo:
        raise ValueError(f"need target >= 1 and 1 <= lo <= hi, got {target}, {lo}, {hi}")
    a, b = lo, hi
    while a < b:
        mid = (a + b) // 2
        if param_count(build(mid)) < target:
            a = mid + 1
        else:
            b = mid
    cands = [w for w in (a - 1, a) if lo <= w <= hi]
    return min(cands, key=lambda w: (abs(param_count(build(w)) - target), w))


class CSField(nn.Module):
    """``F(x) = A_0 x + Σ_j A_j f_j(W_j x + b_j)`` with one width and activation per sub-network."""

    def __init__(self, dim: int, widths: Sequence[int], activations: Sequence[str], a0: str = "full"):
        super().__init__()
        if len(widths) != len(activations) or len(widths) == 0:
            raise ValueError(f"need one width per activation (at least one), got {widths}, {activations}")
        bad = [a for a in activations if a not in _ACT]
        if bad:
            raise ValueError(f"unknown activations {bad}; known: {sorted(_ACT)}")
        if a0 not in ("full", "diag"):
            raise ValueError(f"a0 must be 'full' or 'diag', got {a0!r}")
        self.dim, self.a0_kind, self.activations = dim, a0, list(activations)
        if a0 == "full":
            self.A0 = nn.Parameter(torch.zeros(dim, dim))
        else:
            self.A0 = nn.Parameter(torch.zeros(dim))
        self.read_in = nn.ModuleList(nn.Linear(dim, m) for m in widths)          # W_j, b_j
        self.read_out = nn.ModuleList(nn.Linear(m, dim, bias=False) for m in widths)  # A_j
        self.acts = nn.ModuleList(_ACT[a]() for a in activations)

    def linear(self, x):
        return x @ self.A0.T if self.a0_kind == "full" else x * self.A0

    def forward(self, x):
        out = self.linear(x)
        for w, a, f in zip(self.read_in, self.read_out, self.acts):
            out = out + a(f(w(x)))
        return out

    def matrices(self):
        """``(A_0, [A_j], [W_j])`` as float64 NumPy arrays, for :mod:`lmi_certificate`."""
        A0 = self.A0.detach().double()
        A0 = A0 if self.a0_kind == "full" else torch.diag(A0)
        return (A0.numpy(), [a.weight.detach().double().numpy() for a in self.read_out],
                [w.weight.detach().double().numpy() for w in self.read_in])


class LinearControl(nn.Module):
    """``h(u) = K u + c``."""

    def __init__(self, dim: int):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, u):
        return self.lin(u)


class GridControl(nn.Module):
    """``h(u)``: a learned ``k x k`` periodic convolution mixing ``channels`` fields on a grid.

    A local linear operator, as in the official code's adaptive control (two convolutions with no
    activation between them compose to one); it can represent a diffusion stencil. Applied as
    ``k²`` periodic shifts (``torch.roll``) weighed by channel-mixing matrices.
    """

    def __init__(self, grid: int, channels: int = 2, kernel: int = 3):
        super().__init__()
        if kernel % 2 != 1 or kernel > grid:
            raise ValueError(f"kernel must be odd and at most the grid side, got {kernel}, grid {grid}")
        self.grid, self.channels, self.kernel = grid, channels, kernel
        conv = nn.Conv2d(channels, channels, kernel)        # only for its default initialisation
        self.weight = nn.Parameter(conv.weight.detach().clone())   # (out, in, k, k), cross-correlation
        self.bias = nn.Parameter(conv.bias.detach().clone())

    def forward(self, u):
        b, g, k, r = u.shape[0], self.grid, self.kernel, self.kernel // 2
        z = u.reshape(b, self.channels, g, g)
        # output (y, x) reads input (y + i - r, x + j - r): a roll by (r - i, r - j)
        shifted = torch.stack([torch.roll(z, (r - i, r - j), (2, 3)) for i in range(k) for j in range(k)], 2)
        out = torch.einsum("ocs,bcshw->bohw", self.weight.reshape(self.channels, self.channels, k * k), shifted)
        return (out + self.bias[None, :, None, None]).reshape(b, -1)


class CSODE(nn.Module):
    """ControlSynth Neural ODE: ``field`` F plus an optional ``control`` h (None: g ≡ 0)."""

    def __init__(self, field: CSField, control: nn.Module | None):
        super().__init__()
        self.field, self.control = field, control

    def forward(self, x0, n_steps: int, dt: float):
        x, u = x0, x0
        out = [x0]
        h = self.control
        for _ in range(n_steps):
            drift = self.field(x)
            if h is not None:
                udot = h(u)
                u = u + dt * udot
                drift = drift + udot
            x = x + dt * drift
            out.append(x)
        return torch.stack(out)


class MLPField(nn.Module):
    """``ẋ = MLP(x)``: ``depth`` tanh hidden layers of ``width`` (torchdiffeq signature f(t, x))."""

    def __init__(self, dim: int, width: int, depth: int = 2):
        super().__init__()
        layers, d = [], dim
        for _ in range(depth):
            layers += [nn.Linear(d, width), nn.Tanh()]
            d = width
        layers.append(nn.Linear(d, dim))
        self.net = nn.Sequential(*layers)

    def forward(self, t, x):
        return self.net(x)


class NODE(nn.Module):
    """Neural ODE on the state; ``augment > 0`` makes it an ANODE (zeros appended to the start)."""

    def __init__(self, dim: int, width: int, depth: int = 2, augment: int = 0):
        super().__init__()
        if augment < 0:
            raise ValueError(f"augment must be >= 0, got {augment}")
        self.dim, self.augment = dim, augment
        self.field = MLPField(dim + augment, width, depth)

    def forward(self, x0, n_steps: int, dt: float):
        from torchdiffeq import odeint

        z0 = x0 if self.augment == 0 else torch.cat([x0, x0.new_zeros(x0.shape[0], self.augment)], 1)
        t = torch.arange(n_steps + 1, dtype=x0.dtype) * dt
        return odeint(self.field, z0, t, method="euler")[..., :self.dim]


def build(kind: str, dim: int, width: int, *, grid: int | None = None, n_sub: int = 2,
          control: bool = True, augment: int = 4, a0: str = "full", kernel: int = 3) -> nn.Module:
    """One model by name: ``"csode"``, ``"node"`` or ``"anode"``, at hidden ``width``.

    CSODE: ``n_sub`` sub-networks of ``width`` alternating tanh and ReLU; ``control=False`` drops
    the control term; a ``grid`` makes the control a :class:`GridControl` (state = 2 fields).
    """
    if kind == "csode":
        if n_sub < 1:
            raise ValueError(f"n_sub must be >= 1, got {n_sub}")
        acts = [("tanh", "relu")[j % 2] for j in range(n_sub)]
        f = CSField(dim, [width] * n_sub, acts, a0=a0)
        h = None
        if control:
            h = GridControl(grid, 2, kernel) if grid is not None else LinearControl(dim)
            if grid is not None and 2 * grid * grid != dim:
                raise ValueError(f"a grid control needs dim = 2 grid², got dim {dim}, grid {grid}")
        return CSODE(f, h)
    if kind == "node":
        return NODE(dim, width)
    if kind == "anode":
        return NODE(dim, width, augment=augment)
    raise ValueError(f"unknown model kind {kind!r}; known: csode, node, anode")
