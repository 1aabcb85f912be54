r"""The accuracy simulation of Ai (NeurIPS 2024) for monotone-dependence coefficients.

Protocol (following the author's ``recor`` R code, ``accuracy_analysis`` / ``gen_noise``):

* draw :math:`x_1..x_n \sim U(0, 1)` afresh for every case;
* a noiseless signal :math:`\hat y = f(x)` for a scenario :math:`f` (50 monotone functions, or the
  power family :math:`x^k`);
* add Gaussian noise at a signal-to-noise ratio :math:`\mathrm{SNR} = 10^{\mathrm{dB}/10}`:
  :math:`y = \hat y + k\,(e - \bar e)`, :math:`e \sim N(0, I_n)`, :math:`k^2 = \widehat{\mathrm{var}}(\hat y) / \mathrm{SNR}`;
* the *conventional true value* of the dependence is the correlation between a signal and its
  noisy observation, :math:`R = \sqrt{\mathrm{SNR} / (1 + \mathrm{SNR})}`;
* a coefficient's error on a case is :math:`\bigl|\,|c(x, y)| - R\,\bigr|` and its accuracy is
  the mean absolute error (MAE) over scenarios, noise levels and repetitions. Absolute values are
  taken because a decreasing relation is as strong a dependence as an increasing one.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy import special

__all__ = ["MONOTONE_SCENARIOS", "power_scenarios", "db_to_snr", "snr_to_r", "add_noise",
           "simulate", "mae"]


def _einstein1(x):
    # x^2 e^x / (e^x - 1)^2, written with expm1 for accuracy near 0
    return x**2 * np.exp(x) / np.expm1(x) ** 2


def _eta(x):
    # Dirichlet eta: (1 - 2^{1-s}) zeta(s); scipy's zeta continues analytically below 1
    return (1.0 - 2.0 ** (1.0 - x)) * special.zeta(x)


def _piecewise(x):
    return np.where(x < 0.49, 0.0, np.where(x <= 0.51, 50 * (x - 0.5) + 0.5, 1.0))


#: The paper's 50 monotone accuracy scenarios on x in (0, 1) (the author's table, rows 1-50).
#: ``Linear`` is the one linear relation; the other 49 are nonlinear.
MONOTONE_SCENARIOS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Linear": lambda x: 2 * x + 1,
    "Quadratic": lambda x: x**2,
    "Square root": np.sqrt,
    "Cubic": lambda x: x**3,
    "Reciprocal": lambda x: 1 / x,
    "Exponential": np.exp,
    "Logarithm": np.log,
    "Sine": lambda x: np.sin(np.pi / 2 * x),
    "Cosine": lambda x: np.cos(np.pi / 2 * x),
    "Tangent": lambda x: np.tan(np.pi / 2 * x),
    "Cotangent": lambda x: 1 / np.tan(np.pi / 2 * x),
    "Arcsine": np.arcsin,
    "Arccosine": np.arccos,
    "Arctangent": np.arctan,
    "Arccotangent": lambda x: np.arctan(1 / x),
    "Secant": lambda x: 1 / np.cos(np.pi / 2 * x),
    "Cosecant": lambda x: 1 / np.sin(np.pi / 2 * x),
    "Hyperbolic sine": np.sinh,
    "Hyperbolic cosine": np.cosh,
    "Hyperbolic tangent": np.tanh,
    "Hyperbolic cotangent": lambda x: 1 / np.tanh(x),
    "Hyperbolic secant": lambda x: 1 / np.cosh(100 * x),
    "Hyperbolic cosecant": lambda x: 1 / np.sinh(100 * x),
    "Inverse hyp. sine": np.arcsinh,
    "Inverse hyp. cosine": lambda x: np.arccosh(1 + x),
    "Inverse hyp. tangent": np.arctanh,
    "Inverse hyp. cotangent": lambda x: np.arctanh(1 / (1 + x)),
    "Inverse hyp. secant": lambda x: np.arccosh(1 / x),
    "Inverse hyp. cosecant": lambda x: np.arcsinh(1 / x),
    "Hook": lambda x: x + 1 / x,
    "Rational": lambda x: (x + 1) / (x - 1),
    "Hoerl": lambda x: np.exp(x) / x,
    "Sigmoid": lambda x: 1 / (1 + np.exp(-(x - 0.5))),
    "Logit": lambda x: np.log(x / (1 - x)),
    "Step": lambda x: (x > 0.5).astype(np.float64),
    "Piecewise": _piecewise,
    "Linear + periodic": lambda x: 0.1 * np.sin(10.6 * (2 * x - 1)) + 1.1 * (2 * x - 1),
    "Sinc": lambda x: np.sin(np.pi * x) / (np.pi * x),
    "Einstein": _einstein1,
    "Exponential integral": special.exp1,
    "Hyp. sine integral": lambda x: special.shichi(x)[0],
    "Hyp. cosine integral": lambda x: special.shichi(x)[1],
    "Error function": special.erf,
    "Inverse error function": special.erfinv,
    "Gamma": special.gamma,
    "Digamma": special.digamma,
    "Riemann zeta": lambda x: special.zeta(x + 1),
    "Bessel Y0": special.y0,
    "Beta": lambda x: special.beta(1.0, x),
    "Dirichlet eta": _eta,
}


def power_scenarios(ks: Sequence[float]) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """The paper's second family, :math:`y = x^k` (it uses k = 1, 1.1, ..., 10)."""
    return {f"x^{k:g}": (lambda x, k=float(k): x**k) for k in ks}


def db_to_snr(db) -> np.ndarray:
    """Signal-to-noise ratio from decibels: :math:`10^{\\mathrm{dB}/10}`."""
    return 10.0 ** (np.asarray(db, dtype=np.float64) / 10.0)


def snr_to_r(snr) -> np.ndarray:
    """The conventional true value :math:`R = \\sqrt{\\mathrm{SNR}/(1+\\mathrm{SNR})}`."""
    snr = np.asarray(snr, dtype=np.float64)
    if np.any(snr < 0):
        raise ValueError("snr must be non-negative")
    return np.sqrt(snr / (1.0 + snr))


def add_noise(signal: np.ndarray, snr, rng: np.random.Generator) -> np.ndarray:
    """``signal`` plus centred Gaussian noise scaled to the given SNR (per row, last axis).

    ``snr`` broadcasts against ``signal.shape[:-1]``. The noise is centred on each row and scaled
    by the row's sample variance of the signal (``ddof=1``), as the author's ``gen_noise`` does.
    """
    signal = np.asarray(signal, dtype=np.float64)
    snr = np.asarray(snr, dtype=np.float64)
    if np.any(snr <= 0):
        raise ValueError("snr must be positive")
    e = rng.standard_normal(signal.shape)
    e -= e.mean(axis=-1, keepdims=True)
    k = np.sqrt(signal.var(axis=-1, ddof=1) / snr)
    return signal + k[..., None] * e


def simulate(scenarios: Mapping[str, Callable], dbs: Sequence[float], n: int,
             coefficients: Mapping[str, Callable], rng: np.random.Generator) -> dict:
    """One repetition of the accuracy simulation.

    Returns ``{"values": {name: array[scenario, db]}, "R": array[db], "scenarios": [...],
    "dbs": array}``: every coefficient evaluated on the *same* noisy samples.
    """
    if not isinstance(n, (int, np.integer)) or n < 3:
        raise ValueError(f"n must be an int >= 3, got {n!r}")
    if not scenarios:
        raise ValueError("scenarios must name at least one function")
    dbs = np.asarray(dbs, dtype=np.float64)
    if dbs.ndim != 1 or dbs.size == 0:
        raise ValueError("dbs must be a non-empty 1-D list of noise levels in dB")
    names = list(scenarios)
    x = rng.random((len(names), dbs.size, n))
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        yhat = np.stack([np.asarray(scenarios[s](x[i]), dtype=np.float64)
                         for i, s in enumerate(names)])
    if not np.all(np.isfinite(yhat)):
        bad = [s for i, s in enumerate(names) if not np.all(np.isfinite(yhat[i]))]
        raise ValueError(f"scenario(s) {bad} gave non-finite values on (0, 1)")
    y = add_noise(yhat, db_to_snr(dbs)[None, :], rng)
    values = {c: np.asarray(f(x, y), dtype=np.float64) for c, f in coefficients.items()}
    return {"values": values, "R": snr_to_r(db_to_snr(dbs)), "scenarios": names, "dbs": dbs}


def mae(values: np.ndarray, R: np.ndarray, axis=None):
    """Mean absolute error :math:`\\mathrm{mean}\\,\\bigl||c| - R\\bigr|` (``R`` broadcasts on the
    last axis: the noise levels)."""
    return np.mean(np.abs(np.abs(values) - R), axis=axis)
