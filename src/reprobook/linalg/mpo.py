r"""Matrix product operators (MPO, a "tensor-train matrix"): decomposition by sequential SVD, contraction.

**The format.** Factor the two sides of a matrix :math:`M\in\mathbb R^{I\times J}` as
:math:`I=\prod_{k=1}^n i_k` and :math:`J=\prod_{k=1}^n j_k`. Reshape :math:`M` into a
:math:`2n`-way tensor and interleave the indices, :math:`M_{(i_1\dots i_n),(j_1\dots j_n)}`; an MPO
writes it as a chain of :math:`n` *local tensors* :math:`T_k\in\mathbb R^{r_{k-1}\times i_k\times j_k
\times r_k}` with :math:`r_0=r_n=1`,

.. math:: M_{(i_1\dots i_n),(j_1\dots j_n)} = \sum_{a_1\dots a_{n-1}}
          T_1[1,i_1,j_1,a_1]\,T_2[a_1,i_2,j_2,a_2]\cdots T_n[a_{n-1},i_n,j_n,1].

**Decomposition** (:func:`matrix_to_mpo`). Sweep left to right: at cut :math:`k` unfold what is left
into a matrix of :math:`r_{k-1}i_kj_k` rows, take its SVD :math:`U\Sigma V^\top`, keep the first
:math:`r_k` columns of :math:`U` (reshaped) as :math:`T_k` and carry :math:`\Sigma V^\top` on. Without
truncation :math:`r_k` is the full rank of the unfolding,
:math:`r_k=\min\big(\prod_{l\le k}i_lj_l,\ \prod_{l>k}i_lj_l\big)`, and the chain reproduces
:math:`M` exactly (up to rounding). With a cap ``max_bond`` the error obeys the TT-SVD bound
(Oseledets 2011, Thm. 2.2)

.. math:: \|M-\hat M\|_F \le \Big(\sum_{k=1}^{n-1}\varepsilon_k^2\Big)^{1/2},\qquad
          \varepsilon_k^2=\sum_{\text{discarded}}\sigma^2 \text{ at cut } k,

which :attr:`MPO.bound` reports.

**Gauge.** Any invertible :math:`G` inserted on a bond, :math:`T_k\to T_kG`,
:math:`T_{k+1}\to G^{-1}T_{k+1}`, leaves :math:`M` unchanged, so the local tensors are only defined up
to this freedom. Before two MPOs' local tensors can be compared (the tensor constraint of OPDF), the
gauge is fixed: :func:`matrix_to_mpo` returns the *mixed-canonical* form around the ``center``
tensor: every tensor left of it is a left isometry (its :math:`(r_{k-1}i_kj_k)\times r_k` unfolding
has orthonormal columns), every tensor right of it a right isometry (its
:math:`r_{k-1}\times(i_kj_kr_k)` unfolding has orthonormal rows), and the center holds the whole
norm, :math:`\|T_c\|_F=\|M\|_F`. The center is the *central tensor*, the others the *auxiliary
tensors* (Gao et al. 2020). It is reached from the left-canonical sweep by exact QR steps from the
right, which do not change :math:`M`.

**Parameter count.** :math:`\sum_k r_{k-1}i_kj_kr_k`; at full bonds it exceeds :math:`IJ`
(over-parameterisation) whenever :math:`n\ge 2` and the factorisation is not trivial.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Sequence

import torch

__all__ = ["MPO", "full_bond_dims", "mpo_num_params", "matrix_to_mpo", "mpo_to_matrix",
           "check_factorisation"]


def check_factorisation(shape: Sequence[int], size: int, name: str) -> tuple[int, ...]:
    """``shape`` as a tuple of positive ints whose product is ``size``, or a clear error."""
    try:
        out = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of positive ints, got {shape!r}") from None
    if not out or any(s < 1 for s in out) or any(isinstance(s, bool) for s in shape):
        raise ValueError(f"{name} must be a non-empty sequence of positive ints, got {shape!r}")
    if prod(out) != size:
        raise ValueError(f"{name} = {out} multiplies to {prod(out)}, not to the matrix side {size}")
    return out


def full_bond_dims(row_shape: Sequence[int], col_shape: Sequence[int],
                   max_bond: int | None = None) -> list[int]:
    """Bond dimensions :math:`[r_0,\\dots,r_n]` of the untruncated MPO (``max_bond`` caps them)."""
    if len(row_shape) != len(col_shape):
        raise ValueError(f"row_shape and col_shape need the same number of local tensors, got "
                         f"{len(row_shape)} and {len(col_shape)}")
    if max_bond is not None and (isinstance(max_bond, bool) or int(max_bond) < 1):
        raise ValueError(f"max_bond must be a positive int or None, got {max_bond!r}")
    local = [int(i) * int(j) for i, j in zip(row_shape, col_shape)]
    n = len(local)
    bonds = [1] * (n + 1)
    for k in range(1, n):
        r = min(prod(local[:k]), prod(local[k:]))
        bonds[k] = r if max_bond is None else min(r, int(max_bond))
    return bonds


def mpo_num_params(row_shape: Sequence[int], col_shape: Sequence[int],
                   bonds: Sequence[int] | None = None) -> int:
    """:math:`\\sum_k r_{k-1}i_kj_kr_k` (full bonds unless ``bonds`` is given)."""
    bonds = full_bond_dims(row_shape, col_shape) if bonds is None else list(bonds)
    if len(bonds) != len(row_shape) + 1:
        raise ValueError(f"bonds must have {len(row_shape) + 1} entries, got {len(bonds)}")
    return sum(bonds[k] * row_shape[k] * col_shape[k] * bonds[k + 1] for k in range(len(row_shape)))


@dataclass
class MPO:
    """The local tensors of an MPO and what its decomposition discarded.

    ``cores[k]`` has shape ``(r_{k-1}, i_k, j_k, r_k)``; ``center`` is the index of the central tensor
    (the others are isometries, see the module); ``discarded[k]`` holds the singular values dropped at
    cut ``k+1`` (empty without truncation)."""

    cores: list[torch.Tensor]
    center: int
    discarded: list[torch.Tensor] = field(default_factory=list)

    @property
    def row_shape(self) -> tuple[int, ...]:
        return tuple(c.shape[1] for c in self.cores)

    @property
    def col_shape(self) -> tuple[int, ...]:
        return tuple(c.shape[2] for c in self.cores)

    @property
    def bonds(self) -> list[int]:
        return [1] + [c.shape[3] for c in self.cores]

    @property
    def auxiliary(self) -> list[int]:
        """Indices of the auxiliary (non-central) tensors."""
        return [k for k in range(len(self.cores)) if k != self.center]

    @property
    def num_params(self) -> int:
        return sum(c.numel() for c in self.cores)

    @property
    def bound(self) -> float:
        """The TT-SVD error bound :math:`(\\sum_k\\varepsilon_k^2)^{1/2}` in the Frobenius norm."""
        return float(sum(float((d.double() ** 2).sum()) for d in self.discarded) ** 0.5)

    def to_matrix(self) -> torch.Tensor:
        return mpo_to_matrix(self.cores)


def matrix_to_mpo(matrix: torch.Tensor, row_shape: Sequence[int], col_shape: Sequence[int], *,
                  max_bond: int | None = None, center: int | None = None,
                  keep: str = "largest") -> MPO:
    """Decompose ``matrix`` (I, J) into an MPO with local tensors ``(r_{k-1}, i_k, j_k, r_k)``.

    ``row_shape``/``col_shape`` factor I and J into the same number n of factors (use 1s to pad).
    ``max_bond`` caps every bond (``None``: exact). ``center`` (default ``n // 2``) is the central
    tensor of the mixed-canonical gauge. ``keep="smallest"`` keeps the *smallest* singular values at
    each cut instead of the largest: a deliberately wrong truncation, used as a control only.
    Runs in the matrix's dtype (use float64 for exactness checks).
    """
    if not isinstance(matrix, torch.Tensor):
        raise TypeError(f"matrix must be a torch.Tensor, got {type(matrix).__name__}")
    if matrix.ndim != 2:
        raise ValueError(f"matrix must be 2-d (I, J), got shape {tuple(matrix.shape)}")
    if not matrix.is_floating_point():
        raise TypeError(f"matrix must be floating point, got {matrix.dtype}")
    rows = check_factorisation(row_shape, matrix.shape[0], "row_shape")
    cols = check_factorisation(col_shape, matrix.shape[1], "col_shape")
    n = len(rows)
    if len(cols) != n:
        raise ValueError(f"row_shape and col_shape need the same number of factors (pad with 1s), "
                         f"got {rows} and {cols}")
    if keep not in ("largest", "smallest"):
        raise ValueError(f"keep must be 'largest' or 'smallest', got {keep!r}")
    center = n // 2 if center is None else center
    if isinstance(center, bool) or not isinstance(center, int) or not 0 <= center < n:
        raise ValueError(f"center must be an int in [0, {n}), got {center!r}")
    caps = full_bond_dims(rows, cols, max_bond)
    # (i_1..i_n, j_1..j_n) -> (i_1, j_1, i_2, j_2, ...): the local tensor k owns (i_k, j_k)
    t = matrix.reshape(rows + cols).permute(*[a for k in range(n) for a in (k, n + k)])
    cores, discarded = [], []
    rest = t.reshape(1, -1)
    r_left = 1
    for k in range(n - 1):
        unfold = rest.reshape(r_left * rows[k] * cols[k], -1)
        u, s, vh = torch.linalg.svd(unfold, full_matrices=False)
        r = min(caps[k + 1], s.numel())
        idx = torch.arange(r) if keep == "largest" else torch.arange(s.numel() - r, s.numel())
        drop = torch.ones(s.numel(), dtype=torch.bool)
        drop[idx] = False
        discarded.append(s[drop])
        cores.append(u[:, idx].reshape(r_left, rows[k], cols[k], r))
        rest = s[idx, None] * vh[idx]
        r_left = r
    cores.append(rest.reshape(r_left, rows[-1], cols[-1], 1))
    # exact QR steps from the right move the norm from the last tensor to the center
    for k in range(n - 1, center, -1):
        c = cores[k]
        q, rr = torch.linalg.qr(c.reshape(c.shape[0], -1).T)     # c^T = q rr, so c = rr^T q^T
        cores[k] = q.T.reshape(-1, *c.shape[1:])
        cores[k - 1] = torch.tensordot(cores[k - 1], rr.T, dims=([3], [0]))
    return MPO(cores=cores, center=center, discarded=discarded)


def mpo_to_matrix(cores: Sequence[torch.Tensor]) -> torch.Tensor:
    """Contract local tensors ``(r_{k-1}, i_k, j_k, r_k)`` back into the (I, J) matrix (differentiable)."""
    if len(cores) == 0:
        raise ValueError("an MPO needs at least one local tensor")
    for k, c in enumerate(cores):
        if c.ndim != 4:
            raise ValueError(f"local tensor {k} must be 4-d (r_left, i, j, r_right), got shape "
                             f"{tuple(c.shape)}")
    if cores[0].shape[0] != 1 or cores[-1].shape[3] != 1:
        raise ValueError(f"the outer bonds must be 1, got {cores[0].shape[0]} and {cores[-1].shape[3]}")
    rows = [c.shape[1] for c in cores]
    cols = [c.shape[2] for c in cores]
    # t holds (I_sofar, J_sofar, r): contract the bond, then merge the new (i_k, j_k) into the sides
    t = cores[0].reshape(rows[0], cols[0], cores[0].shape[3])
    for k, c in enumerate(cores[1:], start=1):
        if c.shape[0] != t.shape[2]:
            raise ValueError(f"bond {k} does not match: {t.shape[2]} against {c.shape[0]}")
        t = torch.einsum("IJa,aijb->IiJjb", t, c)
        t = t.reshape(t.shape[0] * t.shape[1], t.shape[2] * t.shape[3], t.shape[4])
    return t[..., 0]
