r"""Unstructured pruning of linear layers at per-layer ratios, with exact global sparsity.

**Layer-wise ratios.** A pruning budget is a global sparsity :math:`S`: the share of all prunable
weights :math:`N = \sum_i n_i` that is removed. A *uniform* allocation prunes every layer at
:math:`S`. AlphaPruning (Lu et al., NeurIPS 2024) maps a per-layer score :math:`q_i` (the heavy-tail
exponent :math:`\alpha` of the layer's ESD) linearly to :math:`[s_1, s_2] = [1-\varepsilon,
1+\varepsilon]`,

.. math::

   \tilde r_i = s_1 + \frac{q_i - q_{\min}}{q_{\max} - q_{\min}}(s_2 - s_1), \qquad
   r_i = \tilde r_i \, \frac{S \sum_j n_j}{\sum_j n_j \tilde r_j},

so that :math:`\sum_i r_i n_i = S N`: a layer with a larger :math:`\alpha` (a lighter tail, "less
well trained") is pruned more. With ``groups`` (the block of every layer) the scores are first
averaged within each group ("block-wise mapping", the paper's default). :func:`layerwise_ratios`
refuses ratios outside :math:`[0, 1]` unless ``clip=True``, which clips and re-scales the unclipped
layers until the budget is met, and reports that it did.

**Exact counts.** :func:`prune_counts` turns ratios into integers :math:`k_i` with
:math:`\sum_i k_i = \operatorname{round}(S N)` exactly (largest-remainder rounding of
:math:`r_i n_i`), so every allocation of one budget removes the same number of weights.

**Masks** (``True`` = pruned, exactly :math:`k` entries):

* magnitude: the :math:`k` entries of smallest :math:`|W_{ij}|` in the whole matrix (as the
  AlphaPruning code's magnitude pruner, one threshold per layer);
* Wanda (Sun et al. 2024): score :math:`|W_{ij}|\,\lVert X_{:,j}\rVert_2` with :math:`X` the layer's
  inputs on calibration text; the lowest scores of *each output row* are pruned, :math:`\lfloor k/m
  \rfloor` per row for :math:`m` rows, and the :math:`k \bmod m` remaining entries go to the rows whose
  next-lowest score is smallest (the reference code floors per row and so misses the budget by up
  to one weight per row).

Ties are broken by position (stable sorts), so masks are deterministic.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["METHODS", "uniform_ratios", "layerwise_ratios", "prune_counts", "magnitude_order",
           "magnitude_mask", "wanda_order", "wanda_mask", "score_orders", "Pruning", "prune_layers",
           "realized_sparsity"]

METHODS = ("magnitude", "wanda")


def _sizes(sizes) -> np.ndarray:
    n = np.asarray(sizes, dtype=np.int64)
    if n.ndim != 1 or len(n) < 1 or np.any(n < 1):
        raise ValueError(f"sizes must be a non-empty 1-D list of positive layer sizes, got {sizes!r}")
    return n


def _sparsity(S) -> float:
    if isinstance(S, bool) or not isinstance(S, (int, float, np.floating)) or not 0 <= S < 1:
        raise ValueError(f"the global sparsity must be a number in [0, 1), got {S!r}")
    return float(S)


def uniform_ratios(sizes: Sequence[int], sparsity: float) -> np.ndarray:
    """Every layer at the global sparsity."""
    return np.full(len(_sizes(sizes)), _sparsity(sparsity))


def layerwise_ratios(scores: Sequence[float], sizes: Sequence[int], sparsity: float, eps: float, *,
                     groups: Sequence[int] | None = None, clip: bool = False) -> np.ndarray:
    """AlphaPruning's allocation (see the module docstring): higher score, higher ratio.

    ``scores``, ``sizes`` (and ``groups``): one entry per layer. ``eps`` in [0, 1). Equal scores
    give the uniform allocation. Raises ``ValueError`` if a ratio leaves [0, 1] and ``clip`` is
    False; with ``clip=True`` returns clipped ratios that still meet the budget.
    """
    n = _sizes(sizes)
    S = _sparsity(sparsity)
    q = np.asarray(scores, dtype=np.float64)
    if q.shape != n.shape or not np.all(np.isfinite(q)):
        raise ValueError(f"scores must be {len(n)} finite numbers (one per layer), got shape {q.shape}")
    if not 0 <= eps < 1:
        raise ValueError(f"eps must be in [0, 1), got {eps!r}")
    if groups is not None:
        g = np.asarray(groups)
        if g.shape != n.shape:
            raise ValueError(f"groups must give one group per layer ({len(n)}), got shape {g.shape}")
        q = np.array([q[g == gi].mean() for gi in g])
    span = q.max() - q.min()
    unit = (q - q.min()) / span if span > 0 else np.full_like(q, 0.5)
    r = (1 - eps) + unit * 2 * eps
    r = r * S * n.sum() / (n * r).sum()
    if np.all((r >= 0) & (r <= 1)):
        return r
    if not clip:
        raise ValueError(f"eps={eps} at sparsity {S} asks for layer ratios up to {r.max():.3f}; "
                         "lower eps or pass clip=True")
    fixed = np.zeros(len(r), dtype=bool)
    for _ in range(len(r)):                       # clip at 1, spread the excess over the rest
        over = (r > 1) & ~fixed
        if not over.any():
            break
        fixed |= over
        r[fixed] = 1.0
        free = ~fixed
        budget = S * n.sum() - n[fixed].sum()
        r[free] = r[free] * budget / (n[free] * r[free]).sum()
    return np.clip(r, 0.0, 1.0)


def prune_counts(sizes: Sequence[int], ratios: Sequence[float], sparsity: float) -> np.ndarray:
    """Integers k_i <= n_i near r_i n_i with sum exactly round(S N) (largest remainders)."""
    n = _sizes(sizes)
    S = _sparsity(sparsity)
    r = np.asarray(ratios, dtype=np.float64)
    if r.shape != n.shape or np.any(~np.isfinite(r)) or np.any(r < 0) or np.any(r > 1):
        raise ValueError(f"ratios must be {len(n)} numbers in [0, 1], got {ratios!r}")
    target = int(round(S * n.sum()))
    exact = r * n * target / max((r * n).sum(), 1e-300) if (r * n).sum() > 0 else np.zeros(len(n))
    k = np.minimum(np.floor(exact).astype(np.int64), n)
    short = target - int(k.sum())
    order = np.lexsort((np.arange(len(n)), -(exact - k)))        # largest remainder first, stable
    for i in order:
        if short <= 0:
            break
        if k[i] < n[i]:
            k[i] += 1
            short -= 1
    if short != 0:
        raise ValueError("the budget cannot be met with these ratios (all layers full)")
    return k


def _count(W: torch.Tensor, k) -> int:
    if W.ndim != 2:
        raise ValueError(f"a weight matrix must be 2-D, got shape {tuple(W.shape)}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= W.numel():
        raise ValueError(f"k must be an int in [0, {W.numel()}], got {k!r}")
    return int(k)


def magnitude_order(W: torch.Tensor) -> torch.Tensor:
    """Flat indices of ``W`` from the smallest magnitude up (stable): the first ``k`` are the
    magnitude mask for ``k``. Sorting once lets many budgets share one sort."""
    if W.ndim != 2:
        raise ValueError(f"a weight matrix must be 2-D, got shape {tuple(W.shape)}")
    return torch.sort(W.detach().abs().flatten(), stable=True).indices


def magnitude_mask(W: torch.Tensor, k: int, order: torch.Tensor | None = None) -> torch.Tensor:
    """The ``k`` entries of smallest magnitude in the whole matrix (``True`` = pruned);
    ``order`` from :func:`magnitude_order` if already computed."""
    k = _count(W, k)
    idx = (magnitude_order(W) if order is None else order)[:k]
    mask = torch.zeros(W.numel(), dtype=torch.bool, device=W.device)
    mask[idx] = True
    return mask.view_as(W)


def wanda_order(W: torch.Tensor, col_norms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wanda scores ``|W| * col_norms`` (float64) and each row's column order, lowest first."""
    if W.ndim != 2:
        raise ValueError(f"a weight matrix must be 2-D, got shape {tuple(W.shape)}")
    d = W.shape[1]
    c = torch.as_tensor(col_norms, device=W.device)
    if c.shape != (d,) or not bool(torch.isfinite(c).all()) or bool((c < 0).any()):
        raise ValueError(f"col_norms must be {d} non-negative finite numbers (one per input column), "
                         f"got shape {tuple(c.shape)}")
    score = W.detach().abs().double() * c.double()[None, :]
    return score, torch.sort(score, dim=1, stable=True).indices


def wanda_mask(W: torch.Tensor, col_norms: torch.Tensor, k: int,
               order: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    r"""Wanda's mask: per output row, the lowest :math:`|W_{ij}|\,\lVert X_{:,j}\rVert`; exactly
    ``k`` entries in all (see the module docstring for how the remainder is placed). ``order``:
    :func:`wanda_order`'s result if already computed."""
    k = _count(W, k)
    m, d = W.shape
    score, order = wanda_order(W, col_norms) if order is None else order
    base, rem = divmod(k, m)
    take = torch.full((m,), base, dtype=torch.long, device=W.device)
    if rem:
        nxt = torch.gather(score, 1, order[:, base:base + 1]).squeeze(1)
        extra = torch.sort(nxt, stable=True).indices[:rem]
        take[extra] += 1
    keep_cols = torch.arange(d, device=W.device)[None, :] < take[:, None]
    mask = torch.zeros(m, d, dtype=torch.bool, device=W.device)
    mask.scatter_(1, order, keep_cols)
    return mask


@dataclass
class Pruning:
    """Masks applied in place to some layers, with their original weights; :meth:`restore`
    puts the dense weights back (also on leaving a ``with`` block)."""

    layers: dict
    masks: dict
    originals: dict

    def restore(self) -> None:
        with torch.no_grad():
            for name, w in self.originals.items():
                self.layers[name].weight.copy_(w)
        self.originals = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.restore()
        return False

    @property
    def n_pruned(self) -> int:
        return int(sum(int(m.sum()) for m in self.masks.values()))


def score_orders(layers: Mapping[str, torch.nn.Linear], method: str,
                 norms: Mapping[str, torch.Tensor] | None = None) -> dict:
    """Each layer's pruning order for one method (and, for Wanda, one set of input norms), to pass
    to :func:`prune_layers` as ``orders=`` when many budgets prune the same dense weights."""
    if method not in METHODS:
        raise ValueError(f"unknown pruning method {method!r}; use one of {', '.join(METHODS)}")
    if method == "wanda" and norms is None:
        raise ValueError("Wanda's order needs the input norms")
    return {n: magnitude_order(l.weight) if method == "magnitude" else wanda_order(l.weight, norms[n])
            for n, l in layers.items()}


def prune_layers(layers: Mapping[str, torch.nn.Linear], counts: Mapping[str, int] | Sequence[int],
                 method: str, *, norms: Mapping[str, torch.Tensor] | None = None,
                 norms_fn: Callable[[list[str]], Mapping[str, torch.Tensor]] | None = None,
                 groups: Sequence[int] | None = None, orders: Mapping | None = None) -> Pruning:
    """Prune ``counts[name]`` weights of each layer in place and return the :class:`Pruning`.

    ``method``: ``"magnitude"`` or ``"wanda"``. Wanda needs input column norms: ``norms`` (name ->
    tensor, all from the dense model: one-shot) or ``norms_fn(names)`` called once per group in
    order, *after* the earlier groups were pruned (sequential, as the Wanda and AlphaPruning code
    does block by block); ``groups`` gives each layer's group (default: one group). ``orders``
    (from :func:`score_orders` on the same dense weights, one-shot only) skips the sorting.
    """
    if method not in METHODS:
        raise ValueError(f"unknown pruning method {method!r}; use one of {', '.join(METHODS)}")
    names = list(layers)
    if not isinstance(counts, Mapping):
        counts = list(counts)
        if len(counts) != len(names):
            raise ValueError(f"counts must give one count per layer ({len(names)}), got {len(counts)}")
        counts = dict(zip(names, counts))
    if set(counts) != set(names):
        raise ValueError("counts must name exactly the layers being pruned")
    if method == "wanda" and orders is None and (norms is None) == (norms_fn is None):
        raise ValueError("Wanda needs exactly one of norms (one-shot) or norms_fn (sequential)")
    if orders is not None and norms_fn is not None:
        raise ValueError("precomputed orders are one-shot; they cannot be combined with norms_fn")
    g = [0] * len(names) if groups is None else list(groups)
    if len(g) != len(names):
        raise ValueError(f"groups must give one group per layer ({len(names)}), got {len(g)}")
    pr = Pruning(layers=dict(layers), masks={}, originals={})
    try:
        for group in dict.fromkeys(g):                                  # in first-seen order
            members = [n for n, gi in zip(names, g) if gi == group]
            if method == "wanda" and orders is None:
                src = norms if norms is not None else norms_fn(members)
                missing = [n for n in members if n not in src]
                if missing:
                    raise ValueError(f"no input norms for layers {missing[:3]}")
            masks = {}
            for n in members:
                W = layers[n].weight
                o = None if orders is None else orders[n]
                masks[n] = (magnitude_mask(W, counts[n], o) if method == "magnitude"
                            else wanda_mask(W, None if o is not None else src[n], counts[n], o))
            with torch.no_grad():
                for n in members:
                    pr.originals[n] = layers[n].weight.detach().clone()
                    layers[n].weight.masked_fill_(masks[n], 0.0)
                    pr.masks[n] = masks[n]
    except Exception:
        pr.restore()
        raise
    return pr


def realized_sparsity(masks: Mapping[str, torch.Tensor]) -> float:
    """Share of pruned entries over all masked layers."""
    if not masks:
        raise ValueError("no masks")
    return sum(int(m.sum()) for m in masks.values()) / sum(m.numel() for m in masks.values())
