r"""Calibration: the expected calibration error with equal-width confidence bins,

$$\mathrm{ECE} = \sum_b \frac{|B_b|}{n}\,\big|\operatorname{acc}(B_b) - \operatorname{conf}(B_b)\big|,$$

where $B_b$ holds the points whose top-class probability falls in bin $b$.
"""
from __future__ import annotations

import torch


def expected_calibration_error(probs: torch.Tensor, labels: torch.Tensor, n_bins: int = 10) -> float:
    if probs.ndim != 2 or labels.shape != probs.shape[:1]:
        raise ValueError(f"probs must be (n, K) and labels (n,), got {tuple(probs.shape)}, "
                         f"{tuple(labels.shape)}")
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    conf, pred = probs.max(-1)
    correct = (pred == labels).double()
    b = torch.clamp((conf.double() * n_bins).long(), max=n_bins - 1)
    ece = 0.0
    for k in range(n_bins):
        mask = b == k
        if mask.any():
            ece += float(mask.double().mean() * (correct[mask].mean() - conf[mask].double().mean()).abs())
    return ece
