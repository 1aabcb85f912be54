r"""Sequential post-training search of activation clipping ratios, layer by layer or block by block.

**Setting.** Every linear ``i`` of the encoder has fake-quantised weights (fixed) and a quantiser in
front of its input with a calibrated range :math:`[\ell_i, u_i]` (min and max of its input on the
calibration set, full-precision model) and a clipping ratio :math:`c_i` from a small grid: the
"rounding function" that is searched (:mod:`reprobook.quant.fake_quant`). The Q-VLM code searches
exactly this (the range scaled by :math:`1-0.1a`, :math:`a=0..6`).

**Objective.** For a block :math:`B` (consecutive linears in forward order) the discretisation error
is the relative squared error of the block's *output* against the full-precision model on the
calibration tokens: the output of its last member :math:`L`, plus that of any member whose output
does not reach :math:`L` (query and key are parallel to value; :func:`reaches`),

.. math::

   E_B(c_B) = \sum_{i\in S(B)}\frac{\lVert Y_i(c_{<B}, c_B) - Y_i^{\mathrm{FP}}\rVert^2}{\lVert Y_i^{\mathrm{FP}}\rVert^2},
   \qquad S(B) = \{L\}\cup\{i\in B: i \text{ does not reach } L\},

with the inputs coming from the already-quantised prefix :math:`c_{<B}` (sequential reconstruction,
as in BRECQ). The clip of an early member is then chosen for the error it leaves at the block's
output, not at its own: the joint minimum over :math:`c_B` sees the dependence between layers. With
blocks of one layer (:func:`layerwise_blocks`) each clip is chosen for its own layer's output only:
the layer-wise search Q-VLM improves on. (A residual connection also carries an early member's error
past the block's last linear; the objective does not see that path, a simplification.) Blocks are searched exhaustively (:math:`G^{|B|}` evaluations for a grid of
:math:`G` ratios), so the **search cost** of a partition is :math:`\sum_B G^{|B|}` forward evaluations.

**Partitions.** :func:`entropy_blocks` is Q-VLM's rule as reconstructed here: walk the linears in
order and let a block grow into the next linear while the current one's activation entropy is at
least ``p`` times the largest, up to ``max_size`` members. The paper motivates it by the
correlation of a layer's activation entropy with the gain of searching it jointly with its
successor. Controls with the same number of pairs: :func:`ranked_pairs` on shuffled or negated
scores.

**Per-sample dependence** (:func:`pair_ded`): for two consecutive linears and each calibration
sample, with per-sample (dynamic) ranges, the layer-wise choice (first clip for the first layer's
own error, then the second clip given it) against the joint minimum of the pair's objective (as
above: the second layer's output error, plus the first's when the two are parallel); the
*discretisation error difference* :math:`\mathrm{DED}=E(c^{\mathrm{lw}})-\min_c E(c)\ge 0`.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .bert_forward import BertWeights, layer_of, pool, reaches, run_blocks
from .fake_quant import histogram_entropy, quantize_act, quantize_weight

__all__ = ["Calibration", "calibrate", "quantized_weights", "static_quantiser", "search_clips",
           "layerwise_blocks", "uniform_blocks", "entropy_blocks", "ranked_pairs", "block_sizes",
           "search_cost", "block_outputs", "encode_quantized", "layer_entropies", "pair_ded"]


@dataclass
class Calibration:
    """Calibration tokens with the full-precision references: block-0 input ``h0``, the mask of
    real tokens, every linear's FP output, its input range ``ranges[i] = (lo, hi)`` and its inputs
    over real tokens (kept for the entropies)."""

    h0: torch.Tensor
    mask: torch.Tensor
    ref: dict
    ranges: np.ndarray
    inputs: dict


@torch.no_grad()
def calibrate(w: BertWeights, h0: torch.Tensor, mask: torch.Tensor) -> Calibration:
    """One full-precision pass: reference outputs and input ranges of all linears."""
    inputs = {}

    def observe(i, x):
        inputs[i] = x[mask]
        return x

    _, ref = run_blocks(w, h0, mask, 0, w.n_blocks - 1, quant=observe, record=range(w.n_linears))
    ranges = np.array([[float(inputs[i].min()), float(inputs[i].max())] for i in range(w.n_linears)])
    return Calibration(h0=h0, mask=mask, ref=ref, ranges=ranges, inputs=inputs)


def quantized_weights(w: BertWeights, bits: int = 4, group_size: int | None = 64,
                      only: Sequence[int] | None = None) -> BertWeights:
    """The encoder with fake-quantised weights (all linears, or those in ``only``)."""
    sel = set(range(w.n_linears)) if only is None else set(int(i) for i in only)
    return w.with_weights([quantize_weight(W, bits, group_size) if i in sel else W
                           for i, W in enumerate(w.W)])


def static_quantiser(ranges: np.ndarray, clips: Sequence[float], bits: int):
    """``quant(i, x)``: linear ``i``'s input quantised over its calibrated range times its clip
    (a NaN clip leaves that linear's input in full precision)."""
    ranges = np.asarray(ranges, dtype=float)
    clips = np.asarray(clips, dtype=float)
    if ranges.ndim != 2 or ranges.shape[1] != 2 or clips.shape != (len(ranges),):
        raise ValueError(f"need ranges [n, 2] and n clips, got {ranges.shape} and {clips.shape}")

    def quant(i, x):
        if np.isnan(clips[i]):
            return x
        return quantize_act(x, bits, ranges[i, 0], ranges[i, 1], float(clips[i]))
    return quant


def _check_blocks(blocks, n):
    flat = [i for b in blocks for i in b]
    if not flat or flat != list(range(len(flat))) or len(flat) > n or any(not b for b in blocks):
        raise ValueError(f"blocks must cover linears 0..m-1 (m <= {n}) once, in order, with "
                         "consecutive members")
    return len(flat)


def layerwise_blocks(n: int) -> list[list[int]]:
    """Every linear its own block: the layer-wise search."""
    return [[i] for i in range(n)]


def uniform_blocks(n: int, size: int) -> list[list[int]]:
    """Consecutive blocks of ``size`` linears (the last one may be shorter)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive int, got {size!r}")
    return [list(range(s, min(s + size, n))) for s in range(0, n, size)]


def entropy_blocks(entropy: Sequence[float], p: float, max_size: int = 2) -> list[list[int]]:
    """Q-VLM's rule (reconstructed): walk in order; a block takes in the next linear while its
    current last member has entropy >= ``p * max(entropy)`` and it has fewer than ``max_size``."""
    H = np.asarray(entropy, dtype=float)
    if H.ndim != 1 or len(H) < 1 or not np.all(np.isfinite(H)):
        raise ValueError("entropy must be a non-empty 1-d array of finite values")
    if not 0 <= p <= 1:
        raise ValueError(f"p must be in [0, 1], got {p!r}")
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
        raise ValueError(f"max_size must be a positive int, got {max_size!r}")
    thr = p * H.max()
    blocks, cur = [], [0]
    for i in range(1, len(H)):
        if H[cur[-1]] >= thr and len(cur) < max_size:
            cur.append(i)
        else:
            blocks.append(cur)
            cur = [i]
    blocks.append(cur)
    return blocks


def ranked_pairs(scores: Sequence[float], n_pairs: int) -> list[list[int]]:
    """Pairs ``(s, s+1)`` taken greedily by decreasing ``scores[s]`` (``len(scores) = n``; the
    last entry is never a start) without overlap, until ``n_pairs``; the rest are singletons."""
    S = np.asarray(scores, dtype=float)
    n = len(S)
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int) or not 0 <= n_pairs <= n // 2:
        raise ValueError(f"n_pairs must be an int in [0, {n // 2}], got {n_pairs!r}")
    taken = np.zeros(n, bool)
    starts = []
    for s in sorted(range(n - 1), key=lambda s: (-S[s], s)):
        if len(starts) == n_pairs:
            break
        if not taken[s] and not taken[s + 1]:
            taken[s] = taken[s + 1] = True
            starts.append(s)
    if len(starts) < n_pairs:
        raise ValueError(f"could not place {n_pairs} disjoint pairs among {n} linears")
    blocks, i, st = [], 0, set(starts)
    while i < n:
        if i in st:
            blocks.append([i, i + 1])
            i += 2
        else:
            blocks.append([i])
            i += 1
    return blocks


def block_outputs(block: Sequence[int]) -> list[int]:
    """The members whose output error a block's search scores: the last one and those that do
    not reach it."""
    last = block[-1]
    return [i for i in block[:-1] if not reaches(i, last)] + [last]


def block_sizes(blocks) -> list[int]:
    return [len(b) for b in blocks]


def search_cost(blocks, grid_size: int) -> int:
    """Forward evaluations of an exhaustive block search: sum of grid_size ** |block|."""
    return int(sum(grid_size ** len(b) for b in blocks))


def _rel_err(y, r, mask):
    d = (y - r)[mask]
    return float((d * d).sum() / (r[mask] * r[mask]).sum().clamp_min(1e-30))


@torch.no_grad()
def search_clips(wq: BertWeights, calib: Calibration, blocks, grid: Sequence[float], bits: int):
    """Sequential exhaustive search of the clip ratios, block by block (see the module doc).
    The blocks cover the first ``m`` linears; the others stay in full precision (NaN clip).
    Returns ``(clips, cost, objective)``: the ratios, the forward evaluations spent and each
    block's minimised error."""
    n = wq.n_linears
    m = _check_blocks(blocks, n)
    grid = [float(g) for g in grid]
    if not grid or any(not 0 < g <= 1 for g in grid):
        raise ValueError("grid must be a non-empty list of clip ratios in (0, 1]")
    clips = np.full(n, np.nan)
    clips[:m] = 1.0
    h, k_cur, cost, objective = calib.h0, 0, 0, []
    for blk in blocks:
        k0, k1 = layer_of(blk[0]), layer_of(blk[-1])
        if k0 > k_cur:                      # advance the cached hidden state to block k0's input
            h, _ = run_blocks(wq, h, calib.mask, k_cur, k0 - 1,
                              quant=static_quantiser(calib.ranges, clips, bits))
            k_cur = k0
        best, best_c = np.inf, None
        sinks = block_outputs(blk)
        for combo in itertools.product(grid, repeat=len(blk)):
            c = clips.copy()
            c[blk] = combo
            _, outs = run_blocks(wq, h, calib.mask, k0, k1, quant=static_quantiser(calib.ranges, c, bits),
                                 record=blk, stop=blk[-1])
            e = sum(_rel_err(outs[i], calib.ref[i], calib.mask) for i in sinks)
            cost += 1
            if e < best:
                best, best_c = e, combo
        clips[blk] = best_c
        objective.append(best)
    return clips, cost, objective


@torch.no_grad()
def encode_quantized(wq: BertWeights, h0: torch.Tensor, mask: torch.Tensor, ranges, clips,
                     bits: int | None) -> torch.Tensor:
    """Sentence embeddings of the quantised encoder (``bits=None``: activations not quantised)."""
    quant = None if bits is None else static_quantiser(ranges, clips, bits)
    h, _ = run_blocks(wq, h0, mask, 0, wq.n_blocks - 1, quant=quant)
    return pool(h, mask)


def layer_entropies(calib: Calibration, bins: int = 128) -> np.ndarray:
    """Histogram entropy of every linear's FP input over its calibrated range (all real tokens)."""
    return np.array([histogram_entropy(calib.inputs[i], *calib.ranges[i], bins=bins)
                     for i in range(len(calib.ranges))])


def _dynamic(x, mask, bits, clip):
    big = torch.finfo(x.dtype).max
    m = mask[..., None]
    lo = x.masked_fill(~m, big).amin(dim=(1, 2), keepdim=True)
    hi = x.masked_fill(~m, -big).amax(dim=(1, 2), keepdim=True)
    return quantize_act(x, bits, lo, hi, clip)


def _rel_err_rows(y, r, mask):
    m = mask[..., None].to(y.dtype)
    num = (((y - r) ** 2) * m).sum(dim=(1, 2))
    return (num / ((r * r) * m).sum(dim=(1, 2)).clamp_min(1e-30)).double().numpy()


@torch.no_grad()
def pair_ded(w: BertWeights, calib: Calibration, i: int, grid: Sequence[float], bits: int,
             weight_bits: int = 4, group_size: int | None = 64, bins: int = 128):
    """Per-sample layer-wise and joint errors of the pair (``i``, ``i+1``), and the entropy of
    linear ``i``'s input per sample. Only the pair is quantised (weights and activations, with each
    sample's own range); everything else is full precision, so the error is the pair's alone.
    Returns a dict of per-sample arrays: ``e_lw``, ``e_joint``, ``ded``, ``entropy``."""
    n = w.n_linears
    if not 0 <= i < n - 1:
        raise ValueError(f"i must index a linear with a successor, 0 <= i < {n - 1}, got {i}")
    grid = [float(g) for g in grid]
    j = i + 1
    wq = quantized_weights(w, weight_bits, group_size, only=(i, j))
    k0, k1 = layer_of(i), layer_of(j)
    h = calib.h0
    if k0 > 0:
        h, _ = run_blocks(w, h, calib.mask, 0, k0 - 1)
    G = len(grid)
    B = calib.mask.shape[0]
    Ei = np.zeros((B, G))
    Ej = np.zeros((B, G, G))
    for a, ca in enumerate(grid):
        for b, cb in enumerate(grid):
            def quant(l, x, ca=ca, cb=cb):
                if l == i:
                    return _dynamic(x, calib.mask, bits, ca)
                if l == j:
                    return _dynamic(x, calib.mask, bits, cb)
                return x
            _, outs = run_blocks(wq, h, calib.mask, k0, k1, quant=quant, record=(i, j), stop=j)
            if b == 0:
                Ei[:, a] = _rel_err_rows(outs[i], calib.ref[i], calib.mask)
            Ej[:, a, b] = _rel_err_rows(outs[j], calib.ref[j], calib.mask)
    rows = np.arange(B)
    a_lw = Ei.argmin(1)
    b_lw = Ej[rows, a_lw].argmin(1)
    # the pair's objective, as in search_clips: the second output, plus the first when parallel
    first = 0.0 if reaches(i, j) else 1.0
    e_lw = first * Ei[rows, a_lw] + Ej[rows, a_lw, b_lw]
    e_joint = (first * Ei[:, :, None] + Ej).reshape(B, -1).min(1)
    # the entropy of each sample's input to linear i (FP), over the layer's calibrated range
    X = {}

    def observe(l, x):
        if l == i:
            X["x"] = x
        return x
    run_blocks(w, h, calib.mask, k0, k0, quant=observe, stop=i)
    lo, hi = calib.ranges[i]
    ent = np.array([histogram_entropy(X["x"][r][calib.mask[r]], lo, hi, bins) for r in range(B)])
    return {"e_lw": e_lw, "e_joint": e_joint, "ded": e_lw - e_joint, "entropy": ent}
