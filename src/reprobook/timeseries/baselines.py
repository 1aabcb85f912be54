r"""Closed-form reference forecasters, fitted on a :class:`~reprobook.timeseries.windows.WindowSet`.

Both work on windows centred per channel by their own look-back mean (as RevIN does), so they see
the same input as the neural forecasters.

* :func:`window_mean` -- the forecast is the look-back mean of each channel: what an inverted
  forecaster with RevIN predicts when its network outputs zero.
* :class:`RidgeVAR` -- a vector autoregression fitted by ridge regression: every target
  :math:`y_{h,c}` is a linear function of the last ``k`` steps of **every** channel,
  :math:`\hat y = W^\top \mathrm{vec}(x_{-k:}) `, :math:`W = (X^\top X + \alpha I)^{-1}X^\top Y`.
  With ``cross=False`` each channel reads only its own past (one shared map for all channels: a
  channel-independent linear forecaster).
"""
from __future__ import annotations

import numpy as np
import torch

from reprobook.timeseries.windows import WindowSet

__all__ = ["window_mean", "RidgeVAR"]


def window_mean(ws: WindowSet) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pred, y)`` with ``pred`` the look-back mean of each channel repeated over the horizon."""
    x, y = ws.tensors()
    return x.mean(1, keepdim=True).expand_as(y).clone(), y


class RidgeVAR:
    def __init__(self, k: int = 16, alpha: float = 1.0, cross: bool = True):
        if k < 1 or alpha < 0:
            raise ValueError(f"RidgeVAR needs k >= 1 and alpha >= 0, got k={k}, alpha={alpha}")
        self.k, self.alpha, self.cross = int(k), float(alpha), bool(cross)
        self.W = None

    def _xy(self, ws: WindowSet):
        if ws.lookback < self.k:
            raise ValueError(f"look-back {ws.lookback} is shorter than k={self.k}")
        x, y = (t.double().numpy() for t in ws.tensors())
        m = x.mean(1, keepdims=True)
        x, y = x[:, -self.k:] - m, y - m
        if self.cross:
            return x.reshape(len(x), -1), y.reshape(len(y), -1), m
        # channel-independent: every (window, channel) pair is one sample of one shared map
        return (x.transpose(0, 2, 1).reshape(-1, self.k), y.transpose(0, 2, 1).reshape(-1, y.shape[1]),
                m)

    def fit(self, ws: WindowSet) -> "RidgeVAR":
        X, Y, _ = self._xy(ws)
        self.C = ws.n_channels
        self.W = np.linalg.solve(X.T @ X + self.alpha * np.eye(X.shape[1]), X.T @ Y)
        return self

    def predict(self, ws: WindowSet) -> tuple[torch.Tensor, torch.Tensor]:
        if self.W is None:
            raise RuntimeError("RidgeVAR.predict called before fit")
        if ws.n_channels != self.C:
            raise ValueError(f"fitted on {self.C} channels, got {ws.n_channels}")
        X, _, m = self._xy(ws)
        N, H, C = len(m), ws.horizon, ws.n_channels
        p = X @ self.W
        p = p.reshape(N, H, C) if self.cross else p.reshape(N, C, H).transpose(0, 2, 1)
        return torch.as_tensor(p + m), ws.tensors()[1].double()
