r"""Forecast errors. Each takes ``pred`` and ``target`` of the same shape (torch or NumPy; NumPy
floats come back) and an optional ``axis`` to keep (e.g. ``axis=-1`` gives one value per channel).

* MSE :math:`\frac1n\sum (\hat y - y)^2`, MAE :math:`\frac1n\sum|\hat y - y|`, RMSE;
* sMAPE :math:`\frac{200}{n}\sum \frac{|\hat y - y|}{|\hat y| + |y|}` (percent; 0/0 counts as 0);
* MASE: MAE divided by the in-sample MAE of the seasonal naive forecast of period ``m`` on
  ``train`` (scale-free, comparable across series).
"""
from __future__ import annotations

import numpy as np

__all__ = ["mse", "mae", "rmse", "smape", "mase"]


def _arrays(pred, target):
    p = pred.detach().cpu().double().numpy() if hasattr(pred, "detach") else np.asarray(pred, float)
    t = target.detach().cpu().double().numpy() if hasattr(target, "detach") else np.asarray(target, float)
    if p.shape != t.shape:
        raise ValueError(f"pred and target shapes differ: {p.shape} vs {t.shape}")
    if p.size == 0:
        raise ValueError("empty forecast")
    return p, t


def _reduce(e, axis):
    if axis is None:
        return float(e.mean())
    axis = axis % e.ndim
    return e.mean(axis=tuple(i for i in range(e.ndim) if i != axis))


def mse(pred, target, axis=None):
    p, t = _arrays(pred, target)
    return _reduce((p - t) ** 2, axis)


def mae(pred, target, axis=None):
    p, t = _arrays(pred, target)
    return _reduce(np.abs(p - t), axis)


def rmse(pred, target, axis=None):
    return np.sqrt(mse(pred, target, axis))


def smape(pred, target, axis=None):
    p, t = _arrays(pred, target)
    den = np.abs(p) + np.abs(t)
    e = np.where(den > 0, 2 * np.abs(p - t) / np.where(den > 0, den, 1), 0.0)
    return 100 * _reduce(e, axis) if axis is None else 100 * _reduce(e, axis)


def mase(pred, target, train, m: int = 1):
    """MAE of ``pred`` over the seasonal-naive in-sample MAE of ``train`` (time on axis 0)."""
    p, t = _arrays(pred, target)
    tr = np.asarray(train, dtype=float)
    if m < 1 or len(tr) <= m:
        raise ValueError(f"MASE needs a training series longer than m={m}")
    scale = np.abs(tr[m:] - tr[:-m]).mean()
    if scale == 0:
        raise ValueError("MASE is undefined: the seasonal naive forecast is exact on train")
    return float(np.abs(p - t).mean() / scale)
