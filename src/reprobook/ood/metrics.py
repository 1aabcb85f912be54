r"""OOD detection metrics, with the in-distribution samples as the positive class.

* AUROC: the probability that a random ID sample scores above a random OOD one, ties counting
  half, computed as the Mann-Whitney statistic from mid-ranks,

  .. math:: \mathrm{AUROC} = \frac{R_{\rm ID} - n_{\rm ID}(n_{\rm ID}+1)/2}{n_{\rm ID}\,n_{\rm OOD}},

  where :math:`R_{\rm ID}` is the sum of the ID samples' ranks in the pooled scores. This is
  :func:`sklearn.metrics.roc_auc_score` exactly (the tests compare them); it is computed here
  because a chapter evaluates hundreds of (method, set, seed) pairs and sklearn's input checks
  dominate at these sizes.
* FPR@95: the fraction of OOD samples scored at or above the threshold that keeps 95% of the ID
  samples: with :math:`k=\lceil 0.95\,n_{\rm ID}\rceil`, the threshold is the :math:`k`-th largest ID
  score (the first point of the ROC curve with TPR >= 0.95, as from
  :func:`sklearn.metrics.roc_curve`).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.stats import rankdata

__all__ = ["auroc", "fpr_at_tpr"]


def _scores(score_id, score_ood):
    a = np.asarray(score_id, dtype=np.float64).ravel()
    b = np.asarray(score_ood, dtype=np.float64).ravel()
    if a.size == 0 or b.size == 0:
        raise ValueError(f"need ID and OOD scores, got {a.size} and {b.size}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("scores must be finite")
    return a, b


def auroc(score_id, score_ood) -> float:
    """Area under the ROC curve of separating ID (positive) from OOD by the score."""
    a, b = _scores(score_id, score_ood)
    ranks = rankdata(np.r_[a, b])            # mid-ranks: ties count half
    n, m = a.size, b.size
    return float((ranks[:n].sum() - n * (n + 1) / 2) / (n * m))


def fpr_at_tpr(score_id, score_ood, tpr: float = 0.95) -> float:
    """False-positive rate (OOD accepted) at the first threshold whose ID recall is >= ``tpr``."""
    if not 0 < tpr <= 1:
        raise ValueError(f"tpr must be in (0, 1], got {tpr}")
    a, b = _scores(score_id, score_ood)
    k = min(a.size, math.ceil(tpr * a.size - 1e-9))
    threshold = np.sort(a)[::-1][k - 1]
    return float(np.mean(b >= threshold))
