r"""START's saliency-driven token-aware style perturbation for selective SSMs, and MixStyle.

**The SSM's implicit attention.**  A selective scan (one channel ``d``, states ``n``)
:math:`h_t = e^{\Delta_t A} h_{t-1} + \Delta_t B_t u_t,\ y_t = C_t h_t + D u_t` unrolls into a
linear map of its inputs, :math:`y_t = \sum_{s \le t} \alpha_{d,t,s} u_s + D u_t`, with the
causal, input-dependent matrix

.. math:: \alpha_{d,t,s} = \sum_n C_{t,n}\,
          \exp\Big(\sum_{r=s+1}^{t} \Delta_{r,d} A_{d,n}\Big)\, \Delta_{s,d} B_{s,n}
          \qquad (s \le t), \quad 0 \text{ otherwise}.

:func:`implicit_attention` materialises it (``O(D N L^2)``; the tests check that it reproduces the
scan).  Because ``Delta, B, C`` are projections of the tokens, a token's domain style enters this
matrix and, through the products of gates, is carried along the whole sequence.

**Token saliency** (START-M): how much token ``s`` feeds the outputs,
:math:`S_s = \sum_d \big|\sum_{t \ge s} \alpha_{d,t,s}\big|`.  The column sum needs no ``L x L``
matrix: with the reverse scan :math:`G_{s,d,n} = C_{s,n} + e^{\Delta_{s+1,d} A_{d,n}} G_{s+1,d,n}`,
:math:`\sum_{t \ge s} \alpha_{d,t,s} = \Delta_{s,d} \sum_n B_{s,n} G_{s,d,n}`
(:func:`attention_saliency`, ``O(D N L)``).  The absolute value sits outside the sum over ``t``
(inside the sum over channels) so that the cost stays linear; this placement is our reconstruction.
START-X takes the saliency from the input sequence instead, :math:`S_s = \|\Delta_s \odot u_s\|_1`
(:func:`input_saliency`; our reading of the paper's variant).

**Style perturbation** (MixStyle's interpolation, applied token-wise).  With ``mu, sigma`` the
per-sample, per-channel mean and std of the tokens (over the sequence; gradient stopped), a partner
``j`` drawn by a random permutation of the batch and :math:`\lambda \sim \mathrm{Beta}(a, a)`,

.. math:: \tilde u_s = (\lambda\sigma_i + (1-\lambda)\sigma_j)\,\frac{u_s - \mu_i}{\sigma_i}
          + \lambda\mu_i + (1-\lambda)\mu_j ,

replacing only the tokens of a mask: all of them (**MixStyle everywhere**), the top ``ceil(r L)``
by saliency (**START-M / START-X**) or ``ceil(r L)`` at random (**random-r**, a control).
:class:`StylePerturbation` is the hook that :mod:`reprobook.vision.vision_mamba` calls on the tokens
that feed the ``Delta, B, C`` projections, in training, with probability ``p`` per batch.
"""
from __future__ import annotations

import math

import torch

from ..kernels.selective_scan import linear_scan

__all__ = ["MODES", "implicit_attention", "attention_saliency", "input_saliency", "top_mask",
           "style_mix", "StylePerturbation", "standardized_gap"]

MODES = ("mixstyle", "start-m", "start-x", "random")


def _check_scan(delta, A, B, C):
    if delta.dim() < 2 or A.dim() < 2 or B.dim() < 2 or C.dim() < 2:
        raise ValueError("delta must be [..., D, L], A [..., D, N], B and C [..., N, L]")
    D, L = delta.shape[-2:]
    N = A.shape[-1]
    if A.shape[-2] != D or B.shape[-2:] != (N, L) or C.shape[-2:] != (N, L):
        raise ValueError(f"shapes do not match: delta {tuple(delta.shape)} (..., D, L), A "
                         f"{tuple(A.shape)} (..., D, N), B {tuple(B.shape)}, C {tuple(C.shape)} "
                         f"(..., N, L)")


def implicit_attention(delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
                       C: torch.Tensor) -> torch.Tensor:
    """The scan's matrix ``alpha [..., D, L(t), L(s)]`` (module docstring) from ``delta [..., D, L]``,
    ``A [..., D, N]``, ``B, C [..., N, L]`` (leading dims broadcast)."""
    _check_scan(delta, A, B, C)
    L = delta.shape[-1]
    cs = torch.cumsum(delta[..., :, None, :] * A[..., :, :, None], dim=-1)        # [..., D, N, L]
    seg = cs[..., :, None] - cs[..., None, :]                                     # [..., D, N, t, s]
    causal = torch.ones(L, L, dtype=torch.bool, device=delta.device).tril()
    decay = torch.exp(seg.masked_fill(~causal, float("-inf")))
    return torch.einsum("...nt,...dnts,...ds,...ns->...dts", C, decay, delta, B)


def attention_saliency(delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
                       C: torch.Tensor) -> torch.Tensor:
    """START-M's token saliency ``[..., L]``: ``sum_d |sum_t alpha_{d,t,s}|``, by a reverse scan."""
    _check_scan(delta, A, B, C)
    a = torch.exp(delta[..., :, None, :] * A[..., :, :, None])                    # [..., D, N, L]
    a_next = torch.nn.functional.pad(a[..., 1:], (0, 1), value=0.0)               # gate of step s+1
    Cx = C[..., None, :, :].expand_as(a)
    G = linear_scan(a_next.flip(-1), Cx.flip(-1).contiguous()).flip(-1)           # [..., D, N, L]
    col = delta * (B[..., None, :, :] * G).sum(-2)                                # [..., D, L]
    return col.abs().sum(-2)


def input_saliency(delta: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """START-X's token saliency ``[..., L]``: ``||Delta_s * u_s||_1`` over channels."""
    if delta.shape != u.shape:
        raise ValueError(f"delta and u must have the same shape, got {tuple(delta.shape)} and "
                         f"{tuple(u.shape)}")
    return (delta * u).abs().sum(-2)


def top_mask(score: torch.Tensor, ratio: float) -> torch.Tensor:
    """Boolean mask ``[..., L]`` of the ``ceil(ratio * L)`` highest scores along the last dim."""
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"ratio must lie in (0, 1], got {ratio!r}")
    L = score.shape[-1]
    k = math.ceil(ratio * L)
    idx = score.topk(k, dim=-1).indices
    return torch.zeros_like(score, dtype=torch.bool).scatter_(-1, idx, True)


def style_mix(u: torch.Tensor, mask: torch.Tensor, perm: torch.Tensor, lam: torch.Tensor,
              eps: float = 1e-6) -> torch.Tensor:
    """Mix the token style of ``u [B, ..., C, L]`` with that of ``u[perm]`` on the tokens of
    ``mask`` (broadcasts to ``[B, ..., 1, L]``), weight ``lam [B]`` on the sample's own style
    (module docstring). Statistics are per sample and channel over ``L``, gradient stopped."""
    if perm.shape != (u.shape[0],) or lam.shape != (u.shape[0],):
        raise ValueError(f"perm and lam must be [{u.shape[0]}], got {tuple(perm.shape)} and "
                         f"{tuple(lam.shape)}")
    mu = u.detach().mean(-1, keepdim=True)
    sig = (u.detach().var(-1, keepdim=True, unbiased=False) + eps).sqrt()
    lam = lam.view(-1, *([1] * (u.dim() - 1))).to(u.dtype)
    mu_mix = lam * mu + (1 - lam) * mu[perm]
    sig_mix = lam * sig + (1 - lam) * sig[perm]
    mixed = sig_mix * (u - mu) / sig + mu_mix
    return torch.where(mask, mixed, u)


class StylePerturbation:
    """The training-time hook: ``hook(u, params) -> u~`` on the tokens ``u [B, K, D, L]`` that feed
    the ``Delta, B, C`` projections, with ``params`` the scan's clean ``delta [B, K, D, L]``,
    ``A [K, D, N]``, ``B, C [B, K, N, L]``.

    ``mode``: ``"mixstyle"`` (all tokens), ``"start-m"``, ``"start-x"`` (top ``ratio`` by saliency)
    or ``"random"`` (``ratio`` at random); ``p``: probability of perturbing a batch; ``alpha``: the
    Beta(alpha, alpha) of the mixing weight. Randomness from its own ``torch.Generator(seed)``."""

    def __init__(self, mode: str, p: float = 0.5, alpha: float = 0.1, ratio: float = 0.5,
                 seed: int = 0):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose from {MODES}")
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p must lie in [0, 1], got {p!r}")
        if alpha <= 0:
            raise ValueError(f"alpha must be positive, got {alpha!r}")
        if not 0.0 < ratio <= 1.0:
            raise ValueError(f"ratio must lie in (0, 1], got {ratio!r}")
        self.mode, self.p, self.alpha, self.ratio = mode, p, alpha, ratio
        self.gen = torch.Generator().manual_seed(int(seed))
        self.last_mask = None

    def mask(self, u: torch.Tensor, params: dict) -> torch.Tensor:
        """The tokens to perturb, ``[B, K, 1, L]`` boolean."""
        if self.mode == "mixstyle":
            m = torch.ones(u.shape[:2] + u.shape[-1:], dtype=torch.bool)
        elif self.mode == "random":
            m = top_mask(torch.rand(u.shape[:2] + u.shape[-1:], generator=self.gen), self.ratio)
        else:
            with torch.no_grad():
                if self.mode == "start-m":
                    s = attention_saliency(params["delta"], params["A"], params["B"], params["C"])
                else:
                    s = input_saliency(params["delta"], u)
            m = top_mask(s.cpu(), self.ratio)
        return m[:, :, None, :].to(u.device)

    def __call__(self, u: torch.Tensor, params: dict) -> torch.Tensor:
        if u.dim() != 4:
            raise ValueError(f"tokens must be [B, K, D, L], got shape {tuple(u.shape)}")
        if u.shape[0] < 2 or torch.rand((), generator=self.gen).item() >= self.p:
            self.last_mask = None
            return u
        perm = torch.randperm(u.shape[0], generator=self.gen)
        lam = _beta(self.alpha, u.shape[0], self.gen)
        m = self.mask(u, params)
        self.last_mask = m
        return style_mix(u, m, perm.to(u.device), lam.to(u.device))


def _beta(alpha: float, n: int, gen: torch.Generator) -> torch.Tensor:
    """``n`` draws of Beta(alpha, alpha) from ``gen``, as ``X / (X + Y)`` with ``X, Y ~ Gamma(alpha)``
    (torch's Beta distribution takes no generator)."""
    g = torch._standard_gamma(torch.full((2, n), float(alpha), dtype=torch.float64), generator=gen)
    return (g[0] / (g[0] + g[1]).clamp_min(1e-300)).float()


def standardized_gap(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-8) -> float:
    """Distance between two domains' per-sample statistics ``a [n_a, c]``, ``b [n_b, c]``: the
    channel mean of ``|mean_a - mean_b| / sqrt((var_a + var_b) / 2)`` (a standardised mean
    difference, as a two-sample effect size per channel)."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1] or len(a) < 2 or len(b) < 2:
        raise ValueError(f"a and b must be [n, c] with the same c and n >= 2, got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    a, b = a.double(), b.double()
    pooled = ((a.var(0) + b.var(0)) / 2 + eps).sqrt()
    return float(((a.mean(0) - b.mean(0)).abs() / pooled).mean())
