r"""Measures of oversmoothing: how alike the token representations of one input have become.

For one input, the tokens' representations are the rows :math:`x_1,\dots,x_n\in\mathbb R^d` of
:math:`X\in\mathbb R^{n\times d}`.

* :func:`token_cosine`: the mean cosine similarity over the :math:`n(n-1)` ordered pairs of
  *distinct* tokens, :math:`\frac{1}{n(n-1)}\sum_{i\ne j}\frac{x_i^\top x_j}{\|x_i\|\|x_j\|}`,
  averaged over the inputs of a batch. 1 means every token points the same way (fully smoothed).
* :func:`high_frequency_share`: the share of the signal's energy outside the DC (token-mean)
  component, :math:`\|X - \mathbf 1\bar x^\top\|_F^2 / \|X\|_F^2` with :math:`\bar x` the mean
  token. Along the token axis the discrete Fourier transform's zero-frequency coefficient is
  :math:`\sqrt n\,\bar x`, so by Parseval this is exactly the energy in all non-zero frequencies.
  0 means every token is the same vector.
* :func:`high_frequency_gain`: how a mixing matrix :math:`M` (an attention map or a graph filter)
  scales the non-DC part of a signal, :math:`\|P(MX)\|_F / \|PX\|_F` with
  :math:`P = I - \tfrac1n\mathbf 1\mathbf 1^\top`. A low-pass filter has gain below 1; the identity
  has gain 1. With ``relative=True`` the gain is divided by the filter's gain on the constant
  (DC) signal, :math:`|\tfrac1n\mathbf 1^\top M\mathbf 1|` (1 for a row-stochastic attention map,
  :math:`|w_0+w_1+w_K|` for a GFSA filter): how much of the high-frequency part survives *relative
  to* the token mean, which is what the next LayerNorm sees.
"""
from __future__ import annotations

import torch

__all__ = ["token_cosine", "high_frequency_share", "high_frequency_gain"]


def _check(x: torch.Tensor, name: str = "x") -> None:
    if x.ndim != 3 or x.shape[1] < 2:
        raise ValueError(f"{name} must be [batch, tokens >= 2, features], got {tuple(x.shape)}")


def token_cosine(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Mean pairwise cosine similarity of distinct tokens, averaged over the batch (a scalar)."""
    _check(x)
    u = x / x.norm(dim=-1, keepdim=True).clamp_min(eps)
    gram = u @ u.transpose(-1, -2)                                     # [B, n, n]
    n = x.shape[1]
    off_diag = gram.sum(dim=(-1, -2)) - gram.diagonal(dim1=-2, dim2=-1).sum(-1)
    return (off_diag / (n * (n - 1))).mean()


def high_frequency_share(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Share of energy outside the token-mean (DC) component, averaged over the batch."""
    _check(x)
    hf = (x - x.mean(dim=1, keepdim=True)).pow(2).sum(dim=(-1, -2))
    return (hf / x.pow(2).sum(dim=(-1, -2)).clamp_min(eps)).mean()


def high_frequency_gain(m: torch.Tensor, x: torch.Tensor, relative: bool = False,
                        eps: float = 1e-12) -> torch.Tensor:
    """``||P (m @ x)|| / ||P x||`` per matrix: ``m: [..., n, n]``, ``x: [..., n, d]`` (broadcast);
    returns the gains with the broadcast batch shape. ``relative``: divided by the DC gain."""
    if m.ndim < 2 or m.shape[-1] != m.shape[-2] or x.ndim < 2 or x.shape[-2] != m.shape[-1]:
        raise ValueError(f"m must be [..., n, n] and x [..., n, d] with the same n, got "
                         f"{tuple(m.shape)} and {tuple(x.shape)}")
    y = m @ x
    num = (y - y.mean(dim=-2, keepdim=True)).pow(2).sum(dim=(-1, -2)).sqrt()
    den = (x - x.mean(dim=-2, keepdim=True)).pow(2).sum(dim=(-1, -2)).sqrt()
    gain = num / den.clamp_min(eps)
    if relative:
        gain = gain / m.sum(dim=-1).mean(dim=-1).abs().clamp_min(eps)
    return gain
