"""Vector sets with known exact neighbours: generated Gaussian mixtures and scikit-learn's digits.

A mixture draws ``n_clusters`` centres :math:`\\mu_c \\sim N(0, s^2 I_d)` and points
:math:`x = \\mu_c + \\varepsilon,\\ \\varepsilon \\sim N(0, I_d)` with a uniformly chosen ``c``;
``separation`` is :math:`s`. Base points and queries come from the same distribution (queries are
fresh draws, not base points).
"""
from __future__ import annotations

import numpy as np

__all__ = ["gaussian_mixture", "low_dim_clusters", "digits"]


def gaussian_mixture(n: int, n_queries: int, d: int, n_clusters: int = 50,
                     separation: float = 1.0, rng: np.random.Generator | None = None):
    """``(base, queries)`` float32 arrays drawn from one Gaussian mixture (see module doc)."""
    for name, v in (("n", n), ("n_queries", n_queries), ("d", d), ("n_clusters", n_clusters)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not np.isfinite(separation) or separation < 0:
        raise ValueError(f"separation must be a finite number >= 0, got {separation!r}")
    if rng is None:
        raise ValueError("rng must be a numpy Generator (use reprobook.rng(seed, stream))")
    centres = rng.normal(0.0, separation, size=(n_clusters, d))
    lab = rng.integers(0, n_clusters, size=n + n_queries)
    pts = centres[lab] + rng.normal(size=(n + n_queries, d))
    pts = pts.astype(np.float32)
    return pts[:n], pts[n:]


def low_dim_clusters(n: int, n_queries: int, d: int, n_clusters: int = 20, intrinsic: int = 4,
                     separation: float = 3.0, noise: float = 0.05,
                     rng: np.random.Generator | None = None):
    r"""``(base, queries)`` of low intrinsic dimension: cluster :math:`c` is a flat ``intrinsic``-dim
    Gaussian, :math:`x = \mu_c + A_c z + \nu`, with centres :math:`\mu_c \sim N(0, s^2 I_d)`, a
    random orthonormal :math:`A_c \in \mathbb R^{d \times \text{intrinsic}}`,
    :math:`z \sim N(0, I)` and a small ambient noise :math:`\nu \sim N(0, \text{noise}^2 I_d)`."""
    for name, v in (("n", n), ("n_queries", n_queries), ("d", d), ("n_clusters", n_clusters),
                    ("intrinsic", intrinsic)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if intrinsic > d:
        raise ValueError(f"intrinsic ({intrinsic}) must be at most d ({d})")
    if not (np.isfinite(separation) and separation >= 0 and np.isfinite(noise) and noise >= 0):
        raise ValueError(f"separation and noise must be finite and >= 0, got {separation}, {noise}")
    if rng is None:
        raise ValueError("rng must be a numpy Generator (use reprobook.rng(seed, stream))")
    centres = rng.normal(0.0, separation, size=(n_clusters, d))
    bases = np.stack([np.linalg.qr(rng.normal(size=(d, intrinsic)))[0] for _ in range(n_clusters)])
    lab = rng.integers(0, n_clusters, size=n + n_queries)
    z = rng.normal(size=(n + n_queries, intrinsic))
    pts = centres[lab] + np.einsum("nij,nj->ni", bases[lab], z) + noise * rng.normal(size=(n + n_queries, d))
    pts = pts.astype(np.float32)
    return pts[:n], pts[n:]


def digits(n_queries: int = 100, rng: np.random.Generator | None = None):
    """scikit-learn's bundled 8x8 digits (1797 x 64), split at random into base and queries."""
    from sklearn.datasets import load_digits

    if rng is None:
        raise ValueError("rng must be a numpy Generator (use reprobook.rng(seed, stream))")
    X = load_digits().data.astype(np.float32)
    if not 1 <= n_queries < X.shape[0] - 10:
        raise ValueError(f"n_queries must be in [1, {X.shape[0] - 11}], got {n_queries}")
    perm = rng.permutation(X.shape[0])
    return X[perm[n_queries:]], X[perm[:n_queries]]
