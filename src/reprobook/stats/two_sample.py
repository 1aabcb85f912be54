r"""Distances between two samples: energy distance, sliced Wasserstein-2, Fréchet distance, MMD,
and mode coverage against known mixture modes.

* **Energy distance** (Székely): :math:`\mathrm{ED}=2E\|X-Y\|-E\|X-X'\|-E\|Y-Y'\|\ge0`, zero iff the
  laws agree; within-sample means exclude the diagonal (U-statistics), so ED of two samples of one
  law is zero in expectation.
* **Sliced W2**: :math:`\big(E_{u\sim S^{d-1}}W_2^2(u^\top X,u^\top Y)\big)^{1/2}`, each 1-d
  :math:`W_2` from sorted projections (equal sample sizes).
* **Fréchet distance** between Gaussian fits, :math:`\|m_1-m_2\|^2+\mathrm{tr}(C_1+C_2-2(C_1C_2)^{1/2})`:
  FID's statistic, on whatever features are passed.
* **MMD²** with a Gaussian kernel (unbiased).
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["energy_distance", "sliced_w2", "frechet_distance", "mmd2", "mode_coverage"]


def _pair(x, y):
    x = torch.as_tensor(x, dtype=torch.float64)
    y = torch.as_tensor(y, dtype=torch.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"need two (n, d) samples of equal d, got {tuple(x.shape)}, {tuple(y.shape)}")
    if len(x) < 2 or len(y) < 2:
        raise ValueError("each sample needs at least 2 points")
    return x, y


def _offdiag_mean(k: torch.Tensor) -> float:
    n = k.shape[0]
    return float((k.sum() - k.diagonal().sum()) / (n * (n - 1)))


def energy_distance(x, y) -> float:
    x, y = _pair(x, y)
    return float(2 * torch.cdist(x, y).mean()) - _offdiag_mean(torch.cdist(x, x)) - _offdiag_mean(
        torch.cdist(y, y))


def sliced_w2(x, y, n_proj: int, generator: torch.Generator) -> float:
    x, y = _pair(x, y)
    if len(x) != len(y):
        raise ValueError(f"sliced_w2 needs samples of equal size, got {len(x)} and {len(y)}")
    u = torch.randn(x.shape[1], n_proj, generator=generator, dtype=torch.float64)
    u = u / torch.linalg.vector_norm(u, dim=0, keepdim=True)
    px, py = torch.sort(x @ u, 0).values, torch.sort(y @ u, 0).values
    return float(((px - py) ** 2).mean().sqrt())


def frechet_distance(fx, fy) -> float:
    from scipy.linalg import sqrtm

    fx, fy = (np.asarray(a, dtype=np.float64) for a in _pair(fx, fy))
    m1, m2 = fx.mean(0), fy.mean(0)
    # a ridge of 1e-6 keeps sqrtm stable when a feature is constant (a dead ReLU unit)
    ridge = 1e-6 * np.eye(fx.shape[1])
    c1 = np.atleast_2d(np.cov(fx, rowvar=False)) + ridge
    c2 = np.atleast_2d(np.cov(fy, rowvar=False)) + ridge
    root = sqrtm(c1 @ c2)
    root = root.real if np.iscomplexobj(root) else root
    return float(((m1 - m2) ** 2).sum() + np.trace(c1 + c2 - 2 * root))


def mmd2(x, y, bandwidth: float) -> float:
    x, y = _pair(x, y)
    if bandwidth <= 0:
        raise ValueError(f"bandwidth must be positive, got {bandwidth}")

    def k(a, b):
        return torch.exp(-torch.cdist(a, b) ** 2 / (2 * bandwidth ** 2))

    return _offdiag_mean(k(x, x)) + _offdiag_mean(k(y, y)) - 2 * float(k(x, y).mean())


def mode_coverage(x, means, weights, radius: float, min_share: float = 0.05) -> tuple[int, np.ndarray]:
    """Modes that hold at least ``min_share`` of their expected mass: a sample counts for its
    nearest mode when it lies within ``radius`` of it. Returns (modes covered, share of samples per mode
    divided by the mode's weight)."""
    x = torch.as_tensor(x, dtype=torch.float64)
    means = torch.as_tensor(means, dtype=torch.float64)
    w = np.asarray(weights, dtype=np.float64)
    if x.ndim != 2 or means.ndim != 2 or x.shape[1] != means.shape[1] or len(w) != len(means):
        raise ValueError("x (n, d), means (K, d) and weights (K,) must agree")
    dist = torch.cdist(x, means)
    near = dist.argmin(1)
    ok = dist.min(1).values <= radius
    counts = np.bincount(near[ok].numpy(), minlength=len(means)) / len(x)
    rel = counts / w
    return int((rel >= min_share).sum()), rel
