r"""OOD detection metrics, with the in-distribution samples as the positive class.

* AUROC: the probability that a random ID sample scores above a random OOD one (ties count half),
  :func:`sklearn.metrics.roc_auc_score`.
* FPR@95: the fraction of OOD samples scored at or above the threshold that keeps 95% of the ID
  samples (the smallest false-positive rate on the ROC curve with TPR >= 0.95), from
  :func:`sklearn.metrics.roc_curve`.
"""
from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve

__all__ = ["auroc", "fpr_at_tpr"]


def _labels_scores(score_id, score_ood):
    a = np.asarray(score_id, dtype=np.float64).ravel()
    b = np.asarray(score_ood, dtype=np.float64).ravel()
    if a.size == 0 or b.size == 0:
        raise ValueError(f"need ID and OOD scores, got {a.size} and {b.size}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("scores must be finite")
    return np.r_[np.ones(a.size), np.zeros(b.size)], np.r_[a, b]


def auroc(score_id, score_ood) -> float:
    """Area under the ROC curve of separating ID (positive) from OOD by the score."""
    y, s = _labels_scores(score_id, score_ood)
    return float(roc_auc_score(y, s))


def fpr_at_tpr(score_id, score_ood, tpr: float = 0.95) -> float:
    """False-positive rate (OOD accepted) at the first threshold whose ID recall is >= ``tpr``."""
    if not 0 < tpr <= 1:
        raise ValueError(f"tpr must be in (0, 1], got {tpr}")
    y, s = _labels_scores(score_id, score_ood)
    fpr, tp, _ = roc_curve(y, s, drop_intermediate=False)
    return float(fpr[np.searchsorted(tp, tpr - 1e-12, side="left")])
