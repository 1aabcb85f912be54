r"""An idealised event camera: events from log-intensity changes crossing a contrast threshold.

Each pixel of an event camera keeps a reference log intensity :math:`L^{\mathrm{ref}}` (the level
at its last event).  When the current log intensity :math:`L_t = \log(I_t + \varepsilon)` has moved
by at least the contrast threshold :math:`C` from the reference, the pixel fires

.. math:: n_t = \left\lfloor \frac{|L_t - L^{\mathrm{ref}}|}{C} \right\rfloor

events of polarity :math:`\operatorname{sign}(L_t - L^{\mathrm{ref}})` (+1 brighter, -1 darker) and
moves its reference by exactly those steps, :math:`L^{\mathrm{ref}} \leftarrow L^{\mathrm{ref}} +
\operatorname{sign}(\cdot)\, n_t C`, so a change smaller than :math:`C` is remembered and fires
later once it has accumulated (the standard model of ESIM / v2e without noise, refractory period or
per-pixel threshold mismatch).  The reference starts at the first frame's log intensity.

The simulator is sampled at the times of the frames it is given (the caller renders the scene at
several sub-steps between two video frames for a finer event timing); the events of each step are
returned as a two-channel count image ``[2, H, W]``: channel 0 counts positive, channel 1 negative
events.  Frames are grey levels in ``[0, 1]``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["simulate_events", "event_frame_to_signed"]


def simulate_events(frames, threshold: float = 0.15, eps: float = 0.01) -> np.ndarray:
    """Events between consecutive frames of ``frames: [N, H, W]`` (grey, in [0, 1]).

    Returns integer counts ``[N - 1, 2, H, W]``: step ``k`` holds the events fired between frame
    ``k`` and frame ``k + 1``, positive polarity in channel 0 and negative in channel 1 (module
    docstring for the model).
    """
    f = np.asarray(frames, dtype=np.float64)
    if f.ndim != 3:
        raise ValueError(f"frames must have shape [N, H, W], got {f.shape}")
    if f.shape[0] < 2:
        raise ValueError(f"need at least 2 frames to make events, got {f.shape[0]}")
    if not threshold > 0:
        raise ValueError(f"threshold must be positive, got {threshold!r}")
    if not eps > 0:
        raise ValueError(f"eps must be positive (log of 0), got {eps!r}")
    if not np.isfinite(f).all() or f.min() < 0:
        raise ValueError("frames must be finite, non-negative intensities")
    logs = np.log(f + eps)
    ref = logs[0].copy()
    out = np.zeros((f.shape[0] - 1, 2) + f.shape[1:], dtype=np.int64)
    for k in range(1, f.shape[0]):
        d = logs[k] - ref
        # a tiny tolerance so that a change of exactly n*C (up to rounding) fires n events
        n = np.floor(np.abs(d) / threshold + 1e-9).astype(np.int64)
        pos, neg = (d > 0) & (n > 0), (d < 0) & (n > 0)
        out[k - 1, 0][pos] = n[pos]
        out[k - 1, 1][neg] = n[neg]
        ref += np.sign(d) * n * threshold
    return out


def event_frame_to_signed(events) -> np.ndarray:
    """Positive minus negative counts of event frames ``[..., 2, H, W]`` -> ``[..., H, W]``."""
    e = np.asarray(events)
    if e.ndim < 3 or e.shape[-3] != 2:
        raise ValueError(f"events must have shape [..., 2, H, W], got {e.shape}")
    return e[..., 0, :, :] - e[..., 1, :, :]
