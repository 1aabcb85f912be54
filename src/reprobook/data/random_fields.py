r"""Band-limited Gaussian random fields on the periodic interval, exact at every resolution.

A field is a finite Fourier series :math:`u(x)=\sum_{|k|<M}\hat u_ke^{2\pi ikx}` with independent
Gaussian coefficients of variance :math:`\propto(4\pi^2k^2+\tau^2)^{-\alpha}` (the spectrum of a
Matérn-type field :math:`(-\Delta+\tau^2)^{-\alpha/2}\,\xi`, truncated at :math:`M` modes). Because
the field is band-limited it is *the same function* on every grid of :math:`n\ge2M` points:
:func:`sample_on_grid` evaluates its coefficients exactly, so resolutions can be compared without
interpolation error.
"""
from __future__ import annotations

import numpy as np

__all__ = ["grf_coefficients", "sample_on_grid"]


def grf_coefficients(count: int, modes: int, rng: np.random.Generator, *, alpha: float = 2.0,
                     tau: float = 3.0) -> np.ndarray:
    """Coefficients (count, modes) of ``count`` fields: frequencies 0..modes-1 (the negative ones
    are the conjugates), the zero frequency real, normalised to unit mean-square amplitude."""
    for name, v in (("count", count), ("modes", modes)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not (alpha > 0 and tau > 0):
        raise ValueError(f"alpha and tau must be positive, got {alpha!r}, {tau!r}")
    k = np.arange(modes)
    sd = (4 * np.pi ** 2 * k ** 2 + tau ** 2) ** (-alpha / 2)
    c = (rng.normal(size=(count, modes)) + 1j * rng.normal(size=(count, modes))) * sd
    c[:, 0] = c[:, 0].real * np.sqrt(2)
    power = np.abs(c[:, :1]) ** 2 + 2 * np.sum(np.abs(c[:, 1:]) ** 2, axis=1, keepdims=True)
    return c / np.sqrt(power)


def sample_on_grid(coeffs, n: int) -> np.ndarray:
    """The fields with Fourier coefficients ``coeffs`` (…, modes) at the points i/n, i < n."""
    c = np.asarray(coeffs, dtype=np.complex128)
    modes = c.shape[-1]
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2 * modes:
        raise ValueError(f"n must be an int >= 2 * modes = {2 * modes} to hold the field exactly, "
                         f"got {n!r}")
    spec = np.zeros(c.shape[:-1] + (n // 2 + 1,), dtype=np.complex128)
    spec[..., :modes] = c * n
    return np.fft.irfft(spec, n=n, axis=-1)
