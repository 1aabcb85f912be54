r"""Synthetic multivariate series whose cross-channel structure is known.

**Leader/follower** (:func:`leader_follower`). ``K`` latent drivers, each a sum of sinusoids of
periods ``periods`` with random phases and amplitudes plus an AR(1) process,

.. math:: z_k(t) = \sum_{p} a_{kp}\sin(2\pi t/p + \varphi_{kp}) + u_k(t),\qquad
          u_k(t) = \phi\,u_k(t-1) + \sqrt{1-\phi^2}\,\varepsilon_k(t),

and channels that read them with a channel-specific delay :math:`\ell_c`,

.. math:: x_c(t) = \sum_k A_{ck}\, z_k(t-\ell_c) + \sigma\,e_c(t) + r_c(t),

where :math:`e_c` is AR(1) noise of unit variance and :math:`r_c` a slow random walk (step
``drift_sigma``). Leaders have :math:`\ell_c = 0`, followers :math:`\ell_c \in \{\ell_{min},\dots,
\ell_{max}\}`: a follower's next :math:`\ell_c` values are already visible in the leaders' past, so a
forecaster that reads other channels can predict the AR part of the drivers that a
channel-independent one cannot.

**Corrupted channels** (:func:`corrupt_channels`): a chosen share of channels replaced by white noise
of the channel's own mean and standard deviation, so that scaling statistics cannot tell them apart.

**Multi-period** (:func:`multi_period`): a short seasonal cycle plus a long sine of period ``P`` and
a random walk, the set-up of the spectral-attention reproduction (a long period invisible to a short
look-back).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LeaderFollower", "leader_follower", "corrupt_channels", "multi_period"]


def _check_int(name, v, lo=1):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return int(v)


def _ar1(rng, shape, phi):
    """Stationary AR(1) with unit marginal variance along axis 0."""
    if not 0 <= phi < 1:
        raise ValueError(f"AR coefficient must be in [0, 1), got {phi}")
    from scipy.signal import lfilter

    eps = rng.standard_normal(shape)
    # u(t) = phi u(t-1) + sqrt(1 - phi^2) eps(t), started at u(0) = eps(0) (already stationary)
    zi = (phi * eps[0])[None] if eps.ndim > 1 else np.array([phi * eps[0]])
    out = np.empty(shape)
    out[0] = eps[0]
    if shape[0] > 1:
        out[1:] = lfilter([np.sqrt(1 - phi ** 2)], [1.0, -phi], eps[1:], axis=0, zi=zi)[0]
    return out


@dataclass
class LeaderFollower:
    """A leader/follower draw: ``values [T, C]`` and its ground truth."""
    values: np.ndarray        # [T, C]
    lags: np.ndarray          # [C] delay of each channel behind the drivers (0 = leader)
    loadings: np.ndarray      # [C, K] the mixing matrix A
    drivers: np.ndarray       # [T + max_lag, K] latent drivers (index t + max_lag is time t)

    @property
    def leaders(self) -> np.ndarray:
        return self.lags == 0


def leader_follower(n_channels: int, length: int, *, n_drivers: int = 4,
                    periods=(24, 60, 168), ar_phi: float = 0.9, noise_sigma: float = 0.3,
                    noise_phi: float = 0.5, drift_sigma: float = 0.01, leader_share: float = 0.5,
                    lag_range=(4, 12), rng: np.random.Generator) -> LeaderFollower:
    """Draw a leader/follower series (see the module docstring). Half the channels (``leader_share``)
    lead, in random positions; loadings are Gaussian, scaled so each channel's signal has unit
    variance on average."""
    C = _check_int("n_channels", n_channels)
    T = _check_int("length", length, 2)
    K = _check_int("n_drivers", n_drivers)
    lo, hi = (int(v) for v in lag_range)
    if not 1 <= lo <= hi:
        raise ValueError(f"lag_range must be (lo, hi) with 1 <= lo <= hi, got {lag_range}")
    if not 0 <= leader_share <= 1:
        raise ValueError(f"leader_share must be in [0, 1], got {leader_share}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator (use reprobook.rng(seed, stream))")
    Tz = T + hi
    t = np.arange(Tz)[:, None]
    drivers = _ar1(rng, (Tz, K), ar_phi)
    for p in periods:
        amp = rng.uniform(0.5, 1.0, K)
        phase = rng.uniform(0, 2 * np.pi, K)
        drivers = drivers + amp * np.sin(2 * np.pi * t / p + phase)
    drivers = (drivers - drivers.mean(0)) / drivers.std(0)
    A = rng.standard_normal((C, K)) / np.sqrt(K)
    n_lead = int(round(leader_share * C))
    lags = rng.integers(lo, hi + 1, C)
    lags[rng.permutation(C)[:n_lead]] = 0
    idx = hi + np.arange(T)[:, None] - lags[None, :]            # [T, C] time index into drivers
    signal = np.einsum("tck,ck->tc", drivers[idx], A)
    noise = noise_sigma * _ar1(rng, (T, C), noise_phi)
    drift = np.cumsum(drift_sigma * rng.standard_normal((T, C)), axis=0)
    return LeaderFollower(signal + noise + drift, lags, A, drivers)


def corrupt_channels(values: np.ndarray, share: float, *, rng: np.random.Generator):
    """Replace ``round(share * C)`` randomly chosen channels of ``values [T, C]`` by Gaussian white
    noise with each channel's own mean and standard deviation. Returns ``(corrupted, mask)`` with
    ``mask[c]`` True for a replaced channel."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2:
        raise ValueError(f"values must be [T, C], got shape {v.shape}")
    if not 0 <= share <= 1:
        raise ValueError(f"share must be in [0, 1], got {share}")
    C = v.shape[1]
    mask = np.zeros(C, dtype=bool)
    mask[rng.permutation(C)[:int(round(share * C))]] = True
    out = v.copy()
    mu, sd = v[:, mask].mean(0), v[:, mask].std(0)
    out[:, mask] = mu + sd * rng.standard_normal((v.shape[0], int(mask.sum())))
    return out, mask


def multi_period(n_channels: int, length: int, *, long_period: float | None, season: int = 24,
                 long_amp: float = 1.0, walk_sigma: float = 0.3, noise_sigma: float = 0.3,
                 rng: np.random.Generator) -> np.ndarray:
    """``x_c(t) = sin(2 pi t / season + a_c) + long_amp sin(2 pi t / long_period + b_c)
    + walk_sigma W_c(t) / sqrt(T) + noise_sigma e_c(t)``, ``[T, C]``, with ``W_c`` a Gaussian random
    walk and ``e_c`` white noise.

    ``long_period=None`` leaves the long sine out. Dividing the walk by ``sqrt(T)`` keeps its spread
    about ``walk_sigma`` whatever the length."""
    C = _check_int("n_channels", n_channels)
    T = _check_int("length", length, 2)
    if long_period is not None and long_period <= 0:
        raise ValueError(f"long_period must be positive or None, got {long_period}")
    t = np.arange(T)[:, None]
    x = np.sin(2 * np.pi * t / season + rng.uniform(0, 2 * np.pi, C))
    if long_period is not None:
        x = x + long_amp * np.sin(2 * np.pi * t / long_period + rng.uniform(0, 2 * np.pi, C))
    x = x + walk_sigma * np.cumsum(rng.standard_normal((T, C)), 0) / np.sqrt(T)
    return x + noise_sigma * rng.standard_normal((T, C))
