r"""Fake (simulated) integer quantisation of weights and activations, and activation entropy.

**Weights** (:func:`quantize_weight`): symmetric round-to-nearest with one absmax scale per group
of ``group_size`` consecutive input weights of an output row (``group_size=None``: one scale per
output row),

.. math::

   s = \frac{\max_{j\in g}|W_{ij}|}{2^{b-1}-1}, \qquad
   \hat W_{ij} = s\,\operatorname{clamp}\!\big(\operatorname{round}(W_{ij}/s),\,-(2^{b-1}-1),\,2^{b-1}-1\big).

A group of 64 weights with its own scale is the integer analogue of the 4-bit block format
(blocks of 64, absmax scale) that the Q-VLM code takes from bitsandbytes.

**Activations** (:func:`quantize_act`): asymmetric (min/max) uniform quantisation to :math:`2^b`
levels over a range :math:`[c\,\ell,\ c\,u]`, where :math:`[\ell, u]` is a calibrated range and
:math:`c\in(0,1]` a *clipping ratio*: the searched "rounding function" of a layer. With
:math:`\Delta = c(u-\ell)/(2^b-1)` and the integer zero point :math:`z=\operatorname{round}(c\ell/\Delta)`,

.. math::

   \hat x = \Delta\,\Big(\operatorname{clamp}\big(\operatorname{round}(x/\Delta) - z,\ 0,\ 2^b-1\big) + z\Big).

Values on the grid are fixed points; values outside the clipped range saturate. The range is first
widened to contain 0, and the integer zero point shifts the grid by less than half a step, so that
0 is represented exactly (padding and ReLU/GELU zeros stay zero).
``lo``/``hi`` may be scalars (per tensor) or one per leading row (per sample, ``[B, 1, 1]``).

**Entropy** (:func:`histogram_entropy`): the Shannon entropy (nats) of the histogram of a set of
activation values over a fixed range, :math:`H=-\sum_k p_k\ln p_k`, :math:`p_k` the share of values
in bin :math:`k`. A tensor whose mass sits in a few bins (a heavy outlier stretches the range) has
low entropy; one spread evenly over the range has entropy near :math:`\ln(\text{bins})`.
"""
from __future__ import annotations

import math

import torch

__all__ = ["quantize_weight", "quantize_act", "histogram_entropy", "storage_ratio"]


def _bits(bits) -> int:
    if isinstance(bits, bool) or not isinstance(bits, int) or not 2 <= bits <= 16:
        raise ValueError(f"bits must be an int in [2, 16], got {bits!r}")
    return bits


def quantize_weight(W: torch.Tensor, bits: int = 4, group_size: int | None = 64) -> torch.Tensor:
    """Symmetric round-to-nearest fake quantisation of a ``[out, in]`` weight (see module doc)."""
    bits = _bits(bits)
    if not isinstance(W, torch.Tensor) or W.ndim != 2:
        raise ValueError(f"W must be a 2-d [out, in] tensor, got {getattr(W, 'shape', type(W))}")
    out, inp = W.shape
    g = inp if group_size is None else group_size
    if isinstance(g, bool) or not isinstance(g, int) or g < 1 or inp % g:
        raise ValueError(f"group_size must divide in_features={inp}, got {group_size!r}")
    qmax = 2 ** (bits - 1) - 1
    Wg = W.reshape(out, inp // g, g)
    s = Wg.abs().amax(dim=-1, keepdim=True) / qmax
    s = torch.where(s > 0, s, torch.ones_like(s))          # an all-zero group stays zero
    return (torch.clamp(torch.round(Wg / s), -qmax, qmax) * s).reshape(out, inp)


def quantize_act(x: torch.Tensor, bits: int, lo, hi, clip=1.0) -> torch.Tensor:
    """Asymmetric fake quantisation of ``x`` to ``2**bits`` levels over ``[clip*lo, clip*hi]``."""
    bits = _bits(bits)
    lo = torch.as_tensor(lo, dtype=x.dtype, device=x.device)
    hi = torch.as_tensor(hi, dtype=x.dtype, device=x.device)
    clip = torch.as_tensor(clip, dtype=x.dtype, device=x.device)
    if torch.any(clip <= 0) or torch.any(clip > 1):
        raise ValueError("clip ratios must lie in (0, 1]")
    if torch.any(hi < lo):
        raise ValueError("activation range needs lo <= hi")
    n = 2 ** bits - 1
    lo, hi = clip * torch.minimum(lo, torch.zeros_like(lo)), clip * torch.maximum(hi, torch.zeros_like(hi))
    step = (hi - lo) / n
    step = torch.where(step > 0, step, torch.ones_like(step))      # a constant-zero input
    z = torch.round(lo / step)
    return (torch.clamp(torch.round(x / step) - z, 0, n) + z) * step


def histogram_entropy(x: torch.Tensor, lo: float, hi: float, bins: int = 128) -> float:
    """Shannon entropy (nats) of the histogram of the values of ``x`` over ``[lo, hi]``; values
    outside the range are counted in the edge bins."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
        raise ValueError(f"bins must be an int >= 2, got {bins!r}")
    if not hi > lo:
        raise ValueError(f"the histogram range needs hi > lo, got [{lo}, {hi}]")
    v = x.detach().reshape(-1).double().clamp(lo, hi)
    if v.numel() == 0:
        raise ValueError("histogram_entropy needs at least one value")
    p = torch.histc(v, bins=bins, min=float(lo), max=float(hi))
    p = p[p > 0] / v.numel()
    return float(-(p * p.log()).sum())


def storage_ratio(n_weights: int, bits: int, group_size: int | None, in_features: int,
                  full_bits: int = 32, scale_bits: int = 16) -> float:
    """Weight-storage compression of group quantisation: full-precision bits over quantised bits
    (the codes plus one ``scale_bits`` scale per group)."""
    g = in_features if group_size is None else group_size
    q = n_weights * _bits(bits) + math.ceil(n_weights / g) * scale_bits
    return n_weights * full_bits / q
