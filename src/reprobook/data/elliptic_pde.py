r"""Elliptic PDE instances on the unit square with exact targets at every resolution.

Both problems live on :math:`[0,1]^2` with zero Dirichlet data and are sampled on the grid
:math:`x_k = k/n,\ k = 0..n-1` (the point 0 is on the boundary, the point 1 is its periodic image and
is left out), so the grid of ``n`` points is every other point of the grid of ``2n``.

**Poisson** (the CNO benchmark). With coefficients :math:`a_{ij}\sim U[-1,1]`, ``K`` modes and
decay ``r``,

.. math::

    f(x,y) = \frac{\pi}{K^2}\sum_{i,j=1}^{K} a_{ij}(i^2+j^2)^{r}\sin(\pi i x)\sin(\pi j y),\qquad
    -\Delta u = f,\ u|_{\partial\Omega} = 0
    \ \Rightarrow\
    u = \frac{1}{\pi K^2}\sum_{i,j=1}^{K} a_{ij}(i^2+j^2)^{r-1}\sin(\pi i x)\sin(\pi j y),

since :math:`-\Delta\sin(\pi ix)\sin(\pi jy)=\pi^2(i^2+j^2)\sin(\pi ix)\sin(\pi jy)`. Both ``f`` and
``u`` are evaluated from the series, so the target is the exact solution at every resolution (no
discretisation error). :func:`poisson_fd` solves the same problem with the 5-point finite-difference
Laplacian and a sparse direct solve (the test checks its O(h^2) convergence to the series).

**Darcy** (the FNO benchmark). :math:`-\nabla\cdot(a\nabla u)=1`, ``u = 0`` on the boundary, with a
piecewise-constant coefficient :math:`a = a_+` where a band-limited Gaussian random field
:math:`g>0` and :math:`a_-` elsewhere. ``g`` is a finite Fourier series (independent Gaussian
coefficients with Matérn-type variances), so it is the same function on every grid and ``a`` is its
exact threshold there. There is no closed form: :func:`darcy_solve` discretises with a conservative
5-point finite-volume scheme (harmonic means of ``a`` on the faces) and solves the sparse system
exactly with ``scipy.sparse.linalg.splu``. A target at resolution ``n`` is *that resolution's*
discrete solution; comparing resolutions therefore includes the discretisation's own change, which
:func:`darcy_solve` lets a chapter measure.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

__all__ = ["grid", "poisson_coefficients", "poisson_source", "poisson_solution", "poisson_fd",
           "darcy_fields", "darcy_coefficient", "darcy_solve"]


def _check_n(n, minimum=4):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < minimum:
        raise ValueError(f"n (grid points per side) must be an int >= {minimum}, got {n!r}")
    return int(n)


def _check_count(count):
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ValueError(f"count must be a positive int, got {count!r}")
    return int(count)


def grid(n: int) -> np.ndarray:
    """The 1-D grid ``k / n, k = 0..n-1`` shared by both problems."""
    return np.arange(_check_n(n)) / n


# ------------------------------------------------------------------------------------- Poisson
def poisson_coefficients(count: int, K: int, rng: np.random.Generator) -> np.ndarray:
    """``a_ij ~ U[-1, 1]``: array ``(count, K, K)`` (index ``i-1, j-1``)."""
    _check_count(count)
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
        raise ValueError(f"K (modes per direction) must be a positive int, got {K!r}")
    return rng.uniform(-1.0, 1.0, size=(count, K, K))


def _sine_series(weights: np.ndarray, n: int) -> np.ndarray:
    """``sum_ij w_ij sin(pi i x) sin(pi j y)`` on the n-grid: ``(count, n, n)``, x along axis 1."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 3 or w.shape[1] != w.shape[2]:
        raise ValueError(f"coefficients must have shape (count, K, K), got {w.shape}")
    K = w.shape[1]
    S = np.sin(np.pi * np.outer(grid(n), np.arange(1, K + 1)))        # (n, K)
    return np.einsum("xi,cij,yj->cxy", S, w, S, optimize=True)


def _decay(K: int, r: float) -> np.ndarray:
    i = np.arange(1, K + 1)
    return (i[:, None] ** 2 + i[None, :] ** 2).astype(np.float64) ** r


def poisson_source(a: np.ndarray, n: int, r: float = -0.5) -> np.ndarray:
    """The right-hand side ``f`` of the coefficients ``a`` on the n-grid: ``(count, n, n)``."""
    a = np.asarray(a, dtype=np.float64)
    _check_n(n)
    K = a.shape[-1]
    return _sine_series(a * _decay(K, r) * (np.pi / K ** 2), n)


def poisson_solution(a: np.ndarray, n: int, r: float = -0.5) -> np.ndarray:
    """The exact solution ``u`` of ``-Lap u = f``, zero on the boundary: ``(count, n, n)``."""
    a = np.asarray(a, dtype=np.float64)
    _check_n(n)
    K = a.shape[-1]
    return _sine_series(a * _decay(K, r - 1.0) / (np.pi * K ** 2), n)


def _laplacian_1d(m: int, h: float) -> sp.csr_matrix:
    return sp.diags([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], [-1, 0, 1]) / h ** 2


def poisson_fd(f: np.ndarray) -> np.ndarray:
    """Solve ``-Lap u = f`` with the 5-point Laplacian on the interior nodes of the n-grid (h = 1/n)
    and zero Dirichlet data; ``f: (n, n)`` or ``(count, n, n)``; returns the same shape."""
    f = np.asarray(f, dtype=np.float64)
    single = f.ndim == 2
    F = f[None] if single else f
    if F.ndim != 3 or F.shape[1] != F.shape[2]:
        raise ValueError(f"f must be (n, n) or (count, n, n), got shape {f.shape}")
    n = _check_n(F.shape[1])
    m = n - 1
    L1 = _laplacian_1d(m, 1.0 / n)
    A = (sp.kron(L1, sp.eye(m)) + sp.kron(sp.eye(m), L1)).tocsc()
    lu = spla.splu(A)
    out = np.zeros_like(F)
    out[:, 1:, 1:] = lu.solve(F[:, 1:, 1:].reshape(len(F), -1).T).T.reshape(-1, m, m)
    return out[0] if single else out


# --------------------------------------------------------------------------------------- Darcy
def darcy_fields(count: int, modes: int, rng: np.random.Generator, *, alpha: float = 2.0,
                 tau: float = 3.0) -> np.ndarray:
    """Complex Fourier coefficients ``(count, 2*modes-1, modes)`` of real band-limited Gaussian
    random fields on the torus: frequencies ``k1 in -(modes-1)..modes-1`` (axis 1, zero at index
    ``modes-1``) and ``k2 in 0..modes-1`` (the conjugate half is implied), variances
    ``(4 pi^2 |k|^2 + tau^2)^(-alpha)``, each field normalised to unit mean square."""
    _check_count(count)
    if isinstance(modes, bool) or not isinstance(modes, (int, np.integer)) or modes < 1:
        raise ValueError(f"modes must be a positive int, got {modes!r}")
    if not (alpha > 0 and tau > 0):
        raise ValueError(f"alpha and tau must be positive, got {alpha!r}, {tau!r}")
    k1 = np.arange(-(modes - 1), modes)[:, None]
    k2 = np.arange(modes)[None, :]
    sd = (4 * np.pi ** 2 * (k1 ** 2 + k2 ** 2) + tau ** 2) ** (-alpha / 2)
    c = (rng.normal(size=(count,) + sd.shape) + 1j * rng.normal(size=(count,) + sd.shape)) * sd
    # the k2 = 0 column must itself be conjugate-symmetric in k1 for a real field
    c[:, :modes - 1, 0] = np.conj(c[:, modes:, 0][:, ::-1])   # k1 < 0 mirrors k1 > 0
    c[:, modes - 1, 0] = c[:, modes - 1, 0].real
    g = _field_values(c, 4 * modes)
    return c / np.sqrt((g ** 2).mean(axis=(1, 2)))[:, None, None]


def _field_values(c: np.ndarray, n: int) -> np.ndarray:
    """Evaluate the fields of :func:`darcy_fields` on the n-grid (exact trigonometric sums)."""
    modes = c.shape[-1]
    x = grid(n)
    E1 = np.exp(2j * np.pi * np.outer(x, np.arange(-(modes - 1), modes)))     # (n, 2m-1)
    E2 = np.exp(2j * np.pi * np.outer(x, np.arange(modes)))                    # (n, m)
    w = np.where(np.arange(modes) == 0, 1.0, 2.0)                              # conjugate half
    return np.einsum("xa,cab,yb->cxy", E1, c * w, E2, optimize=True).real


def darcy_coefficient(fields: np.ndarray, n: int, high: float = 12.0, low: float = 3.0) -> np.ndarray:
    """The coefficient ``a = high`` where the field is positive and ``low`` elsewhere, on the
    n-grid: ``(count, n, n)``."""
    c = np.asarray(fields)
    if c.ndim != 3 or c.shape[1] != 2 * c.shape[2] - 1:
        raise ValueError(f"fields must have shape (count, 2*modes-1, modes), got {c.shape}")
    _check_n(n)
    if not (high > 0 and low > 0):
        raise ValueError(f"high and low must be positive, got {high!r}, {low!r}")
    return np.where(_field_values(c, n) > 0, high, low)


def darcy_solve(a: np.ndarray, source: float = 1.0) -> np.ndarray:
    r"""Solve :math:`-\nabla\cdot(a\nabla u) = \text{source}` with ``u = 0`` on the boundary.

    ``a: (n, n)`` or ``(count, n, n)``, the coefficient at the grid nodes ``(k/n, l/n)``; the
    unknowns are the interior nodes ``1..n-1`` (the boundary is row/column 0 and the implied
    ``k = n``). The flux through the face between two nodes uses the harmonic mean of their ``a``
    (the conservative choice for a discontinuous coefficient); faces to the boundary use the
    interior node's ``a``. One sparse LU per instance. Returns ``u`` on the n-grid (zeros on row and
    column 0), the same shape as ``a``."""
    a = np.asarray(a, dtype=np.float64)
    single = a.ndim == 2
    A_ = a[None] if single else a
    if A_.ndim != 3 or A_.shape[1] != A_.shape[2]:
        raise ValueError(f"a must be (n, n) or (count, n, n), got shape {a.shape}")
    if not np.all(A_ > 0):
        raise ValueError("the coefficient a must be positive everywhere")
    n = _check_n(A_.shape[1])
    m = n - 1
    idx = np.arange(m * m).reshape(m, m)
    out = np.zeros_like(A_)
    for c in range(len(A_)):
        ai = A_[c, 1:, 1:]                                        # interior nodes (m, m)
        # face coefficients between interior neighbours, along x (axis 0) and y (axis 1)
        fx = 2 * ai[1:, :] * ai[:-1, :] / (ai[1:, :] + ai[:-1, :])
        fy = 2 * ai[:, 1:] * ai[:, :-1] / (ai[:, 1:] + ai[:, :-1])
        diag = np.zeros((m, m))
        diag[1:, :] += fx
        diag[:-1, :] += fx
        diag[:, 1:] += fy
        diag[:, :-1] += fy
        # faces to the boundary (the first and last interior rows/columns)
        diag[0, :] += ai[0, :]
        diag[-1, :] += ai[-1, :]
        diag[:, 0] += ai[:, 0]
        diag[:, -1] += ai[:, -1]
        rows = [idx.ravel(), idx[1:, :].ravel(), idx[:-1, :].ravel(), idx[:, 1:].ravel(),
                idx[:, :-1].ravel()]
        cols = [idx.ravel(), idx[:-1, :].ravel(), idx[1:, :].ravel(), idx[:, :-1].ravel(),
                idx[:, 1:].ravel()]
        vals = [diag.ravel(), -fx.ravel(), -fx.ravel(), -fy.ravel(), -fy.ravel()]
        M = sp.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(m * m, m * m)) * n ** 2
        out[c, 1:, 1:] = spla.splu(M).solve(np.full(m * m, float(source))).reshape(m, m)
    return out[0] if single else out
