r"""A norm-continuous path of orthogonal operators on :math:`\ell^2` from the identity to a reflection,
and what its finite-dimensional discretisations must do.

**The path** ("Hilbert hotel" rotations). With :math:`R(\theta)` the rotation by :math:`\theta` of a
coordinate plane and basis :math:`e_1, e_2, \dots` of :math:`\ell^2`:

* stage 1, :math:`t\in[0,\tfrac12]`: rotate every pair :math:`(e_1,e_2), (e_3,e_4), \dots` by
  :math:`\theta = 2\pi t`. At :math:`t=\tfrac12` every pair is turned by :math:`\pi`: :math:`A = -I`.
* stage 2, :math:`t\in[\tfrac12,1]`: :math:`A_t = -B(\varphi)` with :math:`B(\varphi)` fixing
  :math:`e_1` and rotating the pairs :math:`(e_2,e_3), (e_4,e_5), \dots` by
  :math:`\varphi = 2\pi(t-\tfrac12)`. At :math:`t=1` those pairs are turned by :math:`\pi` too, so
  :math:`A_1 = \operatorname{diag}(-1, 1, 1, \dots)`, the reflection in :math:`e_1^\perp`.

Every :math:`A_t` is orthogonal (a diffeomorphism of :math:`\ell^2`), and within a stage
:math:`\lVert A_t - A_s\rVert = 2\lvert\sin(\pi(t-s))\rvert \le 2\pi\lvert t-s\rvert` (all blocks turn
together), so the path is continuous in operator norm. In :math:`\mathbb R^n` no such path exists:
:math:`\det` is continuous and never zero on invertible matrices, and :math:`\det I = 1`,
:math:`\det\operatorname{diag}(-1,1,\dots,1) = -1`. The infinitely many pairs are what lets
:math:`\ell^2` turn :math:`I` into a reflection (Kuiper's theorem says much more: the invertible
operators of :math:`\ell^2` form a contractible set).

**Galerkin truncations** :math:`P_nA_tP_n` (the top-left :math:`n\times n` block,
:func:`truncated_path`) keep whole pairs except at the boundary: in stage 1 for odd :math:`n`, in
stage 2 for even :math:`n`, the last pair is cut to the :math:`1\times1` entry :math:`\cos\theta`,
which vanishes at :math:`\theta=\pi/2`. So every truncation passes through a singular matrix, and
:func:`path_dilemma` shows that any other scheme we try fails in some other way.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["ENDS", "path_angle", "truncated_path", "path_distance", "end_matrix", "SCHEMES",
           "galerkin", "shifted_galerkin", "polar_repair", "PathDilemma", "path_dilemma"]

#: Where the path ends: at the reflection diag(-1, 1, ...) (two stages), or at -I (stage 1 only,
#: stretched over [0, 1]; orientation preserving in even dimensions).
ENDS = ("reflection", "minus-identity")


def _check_n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an int >= 2 (the truncation size), got {n!r}")
    return int(n)


def _check_t(t) -> float:
    t = float(t)
    if not 0.0 <= t <= 1.0:
        raise ValueError(f"t must lie in [0, 1], got {t}")
    return t


def _check_end(end: str) -> str:
    if end not in ENDS:
        raise ValueError(f"end must be one of {ENDS}, got {end!r}")
    return end


def path_angle(t: float, end: str = "reflection") -> tuple[int, float]:
    """The stage (1 or 2) of the path at ``t`` and the rotation angle of that stage's pairs."""
    t, end = _check_t(t), _check_end(end)
    if end == "minus-identity":
        return 1, math.pi * t
    if t <= 0.5:
        return 1, 2 * math.pi * t
    return 2, 2 * math.pi * (t - 0.5)


def _rotate_pairs(n: int, first: int, angle: float) -> np.ndarray:
    """The n x n truncation of the operator rotating pairs (first, first+1), (first+2, ...)."""
    m = np.eye(n)
    c, s = math.cos(angle), math.sin(angle)
    i = first
    while i < n:
        if i + 1 < n:
            m[i:i + 2, i:i + 2] = [[c, -s], [s, c]]
        else:
            m[i, i] = c            # the pair (i, i+1) is cut by the truncation: only cos remains
        i += 2
    return m


def truncated_path(t: float, n: int, end: str = "reflection") -> np.ndarray:
    """:math:`P_nA_tP_n`, the top-left n × n block of the path operator at ``t``."""
    n = _check_n(n)
    stage, angle = path_angle(t, end)
    if stage == 1:
        return _rotate_pairs(n, 0, angle)
    return -_rotate_pairs(n, 1, angle)      # -B(phi): B fixes e_1 and turns (e_2, e_3), ...


def end_matrix(n: int, end: str = "reflection") -> np.ndarray:
    """The truncation of the path's end: diag(-1, 1, ..., 1) or -I."""
    n = _check_n(n)
    if _check_end(end) == "minus-identity":
        return -np.eye(n)
    out = np.eye(n)
    out[0, 0] = -1.0
    return out


def path_distance(t: float, s: float, end: str = "reflection") -> float:
    """:math:`\\lVert A_t - A_s\\rVert` on :math:`\\ell^2` when t and s lie in the same stage
    (:math:`2\\lvert\\sin(\\Delta\\theta/2)\\rvert`, every block turning by the same angle); across the
    stages, the triangle inequality through :math:`t=\\tfrac12` (an upper bound)."""
    (st, at), (ss, as_) = path_angle(t, end), path_angle(s, end)
    if st == ss:
        return 2 * abs(math.sin((at - as_) / 2))
    return path_distance(t, 0.5, end) + path_distance(0.5, s, end)


# ----------------------------------------------------------------------------------- schemes
def galerkin(a: np.ndarray) -> np.ndarray:
    """The Galerkin truncation itself (linear in the operator, continuous, not always invertible)."""
    return a


def shifted_galerkin(a: np.ndarray, shift: float = 0.1) -> np.ndarray:
    """:math:`P_nAP_n + \\varepsilon I`: a regularised truncation (still continuous and linear)."""
    return a + shift * np.eye(a.shape[0])


def polar_repair(a: np.ndarray) -> np.ndarray:
    """The orthogonal polar factor of the truncation, the nearest orthogonal matrix: always a
    diffeomorphism, nonlinear in the operator, and (as the path shows) not continuous."""
    from scipy.linalg import polar

    return polar(a)[0]


SCHEMES = {"Galerkin": galerkin, "Galerkin + 0.1 I": shifted_galerkin,
           "polar repair": polar_repair}


@dataclass(frozen=True)
class PathDilemma:
    """How one discretisation scheme fares along the path in dimension n."""

    n: int
    det_start: float
    det_end: float
    sigma_min: float          # smallest singular value found (on the grid and at located roots)
    jump: float               # largest ||D(b) - D(a)|| over the grid and the refined brackets
    jump_width: float         # the t-width of the bracket with the largest jump
    start_error: float        # ||D(A_0) - I||
    end_error: float          # ||D(A_1) - P_n A_1 P_n||

    def singular(self, tol: float = 1e-10) -> bool:
        return self.sigma_min <= tol

    def discontinuous(self, tol: float = 1.0) -> bool:
        return self.jump >= tol

    def unfaithful(self, tol: float = 0.5) -> bool:
        return max(self.start_error, self.end_error) > tol

    def escapes(self) -> bool:
        """Invertible all along, continuous, and close to the path's ends: what no scheme can do
        on the path to the reflection."""
        return not (self.singular() or self.discontinuous() or self.unfaithful())


def path_dilemma(scheme, n: int, ts, *, end: str = "reflection", bisections: int = 60) -> PathDilemma:
    """Follow ``scheme(P_n A_t P_n)`` along the grid ``ts`` (increasing, from 0 to 1).

    Wherever :math:`\\det` changes sign between two grid points, bisect on the sign to a bracket of
    width ~1e-16: a continuous scheme then sits at a singular matrix (its smallest singular value
    is recorded), a discontinuous one keeps a jump of fixed size across a vanishing bracket.
    """
    n = _check_n(n)
    ts = np.asarray(ts, dtype=np.float64)
    if ts.ndim != 1 or ts.size < 2 or ts[0] != 0.0 or ts[-1] != 1.0 or np.any(np.diff(ts) <= 0):
        raise ValueError("ts must be an increasing grid from 0 to 1 with at least two points")
    if not callable(scheme):
        raise TypeError("scheme must be a function of the truncated matrix")

    def d(t):
        return scheme(truncated_path(t, n, end))

    mats = [d(t) for t in ts]
    dets = np.array([np.linalg.det(m) for m in mats])
    smin = min(float(np.linalg.svd(m, compute_uv=False)[-1]) for m in mats)
    steps = [float(np.linalg.norm(b - a, 2)) for a, b in zip(mats, mats[1:])]
    k = int(np.argmax(steps))
    jump, width = steps[k], float(ts[k + 1] - ts[k])
    for i in np.flatnonzero(np.sign(dets[:-1]) * np.sign(dets[1:]) <= 0):
        lo, hi = float(ts[i]), float(ts[i + 1])
        s_lo = np.sign(dets[i])
        for _ in range(bisections):
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            if np.sign(np.linalg.det(d(mid))) == s_lo and s_lo != 0:
                lo = mid
            else:
                hi = mid
        for t in (lo, hi):
            smin = min(smin, float(np.linalg.svd(d(t), compute_uv=False)[-1]))
        gap = float(np.linalg.norm(d(hi) - d(lo), 2))
        if gap > jump or (gap >= 1.0 and hi - lo < width):
            jump, width = gap, hi - lo
    return PathDilemma(n=n, det_start=float(dets[0]), det_end=float(dets[-1]), sigma_min=smin,
                       jump=jump, jump_width=width,
                       start_error=float(np.linalg.norm(mats[0] - np.eye(n), 2)),
                       end_error=float(np.linalg.norm(mats[-1] - end_matrix(n, end), 2)))
