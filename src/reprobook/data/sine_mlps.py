r"""A zoo of small MLPs, each fitted to its own random sinusoid, with the sinusoid's parameters.

Network :math:`k` is a scalar MLP :math:`f_{\theta_k}:\mathbb R\to\mathbb R` with layer sizes
``(1, *hidden, 1)`` and activation :math:`\sigma` (ReLU or tanh) on the hidden layers,

.. math:: h^{(0)} = x, \qquad h^{(l)} = \sigma\big(W^{(l)} h^{(l-1)} + b^{(l)}\big), \qquad
          f_\theta(x) = W^{(L)} h^{(L-1)} + b^{(L)},

fitted by least squares to :math:`y = A_k \sin(\omega_k x + \varphi_k)` on ``n_points`` equispaced
points of :math:`[-\pi, \pi]`, with :math:`\omega_k \sim U(\omega_{\min}, \omega_{\max})`,
:math:`A_k \sim U(A_{\min}, A_{\max})` and :math:`\varphi_k \sim U(0, 2\pi)`. The ground truth
of the zoo is :math:`(\omega_k, A_k, \varphi_k)`: a metanetwork that reads the weights is asked for
:math:`\omega_k`.

All networks are trained at once. Their parameters are stacked along a leading network axis and the
forward pass is a batched matrix product, so ``n`` networks cost about as much as one wide one. The
loss is the *sum* over networks of each network's mean squared error; since network :math:`k`'s
parameters enter only its own term and Adam's update is element-wise, this is exactly ``n``
independent Adam runs (same steps, same learning rate), not a joint fit.

Initialisation is PyTorch's default for ``nn.Linear`` (weights and biases
:math:`U(-1/\sqrt{\text{fan-in}}, 1/\sqrt{\text{fan-in}})`), drawn from the caller's generator.

Example::

    g = torch.Generator().manual_seed(0)
    zoo = make_sine_mlp_zoo(300, hidden=(16, 16), steps=200, generator=g)
    zoo.weights[1].shape    # (300, 16, 16): layer-2 weights of every network
    zoo.omega[:3]           # their ground-truth frequencies
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["ACTIVATIONS", "SineMLPZoo", "make_sine_mlp_zoo", "mlp_forward", "check_mlp_params",
           "sample_points"]

#: Hidden-layer activations the zoo supports, by name.
ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh}


def _activation(name: str):
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; use one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def check_mlp_params(weights, biases) -> tuple[int, ...]:
    """Check a batch of MLP parameters and return the layer layout ``(n_0, ..., n_L)``.

    ``weights[l]`` has shape ``(N, n_{l+1}, n_l)`` and ``biases[l]`` shape ``(N, n_{l+1})``, with
    the same ``N`` throughout. Raises ``ValueError`` naming the first problem found.
    """
    weights, biases = list(weights), list(biases)
    if not weights or len(weights) != len(biases):
        raise ValueError(f"need one bias per weight matrix and at least one layer; got "
                         f"{len(weights)} weights and {len(biases)} biases")
    n = weights[0].shape[0] if weights[0].dim() == 3 else None
    layout = [weights[0].shape[-1]] if weights[0].dim() == 3 else []
    for l, (w, b) in enumerate(zip(weights, biases)):
        if not (torch.is_tensor(w) and torch.is_tensor(b)):
            raise TypeError(f"layer {l}: weights and biases must be torch tensors")
        if w.dim() != 3 or b.dim() != 2:
            raise ValueError(f"layer {l}: weights must be (N, out, in) and biases (N, out); got "
                             f"{tuple(w.shape)} and {tuple(b.shape)}")
        if w.shape[0] != n or b.shape[0] != n:
            raise ValueError(f"layer {l}: every layer must hold the same number of networks ({n}); "
                             f"got {w.shape[0]} weights and {b.shape[0]} biases")
        if w.shape[2] != layout[-1]:
            raise ValueError(f"layer {l}: weights take {w.shape[2]} inputs but the previous layer "
                             f"has {layout[-1]} neurons")
        if b.shape[1] != w.shape[1]:
            raise ValueError(f"layer {l}: {w.shape[1]} neurons but {b.shape[1]} biases")
        layout.append(w.shape[1])
    return tuple(int(v) for v in layout)


def mlp_forward(weights, biases, x: torch.Tensor, activation: str = "relu") -> torch.Tensor:
    """Evaluate a batch of MLPs at shared inputs.

    ``x`` has shape ``(P,)`` (scalar inputs, ``n_0 = 1``) or ``(P, n_0)``; the result has shape
    ``(N, P, n_L)``, squeezed to ``(N, P)`` when ``n_L = 1``. The activation acts on every layer but
    the last.
    """
    layout = check_mlp_params(weights, biases)
    act = _activation(activation)
    x = torch.as_tensor(x, dtype=weights[0].dtype, device=weights[0].device)
    if x.dim() == 1:
        x = x[:, None]
    if x.dim() != 2 or x.shape[1] != layout[0]:
        raise ValueError(f"x must have shape (P,) or (P, {layout[0]}), got {tuple(x.shape)}")
    h = x.T.expand(weights[0].shape[0], -1, -1)              # (N, n_0, P)
    for l, (w, b) in enumerate(zip(weights, biases)):
        h = torch.bmm(w, h) + b[:, :, None]
        if l < len(weights) - 1:
            h = act(h)
    out = h.transpose(1, 2)                                    # (N, P, n_L)
    return out[..., 0] if layout[-1] == 1 else out


def sample_points(n_points: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """The ``n_points`` equispaced fitting points of :math:`[-\\pi, \\pi]`."""
    return torch.linspace(-math.pi, math.pi, n_points, dtype=dtype, device=device)


@dataclass(frozen=True)
class SineMLPZoo:
    """Trained MLPs and the sinusoids they fit.

    ``weights[l]``: ``(N, n_{l+1}, n_l)``; ``biases[l]``: ``(N, n_{l+1})``; ``omega``,
    ``amplitude``, ``phase``: ``(N,)``; ``fit_mse``: each network's final mean squared error on its
    training points, and ``rel_fit_mse`` the same divided by the signal's mean square
    :math:`A^2/2` (0: a perfect fit, 1: no better than predicting zero).
    """

    weights: tuple
    biases: tuple
    omega: torch.Tensor
    amplitude: torch.Tensor
    phase: torch.Tensor
    fit_mse: torch.Tensor
    activation: str
    layout: tuple

    def __len__(self) -> int:
        return int(self.omega.shape[0])

    @property
    def rel_fit_mse(self) -> torch.Tensor:
        return self.fit_mse / (self.amplitude ** 2 / 2)

    def subset(self, index) -> "SineMLPZoo":
        """The networks at ``index`` (a slice, a list or a tensor of indices)."""
        if isinstance(index, slice):
            idx = index
        else:
            idx = torch.as_tensor(index, dtype=torch.long)
            if idx.dim() != 1:
                raise ValueError("index must be 1-D")
            if idx.numel() and (idx.min() < 0 or idx.max() >= len(self)):
                raise IndexError(f"index out of range for a zoo of {len(self)} networks")
        return SineMLPZoo(tuple(w[idx] for w in self.weights), tuple(b[idx] for b in self.biases),
                          self.omega[idx], self.amplitude[idx], self.phase[idx], self.fit_mse[idx],
                          self.activation, self.layout)

    def split(self, fractions=(0.7, 0.1, 0.2)) -> tuple["SineMLPZoo", ...]:
        """Consecutive parts in the given proportions (the zoo is already in random order)."""
        if abs(sum(fractions) - 1) > 1e-9 or any(f <= 0 for f in fractions):
            raise ValueError(f"fractions must be positive and sum to 1, got {fractions}")
        n = len(self)
        cuts = [0] + [round(n * sum(fractions[:i + 1])) for i in range(len(fractions))]
        cuts[-1] = n
        if any(b <= a for a, b in zip(cuts, cuts[1:])):
            raise ValueError(f"a zoo of {n} networks is too small for a split into {fractions}")
        return tuple(self.subset(slice(a, b)) for a, b in zip(cuts, cuts[1:]))

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Every network's output at ``x`` (shape ``(N, P)``)."""
        return mlp_forward(self.weights, self.biases, x, self.activation)

    def target(self, x: torch.Tensor) -> torch.Tensor:
        """Every network's sinusoid at ``x`` (shape ``(N, P)``)."""
        x = torch.as_tensor(x, dtype=self.omega.dtype)
        phase = self.omega[:, None] * x[None] + self.phase[:, None]
        return self.amplitude[:, None] * torch.sin(phase)


def make_sine_mlp_zoo(n: int, *, hidden=(16, 16), activation: str = "relu", n_points: int = 64,
                      steps: int = 600, lr: float = 1e-2, omega_range=(0.5, 3.0),
                      amplitude_range=(0.5, 2.0), generator: torch.Generator | None = None,
                      dtype=torch.float32, device=None) -> SineMLPZoo:
    """Draw ``n`` sinusoids and fit one MLP ``1 -> hidden -> 1`` to each (see the module).

    All randomness (the sinusoids and the initial weights) comes from ``generator``, a CPU
    ``torch.Generator``; the networks are then trained on ``device`` with full-batch Adam.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    hidden = tuple(hidden)
    if not hidden or any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in hidden):
        raise ValueError(f"hidden must be a non-empty sequence of positive ints, got {hidden!r}")
    _activation(activation)
    for name, v in (("n_points", n_points), ("steps", steps)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    for name, (lo, hi) in (("omega_range", omega_range), ("amplitude_range", amplitude_range)):
        if not 0 < lo <= hi:
            raise ValueError(f"{name} must be (low, high) with 0 < low <= high, got {(lo, hi)}")
    if generator is None:
        generator = torch.Generator().manual_seed(0)

    def uniform(shape, lo, hi):
        return lo + (hi - lo) * torch.rand(shape, generator=generator, dtype=torch.float64)

    omega = uniform(n, *omega_range)
    amplitude = uniform(n, *amplitude_range)
    phase = uniform(n, 0.0, 2 * math.pi)
    layout = (1, *hidden, 1)
    params = []
    for fan_in, fan_out in zip(layout[:-1], layout[1:]):
        bound = 1 / math.sqrt(fan_in)
        params.append(uniform((n, fan_out, fan_in), -bound, bound))
        params.append(uniform((n, fan_out), -bound, bound))

    params = [p.to(dtype=dtype, device=device).requires_grad_(True) for p in params]

    x = sample_points(n_points, dtype=dtype, device=device)
    y = (amplitude[:, None] * torch.sin(omega[:, None] * x.double()[None].cpu() + phase[:, None]))
    y = y.to(dtype=dtype, device=device)
    # Adam written out (torch.optim's defaults: betas 0.9, 0.999, eps 1e-8): the same updates as
    # torch.optim.Adam, without the seconds its first use spends importing torch._dynamo
    m1 = [torch.zeros_like(p) for p in params]
    m2 = [torch.zeros_like(p) for p in params]
    for t in range(1, steps + 1):
        pred = mlp_forward(params[0::2], params[1::2], x, activation)
        # sum over networks of each one's mean squared error: n independent problems
        loss = ((pred - y) ** 2).mean(dim=1).sum()
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g, a, v in zip(params, grads, m1, m2):
                a.lerp_(g, 0.1)
                v.mul_(0.999).addcmul_(g, g, value=0.001)
                denom = (v.sqrt() / math.sqrt(1 - 0.999 ** t)).add_(1e-8)
                p.addcdiv_(a, denom, value=-lr / (1 - 0.9 ** t))
    with torch.no_grad():
        weights = tuple(p.detach() for p in params[0::2])
        biases = tuple(p.detach() for p in params[1::2])
        fit = ((mlp_forward(weights, biases, x, activation) - y) ** 2).mean(dim=1)
    cast = dict(dtype=dtype, device=device)
    return SineMLPZoo(weights, biases, omega.to(**cast), amplitude.to(**cast), phase.to(**cast),
                      fit, activation, layout)
