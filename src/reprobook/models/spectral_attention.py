r"""Spectral Attention and Batched Spectral Attention (Kang et al., NeurIPS 2024).

A forecaster with a fixed look-back ``L`` sees nothing older than ``L`` steps. Spectral attention
(SA) gives it a memory: for a feature vector :math:`F_t` that the forecaster computes from window
``t`` (the windows taken in time order, stride 1), keep ``K`` exponential moving averages

.. math:: M_k(t) = \alpha_k M_k(t-1) + (1-\alpha_k) F_t,\qquad k = 1..K,

a bank of low-pass filters whose cut-off falls as :math:`\alpha_k \to 1` (an EMA with
:math:`\alpha = 0.999` averages about the last thousand windows). SA replaces :math:`F_t` by a
per-feature convex mixture of ``2K + 1`` components, high-pass, identity and low-pass,

.. math:: F'_{t,d} = \sum_k p_{d,k}^{hi}\,2\,(F_{t,d}-M_{k,d}(t)) + p_{d}^{id}\,F_{t,d}
          + \sum_k p_{d,k}^{lo}\,2\,M_{k,d}(t),\qquad p_{d,\cdot} = \mathrm{softmax}(S_{d,\cdot}),

with :math:`S` the learnable "spectral attention matrix" (one row of ``2K + 1`` logits per
feature). The factor 2 makes every weighting that is symmetric between :math:`p^{hi}_k` and
:math:`p^{lo}_k` return :math:`F_t` exactly, so SA is inserted into a trained forecaster without
changing its output (the initial logits, :math:`-j^2/4` at distance ``j`` from the identity, are
symmetric), and fine-tuning moves the weights towards the low or the high frequencies.

**Batched SA (BSA).** Training one window at a time is slow. With a mini-batch of ``B``
*consecutive* windows :math:`F_0..F_{B-1}` and the state :math:`M^{prev}` carried from the previous
batch, the recursion unrolls into one matrix product per filter,

.. math:: M_k(i) = \alpha_k^{\,i+1} M_k^{prev} + \sum_{j \le i} (1-\alpha_k)\,\alpha_k^{\,i-j}\,F_j,

i.e. :math:`M_k = \Lambda_k F + c_k M_k^{prev}` with the lower-triangular
:math:`(\Lambda_k)_{ij} = (1-\alpha_k)\alpha_k^{i-j}` and :math:`(c_k)_i = \alpha_k^{i+1}`. Gradients
flow from a window's loss into the features of the earlier windows of its batch (truncated
back-propagation through time of length ``B``); the carried state is detached. The smoothing rates
are learnable, :math:`\alpha_k = \sigma(\theta_k)`.

Functions: :func:`ema_sequential` (the recursion, the reference), :func:`ema_batched` (the matrix
form), :func:`decay_matrix`. Modules: :class:`SpectralAttention` and :class:`SpectralForecaster`,
which inserts SA into an :class:`~reprobook.models.inverted.InvertedForecaster` (iTransformer, SOFTS)
without touching its weights.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["decay_matrix", "ema_sequential", "ema_batched", "SpectralAttention", "SpectralForecaster",
           "PLACES"]

PLACES = ("input", "encoded")


def _alphas(alphas) -> torch.Tensor:
    a = torch.as_tensor(alphas)
    if a.ndim != 1 or a.numel() < 1:
        raise ValueError(f"alphas must be a 1-d sequence of smoothing rates, got shape {tuple(a.shape)}")
    if not bool(((a > 0) & (a < 1)).all()):
        raise ValueError(f"smoothing rates must lie in (0, 1), got {a.tolist()}")
    return a


def _state(F: torch.Tensor, K: int, state):
    """The carried state ``[K, *feat]``; ``None`` starts every filter at the first feature vector."""
    if state is None:
        return F[0].detach().unsqueeze(0).expand(K, *F.shape[1:])
    if state.shape != (K, *F.shape[1:]):
        raise ValueError(f"state must be [K={K}, {', '.join(map(str, F.shape[1:]))}], got {tuple(state.shape)}")
    return state


def decay_matrix(alphas, B: int) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``(Lam [K, B, B], carry [K, B])``: :math:`\Lambda_{kij} = (1-\alpha_k)\alpha_k^{i-j}` for
    ``j <= i`` (0 above the diagonal) and :math:`c_{ki} = \alpha_k^{i+1}`. Differentiable in
    ``alphas``."""
    a = _alphas(alphas)
    if isinstance(B, bool) or not isinstance(B, int) or B < 1:
        raise ValueError(f"B must be a positive int, got {B!r}")
    i = torch.arange(B, device=a.device)
    lag = (i[:, None] - i[None, :]).to(a.dtype)                       # i - j
    lower = lag >= 0
    # alpha^(i-j) through exp(log) so that the powers stay differentiable; masked above the diagonal
    powers = torch.exp(lag.clamp(min=0)[None] * torch.log(a)[:, None, None])
    lam = torch.where(lower[None], (1 - a)[:, None, None] * powers, torch.zeros((), dtype=a.dtype))
    carry = torch.exp((i + 1).to(a.dtype)[None] * torch.log(a)[:, None])
    return lam, carry


def ema_sequential(F: torch.Tensor, alphas, state: torch.Tensor | None = None):
    """The recursion, one window after another. ``F [B, *feat]`` in time order; returns
    ``(M [B, K, *feat], last [K, *feat])`` where ``last`` is the state after the last window."""
    a = _alphas(alphas).to(F.dtype)
    K = a.numel()
    m = _state(F, K, state)
    shape = (K,) + (1,) * (F.ndim - 1)
    out = []
    for t in range(F.shape[0]):
        m = a.view(shape) * m + (1 - a.view(shape)) * F[t]
        out.append(m)
    return torch.stack(out), m


def ema_batched(F: torch.Tensor, alphas, state: torch.Tensor | None = None):
    """The same EMAs as :func:`ema_sequential` by one lower-triangular product per filter."""
    a = _alphas(alphas).to(F.dtype)
    K, B = a.numel(), F.shape[0]
    m0 = _state(F, K, state)
    lam, carry = decay_matrix(a, B)
    flat = F.reshape(B, -1)
    M = torch.einsum("kij,jf->ikf", lam, flat) + carry.T[:, :, None] * m0.reshape(K, -1)[None]
    M = M.reshape(B, K, *F.shape[1:])
    return M, M[-1]


class SpectralAttention(nn.Module):
    """SA on features ``F [B, *feature_shape]`` (see the module docstring).

    ``alphas`` -- initial smoothing rates (``learn_alpha`` makes them parameters through a logit);
    ``bptt`` -- let gradients flow between the windows of a batch (False detaches the EMAs);
    ``carry`` -- carry the state from one call to the next (False restarts it at every batch, as if
    batches were unrelated: the control for shuffled training).

    The state is kept on the module (``self.state``, detached); call :meth:`reset` before a new pass
    through a series."""

    def __init__(self, feature_shape: Sequence[int], alphas=(0.9, 0.99, 0.999), *,
                 learn_alpha: bool = True, bptt: bool = True, carry: bool = True):
        super().__init__()
        shape = tuple(int(s) for s in feature_shape)
        if not shape or any(s < 1 for s in shape):
            raise ValueError(f"feature_shape must be positive sizes, got {feature_shape}")
        a = _alphas(alphas).double()
        self.feature_shape, self.K = shape, int(a.numel())
        logit = torch.log(a / (1 - a)).float()
        self.alpha_logit = nn.Parameter(logit) if learn_alpha else nn.Buffer(logit)
        K = self.K
        # components ordered [hi_K .. hi_1, identity, lo_1 .. lo_K]; logits -(distance)^2 / 4
        dist = torch.arange(2 * K + 1, dtype=torch.float32) - K
        init = -(dist ** 2) / 4
        self.logits = nn.Parameter(init.view(-1, *([1] * len(shape))).expand(2 * K + 1, *shape).clone())
        self.bptt, self.carry = bool(bptt), bool(carry)
        self.state = None

    @property
    def alphas(self) -> torch.Tensor:
        return torch.sigmoid(self.alpha_logit)

    def reset(self):
        self.state = None

    def weights(self) -> torch.Tensor:
        """Softmax weights ``[2K + 1, *feature_shape]`` in the order hi_K..hi_1, id, lo_1..lo_K."""
        return torch.softmax(self.logits, dim=0)

    def mass(self) -> dict[str, torch.Tensor]:
        """Mean weight over features: ``{"identity", "low", "high"}`` with ``low``/``high`` ``[K]``
        ordered as ``alphas`` (index ``K - 1`` is the slowest filter)."""
        w = self.weights().reshape(2 * self.K + 1, -1).mean(1)
        K = self.K
        return {"identity": w[K], "low": w[K + 1:], "high": w[:K].flip(0)}

    def forward(self, F: torch.Tensor) -> torch.Tensor:
        if F.shape[1:] != self.feature_shape:
            raise ValueError(f"SpectralAttention expects [batch, {', '.join(map(str, self.feature_shape))}], "
                             f"got {tuple(F.shape)}")
        state = self.state if (self.carry and self.state is not None
                               and self.state.dtype == F.dtype and self.state.device == F.device) else None
        M, last = ema_batched(F, self.alphas, state)           # [B, K, *feat]
        self.state = last.detach()
        if not self.bptt:
            M = M.detach()
        w = self.weights().to(F.dtype)                          # [2K+1, *feat]
        K = self.K
        hi = w[:K].flip(0)                                      # [K, *feat], hi_1 .. hi_K
        lo = w[K + 1:]
        # sum_k hi_k 2 (F - M_k) + id F + sum_k lo_k 2 M_k = (2 sum hi + id) F + sum_k 2 (lo_k - hi_k) M_k
        return (2 * hi.sum(0) + w[K]) * F + (2 * (lo - hi)[None] * M).sum(1)


class SpectralForecaster(nn.Module):
    """An :class:`~reprobook.models.inverted.InvertedForecaster` with SA inserted, its own weights
    untouched (shared, not copied).

    ``place="input"`` -- SA on the normalised look-back ``[B, C, L]`` (after RevIN, before the
    series embedding: where the official code puts it for iTransformer); ``place="encoded"`` -- SA on
    the encoder's output tokens ``[B, C, d]`` (before the linear head). The number of channels is
    fixed at construction (SA has one logit row per feature)."""

    def __init__(self, base: nn.Module, n_channels: int, place: str = "input", **sa_kwargs):
        super().__init__()
        if place not in PLACES:
            raise ValueError(f"unknown place {place!r}; choose from {PLACES}")
        for attr in ("embed", "layers", "norm", "head", "revin", "lookback", "horizon"):
            if not hasattr(base, attr):
                raise TypeError(f"base must be an InvertedForecaster (it has no {attr!r})")
        self.base, self.place = base, place
        width = base.lookback if place == "input" else base.embed.out_features
        self.sa = SpectralAttention((int(n_channels), width), **sa_kwargs)
        self.lookback, self.horizon = base.lookback, base.horizon

    def reset(self):
        self.sa.reset()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = self.base
        if x.ndim != 3 or x.shape[1] != b.lookback:
            raise ValueError(f"expected input [batch, {b.lookback}, channels], got {tuple(x.shape)}")
        if b.revin is not None:
            x = b.revin.norm(x)
        z = x.transpose(1, 2)                                   # [B, C, L]
        if self.place == "input":
            z = self.sa(z)
        h = b.drop(b.embed(z))
        for layer in b.layers:
            h = layer(h)
        h = b.norm(h)
        if self.place == "encoded":
            h = self.sa(h)
        y = b.head(h).transpose(1, 2)
        return b.revin.denorm(y) if b.revin is not None else y

