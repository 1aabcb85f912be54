r"""Prediction intervals for noisy measurements: conformalised quantile regression against a
mean regressor with one global noise level.

All three surrogates take a training set ``(X, y)`` and a disjoint calibration set and return, for
new inputs, an interval meant to contain a *new measurement* with probability :math:`1-\alpha`.

:class:`QuantileGBM` (QR)
    gradient-boosted regressors of the conditional quantiles :math:`q_{\alpha/2}(x)`,
    :math:`q_{1/2}(x)`, :math:`q_{1-\alpha/2}(x)` (pinball loss), interval
    :math:`[\hat q_{\alpha/2}(x), \hat q_{1-\alpha/2}(x)]`. Its width follows the noise of each input,
    but nothing guarantees its coverage: a fitted quantile is biased towards the training points.

:class:`ConformalQuantileGBM` (CQR; Romano, Patterson & Candès 2019, the "symmetric conformalised"
    surrogate of HW-GPT-Bench)
    QR fitted on the training set, then on the calibration set the scores
    :math:`E_i = \max(\hat q_{lo}(x_i) - y_i,\; y_i - \hat q_{hi}(x_i))` and the correction
    :math:`\hat Q = E_{(k)}`, the :math:`k = \lceil (1-\alpha)(n+1)\rceil`-th smallest score. The
    interval :math:`[\hat q_{lo}(x) - \hat Q,\; \hat q_{hi}(x) + \hat Q]` covers a new exchangeable
    measurement with probability at least :math:`1-\alpha` (marginally), and keeps QR's
    input-dependent width.

:class:`HomoscedasticGBM` (the baseline)
    a gradient-boosted mean :math:`\hat\mu(x)` and one noise level :math:`\hat\sigma`, the standard
    deviation of the calibration residuals, interval :math:`\hat\mu(x) \pm z_{1-\alpha/2}\hat\sigma`.
    It can cover well on average while under-covering noisy inputs and over-covering quiet ones.

:func:`coverage_by_group` reports the coverage and mean width within groups of test points (for
instance terciles of the true noise level), the conditional check that tells the two apart.

Boosting runs with one OpenMP thread: on a shared 2-core machine scikit-learn's threaded histogram
boosting was about 10x slower in CPU time than single-threaded for these few-thousand-row fits.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import ThreadpoolController

__all__ = ["QuantileGBM", "ConformalQuantileGBM", "HomoscedasticGBM", "conformal_correction",
           "coverage_by_group", "SURROGATES"]


def _xy(X, y=None):
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"X must be a non-empty [n, d] array, got shape {X.shape}")
    if y is None:
        return X
    y = np.asarray(y, dtype=float)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
    if not (np.isfinite(X).all() and np.isfinite(y).all()):
        raise ValueError("X and y must be finite")
    return X, y


_CONTROLLER: list = []


def _one_thread():
    # one controller for the process: building it scans every loaded library (milliseconds)
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="openmp")


def _alpha(alpha):
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return float(alpha)


def conformal_correction(scores, alpha: float) -> float:
    r"""The :math:`\lceil (1-\alpha)(n+1)\rceil`-th smallest of ``n`` calibration scores
    (``inf`` when that rank exceeds ``n``: too few calibration points for this :math:`\alpha`)."""
    s = np.sort(np.asarray(scores, dtype=float).ravel())
    if s.size == 0:
        raise ValueError("need at least one calibration score")
    k = math.ceil((1 - _alpha(alpha)) * (s.size + 1))
    return float(s[k - 1]) if k <= s.size else math.inf


class _Base:
    def __init__(self, alpha: float = 0.1, max_iter: int = 100, learning_rate: float = 0.1,
                 max_leaf_nodes: int = 15, min_samples_leaf: int = 20, seed: int = 0):
        self.alpha = _alpha(alpha)
        self.gbm = dict(max_iter=int(max_iter), learning_rate=float(learning_rate),
                        max_leaf_nodes=int(max_leaf_nodes), min_samples_leaf=int(min_samples_leaf),
                        random_state=int(seed), early_stopping=False)
        self.fitted = False

    def _check_fitted(self):
        if not self.fitted:
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit first")


class QuantileGBM(_Base):
    """Quantile regression by gradient boosting (see the module docstring). The calibration set
    is accepted for a common interface and ignored."""

    def _fit_quantiles(self, X, y):
        qs = (self.alpha / 2, 0.5, 1 - self.alpha / 2)
        with _one_thread():
            self.models = [HistGradientBoostingRegressor(loss="quantile", quantile=q, **self.gbm).fit(X, y)
                           for q in qs]

    def fit(self, X, y, X_cal=None, y_cal=None):
        X, y = _xy(X, y)
        self._fit_quantiles(X, y)
        self.fitted = True
        return self

    def _raw(self, X):
        self._check_fitted()
        X = _xy(X)
        with _one_thread():
            lo, med, hi = (m.predict(X) for m in self.models)
        # quantile models fitted separately may cross; order them
        return np.minimum(lo, med), med, np.maximum(hi, med)

    def predict(self, X) -> np.ndarray:
        """Point prediction (the conditional median; only that model is evaluated)."""
        self._check_fitted()
        X = _xy(X)
        with _one_thread():
            return self.models[1].predict(X)

    def predict_interval(self, X) -> tuple[np.ndarray, np.ndarray]:
        lo, _, hi = self._raw(X)
        return lo, hi


class ConformalQuantileGBM(QuantileGBM):
    """Conformalised quantile regression (see the module docstring)."""

    def fit(self, X, y, X_cal, y_cal):
        X, y = _xy(X, y)
        X_cal, y_cal = _xy(X_cal, y_cal)
        self._fit_quantiles(X, y)
        self.fitted = True
        lo, _, hi = self._raw(X_cal)
        self.correction = conformal_correction(np.maximum(lo - y_cal, y_cal - hi), self.alpha)
        return self

    def predict_interval(self, X):
        lo, _, hi = self._raw(X)
        return lo - self.correction, hi + self.correction


class HomoscedasticGBM(_Base):
    """Mean regression plus one global Gaussian noise level (see the module docstring)."""

    def fit(self, X, y, X_cal, y_cal):
        X, y = _xy(X, y)
        X_cal, y_cal = _xy(X_cal, y_cal)
        with _one_thread():
            self.model = HistGradientBoostingRegressor(loss="squared_error", **self.gbm).fit(X, y)
            resid = y_cal - self.model.predict(X_cal)
        self.sigma = float(np.std(resid, ddof=1)) if len(y_cal) > 1 else 0.0
        self.fitted = True
        return self

    def predict(self, X):
        self._check_fitted()
        with _one_thread():
            return self.model.predict(_xy(X))

    def predict_interval(self, X):
        mu = self.predict(X)
        half = stats.norm.ppf(1 - self.alpha / 2) * self.sigma
        return mu - half, mu + half


#: The surrogates by name.
SURROGATES = {"qr": QuantileGBM, "cqr": ConformalQuantileGBM, "homo": HomoscedasticGBM}


def coverage_by_group(y, lo, hi, groups) -> dict:
    """Coverage (share of ``lo <= y <= hi``) and mean width ``hi - lo`` over all points and within
    each group label: ``{"all": (cov, width), g: (cov, width), ...}`` (groups in sorted order)."""
    y, lo, hi, groups = (np.asarray(a).ravel() for a in (y, lo, hi, groups))
    if not (y.shape == lo.shape == hi.shape == groups.shape):
        raise ValueError(f"y, lo, hi and groups must have the same length, got {y.shape}, "
                         f"{lo.shape}, {hi.shape}, {groups.shape}")
    inside = (lo <= y) & (y <= hi)
    width = hi - lo
    out = {"all": (float(inside.mean()), float(width.mean()))}
    for g in np.unique(groups):
        m = groups == g
        out[g.item() if hasattr(g, "item") else g] = (float(inside[m].mean()), float(width[m].mean()))
    return out
