r"""A TuRBO-1 trust region (Eriksson et al. 2019), as used with EULBO by Maus et al. (2024).

The region is a box of side :math:`L` centred at the incumbent :math:`x^+`, clipped to the unit cube.
After each batch: a *success* if the best new value beats the incumbent by more than
:math:`10^{-3}|y^+|`, else a *failure*. After ``success_tol`` successes in a row :math:`L \leftarrow
\min(2L, L_{\max})`; after ``failure_tol`` failures in a row :math:`L \leftarrow L/2`. When
:math:`L < L_{\min}` the region *restarts* at :math:`L_0` (the flag is reported; we keep the data).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["TrustRegion"]


@dataclass
class TrustRegion:
    dim: int
    length: float = 0.8
    length_min: float = 0.5 ** 7
    length_max: float = 1.6
    success_tol: int = 3
    failure_tol: int = 5
    success_count: int = 0
    failure_count: int = 0
    best_value: float = -float("inf")
    restarts: int = 0

    def __post_init__(self):
        if not isinstance(self.dim, int) or self.dim < 1:
            raise ValueError(f"dim must be a positive int, got {self.dim!r}")
        if not 0 < self.length_min <= self.length <= self.length_max:
            raise ValueError("length must satisfy 0 < length_min <= length <= length_max, got "
                             f"{self.length_min}, {self.length}, {self.length_max}")
        if self.success_tol < 1 or self.failure_tol < 1:
            raise ValueError("success_tol and failure_tol must be >= 1")
        self._length0 = self.length

    def update(self, new_values: torch.Tensor) -> None:
        """Update the counters and the side length with the values of the latest batch."""
        y_new = float(torch.as_tensor(new_values).max())
        if y_new > self.best_value + 1e-3 * abs(self.best_value):
            self.success_count, self.failure_count = self.success_count + 1, 0
        else:
            self.success_count, self.failure_count = 0, self.failure_count + 1
        if self.success_count >= self.success_tol:
            self.length, self.success_count = min(2.0 * self.length, self.length_max), 0
        elif self.failure_count >= self.failure_tol:
            self.length, self.failure_count = self.length / 2.0, 0
        self.best_value = max(self.best_value, y_new)
        if self.length < self.length_min:
            self.length, self.restarts = self._length0, self.restarts + 1

    def bounds(self, center: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(lower, upper)`` of the region around ``center`` (d,), inside the unit cube."""
        center = torch.as_tensor(center, dtype=torch.float64)
        if center.shape != (self.dim,):
            raise ValueError(f"center must have shape ({self.dim},), got {tuple(center.shape)}")
        half = self.length / 2.0
        return (center - half).clamp(0.0, 1.0), (center + half).clamp(0.0, 1.0)
