r"""Graph-filter-based self-attention (GFSA; Choi, Wi, Kim, Shin, Lee, Trask & Park, NeurIPS 2024).

**Self-attention as a graph filter.** One head's attention matrix
:math:`\bar A = \mathrm{softmax}(QK^\top/\sqrt{d_h})\in\mathbb R^{n\times n}` is row-stochastic
(:math:`\bar A\mathbf 1 = \mathbf 1`): read it as the weighted adjacency of a directed graph on the
``n`` tokens. Then :math:`\bar A V` is a first-order graph filter applied to the signal ``V``: each
token is replaced by a weighted average of its neighbours. Its eigenvalue on the constant vector is
1, so the "DC" (token-mean) component passes unchanged, and repeated averaging across many layers
drives the tokens toward that constant vector: oversmoothing.

**The filter GFSA learns** (per head, three scalars :math:`w_0, w_1, w_K`):

.. math:: \mathrm{GF}(\bar A) = w_0 I + w_1 \bar A + w_K \bar A^K,
          \qquad \bar A^K \approx \bar A + (K-1)(\bar A^2 - \bar A),

a polynomial graph filter whose high-order term is replaced by its first-order Taylor expansion
around :math:`\bar A` (so any ``K`` costs one extra product). With :math:`w_0 > 0` or a negative
:math:`w_K` the filter can keep (or boost) the high-frequency part that :math:`\bar A` damps. At
:math:`(w_0, w_1, w_K) = (0, 1, 0)` it *is* softmax attention; for ``K = 2`` the Taylor form is
exact. The official code initialises :math:`w_K = 0` (learnable per head) with :math:`w_1 = 1`
fixed and :math:`w_0` a hyper-parameter; the paper's pseudocode lets :math:`w_0, w_1` be learned.

**Three ways to compute** :math:`\mathrm{GF}(\bar A)\,V` (``impl=``):

* ``"matrix"``: form the :math:`n\times n` filter, then multiply ``V``: the official code's form;
  :math:`\bar A^2` costs :math:`O(n^3)` per head.
* ``"explicit"``: form :math:`\bar A` once and apply the filter to the values,
  :math:`w_0V + w_1\bar AV + w_K[\bar AV + (K-1)(\bar A(\bar AV) - \bar AV)]`: two
  :math:`n\times n` by :math:`n\times d_h` products instead of one, :math:`O(n^2 d_h)`.
* ``"sdpa"``: the same on fused kernels: :math:`\bar A(\bar AV)` is attention with the same
  queries and keys applied to the values :math:`\bar AV`, so GFSA is two calls of
  ``scaled_dot_product_attention`` and never stores :math:`\bar A` (flash-attention compatible).

:func:`gfsa_matrix` and :func:`gfsa_apply` are the two forms as functions, :func:`exact_filter` the
filter with the true matrix power (ground truth for the Taylor approximation), and
:class:`GraphFilterAttention` the multi-head layer (``filter="softmax"`` is the baseline,
``"identity"`` a layer that mixes no tokens: :math:`\bar A = I`).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["FILTERS", "IMPLS", "gfsa_matrix", "exact_filter", "gfsa_apply", "GraphFilterAttention"]

FILTERS = ("softmax", "gfsa", "identity")
IMPLS = ("explicit", "matrix", "sdpa")


def _check_K(K) -> int:
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise ValueError(f"K must be an int >= 1, got {K!r}")
    return K


def _check_att(att: torch.Tensor) -> None:
    if att.ndim < 2 or att.shape[-1] != att.shape[-2]:
        raise ValueError(f"att must be [..., n, n] (square in its last two dims), got "
                         f"{tuple(att.shape)}")


def _per_head(w, like: torch.Tensor, head_dim: int = -3) -> torch.Tensor:
    """A scalar or a ``[H]`` vector of weights, shaped to broadcast over ``[..., H, n, m]``."""
    w = torch.as_tensor(w, dtype=like.dtype, device=like.device)
    if w.ndim == 0:
        return w
    if w.ndim != 1 or like.ndim < 3 or w.shape[0] != like.shape[head_dim]:
        raise ValueError(f"per-head weights must be a scalar or [H] with H = {like.shape[head_dim]} "
                         f"(dim {head_dim} of {tuple(like.shape)}), got shape {tuple(w.shape)}")
    return w.view(-1, 1, 1)


def gfsa_matrix(att: torch.Tensor, w0, w1, wK, K: int) -> torch.Tensor:
    r"""The GFSA filter matrix :math:`w_0I + w_1\bar A + w_K[\bar A + (K-1)(\bar A^2-\bar A)]`.

    ``att``: ``[..., H, n, n]`` attention matrices (or ``[n, n]`` with scalar weights); ``w0, w1,
    wK``: scalars or per-head ``[H]``. Returns a tensor of ``att``'s shape."""
    _check_att(att)
    K = _check_K(K)
    n = att.shape[-1]
    eye = torch.eye(n, dtype=att.dtype, device=att.device)
    high = att + (K - 1) * (att @ att - att)
    return (_per_head(w0, att) * eye + _per_head(w1, att) * att + _per_head(wK, att) * high)


def exact_filter(att: torch.Tensor, w0, w1, wK, K: int) -> torch.Tensor:
    r"""The polynomial filter with the exact power, :math:`w_0I + w_1\bar A + w_K\bar A^K`
    (``K - 1`` matrix products): the ground truth the Taylor form approximates."""
    _check_att(att)
    K = _check_K(K)
    eye = torch.eye(att.shape[-1], dtype=att.dtype, device=att.device)
    return (_per_head(w0, att) * eye + _per_head(w1, att) * att
            + _per_head(wK, att) * torch.linalg.matrix_power(att, K))


def gfsa_apply(att: torch.Tensor, v: torch.Tensor, w0, w1, wK, K: int) -> torch.Tensor:
    r"""``gfsa_matrix(att, ...) @ v`` without forming the filter: the filter applied to the values,
    :math:`w_0V + w_1\bar AV + w_K[\bar AV + (K-1)(\bar A(\bar AV) - \bar AV)]`
    (:math:`O(n^2 d)` instead of :math:`O(n^3)`). ``att``: ``[..., H, n, n]``, ``v``:
    ``[..., H, n, d]``."""
    _check_att(att)
    K = _check_K(K)
    if v.shape[:-1] != att.shape[:-1]:
        raise ValueError(f"v must be [..., n, d] matching att {tuple(att.shape)}, got "
                         f"{tuple(v.shape)}")
    av = att @ v
    return _filter_values(v, av, att @ av, w0, w1, wK, K)


def _filter_values(v, av, aav, w0, w1, wK, K):
    high = av + (K - 1) * (aav - av)
    return _per_head(w0, v) * v + _per_head(w1, v) * av + _per_head(wK, v) * high


class GraphFilterAttention(nn.Module):
    r"""Bidirectional multi-head self-attention whose mixing matrix is a graph filter.

    Args:
        d_model: width; n_heads: heads (``d_model`` divisible by it).
        filter: ``"softmax"`` (:math:`\bar A`, the baseline), ``"gfsa"`` (the learned polynomial
            filter of the module docstring) or ``"identity"`` (:math:`I`: no token mixing, a
            control).
        K: order of GFSA's high-order term (default 3).
        learn: which of ``"w0"``, ``"w1"``, ``"wK"`` are trained (per head); the others stay at
            their initial values ``init``.
        init: initial :math:`(w_0, w_1, w_K)`; default :math:`(0, 1, 0)`, so a fresh GFSA layer
            computes exactly softmax attention.
        impl: ``"explicit"``, ``"matrix"`` or ``"sdpa"`` (see the module docstring).
        keep_attention: store the last forward's :math:`\bar A` (``[B, H, n, n]``, detached) in
            ``self.attention`` (``"explicit"``/``"matrix"`` only).
    """

    def __init__(self, d_model: int, n_heads: int = 4, filter: str = "softmax", K: int = 3,
                 learn=("w0", "w1", "wK"), init=(0.0, 1.0, 0.0), impl: str = "explicit",
                 keep_attention: bool = False, bias: bool = True):
        super().__init__()
        for name, x in (("d_model", d_model), ("n_heads", n_heads)):
            if isinstance(x, bool) or not isinstance(x, int) or x < 1:
                raise ValueError(f"{name} must be a positive int, got {x!r}")
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        if filter not in FILTERS:
            raise ValueError(f"filter must be one of {FILTERS}, got {filter!r}")
        if impl not in IMPLS:
            raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
        unknown = set(learn) - {"w0", "w1", "wK"}
        if unknown:
            raise ValueError(f"learn may hold 'w0', 'w1', 'wK'; got {sorted(unknown)}")
        if len(init) != 3:
            raise ValueError(f"init must be (w0, w1, wK), got {init!r}")
        if keep_attention and impl == "sdpa":
            raise ValueError("keep_attention needs impl='explicit' or 'matrix' (sdpa never forms A)")
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.filter, self.K, self.impl = filter, _check_K(K), impl
        self.keep_attention, self.attention = keep_attention, None
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        if filter == "gfsa":
            for name, value in zip(("w0", "w1", "wK"), init):
                p = nn.Parameter(torch.full((n_heads,), float(value)), requires_grad=name in learn)
                self.register_parameter(name, p)

    def weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The per-head :math:`(w_0, w_1, w_K)` the layer uses (``(0, 1, 0)`` for softmax)."""
        if self.filter == "gfsa":
            return self.w0, self.w1, self.wK
        dev = self.qkv.weight.device
        z, o = torch.zeros(self.n_heads, device=dev), torch.ones(self.n_heads, device=dev)
        return (z, o, z) if self.filter == "softmax" else (o, z, z)

    def values(self, x: torch.Tensor) -> torch.Tensor:
        """The values ``V`` (``[B, H, n, d_h]``) this layer computes from its input ``x``: the graph
        signal its filter is applied to."""
        B, n, _ = x.shape
        return self.qkv(x).view(B, n, 3, self.n_heads, self.head_dim)[:, :, 2].transpose(1, 2)

    def filter_matrix(self) -> torch.Tensor:
        """The mixing matrix of the last forward (needs ``keep_attention``): :math:`\bar A` for
        softmax, the GFSA filter for gfsa, ``I`` for identity; ``[B, H, n, n]``."""
        if self.attention is None:
            raise ValueError("no attention stored: build the layer with keep_attention=True and "
                             "run a forward first")
        att = self.attention
        if self.filter == "softmax":
            return att
        if self.filter == "identity":
            return torch.eye(att.shape[-1], device=att.device).expand_as(att)
        return gfsa_matrix(att, *(w.detach() for w in self.weights()), self.K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 3 or x.shape[-1] != self.n_heads * self.head_dim:
            raise ValueError(f"x must be [B, n, {self.n_heads * self.head_dim}], got {tuple(x.shape)}")
        B, n, D = x.shape
        q, k, v = self.qkv(x).view(B, n, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.filter == "identity":
            o = v
            if self.keep_attention:
                self.attention = torch.eye(n, device=x.device).expand(B, self.n_heads, n, n)
        elif self.impl == "sdpa":
            av = F.scaled_dot_product_attention(q, k, v)
            if self.filter == "softmax":
                o = av
            else:
                aav = F.scaled_dot_product_attention(q, k, av)
                o = _filter_values(v, av, aav, *self.weights(), self.K)
        else:
            att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim), dim=-1)
            if self.keep_attention:
                self.attention = att.detach()
            if self.filter == "softmax":
                o = att @ v
            elif self.impl == "matrix":
                o = gfsa_matrix(att, *self.weights(), self.K) @ v
            else:
                o = gfsa_apply(att, v, *self.weights(), self.K)
        return self.proj(o.transpose(1, 2).reshape(B, n, D))
