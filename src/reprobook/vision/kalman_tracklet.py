r"""A constant-velocity Kalman filter for one tracklet's centre in the image plane.

State :math:`s = (x, y, v_x, v_y)`, one step per video frame:

.. math::
   s_{t+1} = F s_t + w_t,\quad F = \begin{pmatrix} I_2 & I_2 \\ 0 & I_2 \end{pmatrix},\quad
   w_t \sim \mathcal N(0, Q),\qquad z_t = H s_t + r_t,\quad H = (I_2\ 0),\quad r_t \sim \mathcal N(0, R),

with the discrete white-noise-acceleration :math:`Q = q \begin{pmatrix} I_2/4 & I_2/2 \\ I_2/2 & I_2
\end{pmatrix}` and :math:`R = r I_2`.  ``predict`` applies :math:`\hat s \leftarrow F \hat s`,
:math:`P \leftarrow F P F^\top + Q`; ``update(z)`` the usual gain
:math:`K = P H^\top (H P H^\top + R)^{-1}`, :math:`\hat s \leftarrow \hat s + K (z - H \hat s)`,
:math:`P \leftarrow (I - K H) P`.  This is the motion model of SORT-style multi-object trackers.
"""
from __future__ import annotations

import numpy as np

__all__ = ["KalmanTracklet"]

F = np.block([[np.eye(2), np.eye(2)], [np.zeros((2, 2)), np.eye(2)]])
H = np.hstack([np.eye(2), np.zeros((2, 2))])
Q_UNIT = np.block([[np.eye(2) / 4, np.eye(2) / 2], [np.eye(2) / 2, np.eye(2)]])


class KalmanTracklet:
    """One tracklet: a constant-velocity Kalman filter on its centre, plus bookkeeping.

    ``q``: acceleration noise (pixels^2 per frame^4); ``r``: measurement noise (pixels^2);
    ``p0_velocity``: prior variance of the unknown initial velocity.
    """

    def __init__(self, center, q: float = 1.0, r: float = 1.0, p0_velocity: float = 10.0,
                 velocity=(0.0, 0.0)):
        c = np.asarray(center, dtype=np.float64)
        if c.shape != (2,) or not np.isfinite(c).all():
            raise ValueError(f"center must be 2 finite numbers (x, y), got {center!r}")
        if not (q > 0 and r > 0 and p0_velocity > 0):
            raise ValueError(f"q, r and p0_velocity must be positive, got {q!r}, {r!r}, {p0_velocity!r}")
        self.s = np.concatenate([c, np.asarray(velocity, dtype=np.float64)])
        self.P = np.diag([r, r, p0_velocity, p0_velocity])
        self.Q, self.R = q * Q_UNIT, r * np.eye(2)
        self.misses = 0        # consecutive frames without a matched measurement
        self.age = 0           # frames since creation

    @property
    def center(self) -> np.ndarray:
        return self.s[:2].copy()

    @property
    def velocity(self) -> np.ndarray:
        return self.s[2:].copy()

    def predict(self) -> np.ndarray:
        """Advance one frame; returns the predicted centre."""
        self.s = F @ self.s
        self.P = F @ self.P @ F.T + self.Q
        self.age += 1
        return self.center

    def update(self, z) -> np.ndarray:
        """Correct with a measured centre ``z = (x, y)``; returns the corrected centre."""
        z = np.asarray(z, dtype=np.float64)
        if z.shape != (2,):
            raise ValueError(f"measurement must be (x, y), got shape {z.shape}")
        S = H @ self.P @ H.T + self.R
        K = self.P @ H.T @ np.linalg.inv(S)
        self.s = self.s + K @ (z - H @ self.s)
        self.P = (np.eye(4) - K @ H) @ self.P
        self.misses = 0
        return self.center

    def move_to(self, center) -> None:
        """Shift the position estimate to ``center`` without changing the velocity or covariance
        (used when an outside motion cue, not the filter, predicts where the tracklet went)."""
        c = np.asarray(center, dtype=np.float64)
        if c.shape != (2,):
            raise ValueError(f"center must be (x, y), got shape {c.shape}")
        self.s[:2] = c
