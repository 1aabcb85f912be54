r"""Clipped SGD for streaming mean estimation, many independent streams at once.

**The problem.** Estimate :math:`\mu^\star = \mathbb E X` from a stream :math:`X_1, X_2, \dots`
holding :math:`O(d)` numbers. Written as stochastic optimisation,
:math:`F(x) = \tfrac12\mathbb E\lVert x - X\rVert^2` is 1-smooth and 1-strongly convex with
minimiser :math:`\mu^\star`, and :math:`g_t = x_{t-1} - X_t` is an unbiased stochastic gradient.

**The estimators.** With steps :math:`\eta_t = 1/t` and the clip
:math:`\operatorname{clip}_\Gamma(g) = g\,\min(1, \Gamma/\lVert g\rVert)`,

.. math::

   x_t = x_{t-1} - \eta_t\,\operatorname{clip}_\Gamma(x_{t-1} - X_t).

With :math:`\Gamma = \infty` this is SGD, and SGD with :math:`\eta_t = 1/t` *is* the running mean:
:math:`x_t = (1 - 1/t)x_{t-1} + X_t/t = \frac1t\sum_{s\le t} X_s` (by induction; :math:`\eta_1 = 1`
forgets :math:`x_0`). A finite :math:`\Gamma` caps each step at :math:`\Gamma/t`, so no single
sample can move the estimate far: a streaming, truncated mean.

**The clip level** is the theory-guided constant
:math:`\Gamma = c_\Gamma\sqrt{\operatorname{Tr}\Sigma\,T/\ln(\ln T/\delta)}` (:func:`clip_level`):
a step of at most :math:`\Gamma/T` at the end, against a statistical error of
:math:`\sqrt{\operatorname{Tr}\Sigma/T}`. It is our reconstruction from the rate in the paper's
abstract, not the paper's schedule (which we could not read).

**The radial reduction** (:func:`radial_error_chain`, our derivation). For isotropic noise
:math:`\xi = R\,U` (any radius law, :math:`U` uniform on the sphere, independent) the *norm* of the
error :math:`e_t = x_t - \mu^\star` is a Markov chain of its own. With :math:`r = \lVert e_{t-1}\rVert`,
the fresh :math:`(R, U)` and :math:`u = \langle U, e_{t-1}\rangle / r`, which is one coordinate of a
uniform point on :math:`S^{d-1}` whatever :math:`e_{t-1}` is,

.. math::

   \lVert g_t\rVert^2 = r^2 - 2 r R u + R^2, \qquad a_t = \eta_t\min(1, \Gamma/\lVert g_t\rVert),
   \qquad \lVert e_t\rVert^2 = (1 - a_t)^2 r^2 + 2 a_t (1 - a_t)\,r R u + a_t^2 R^2,

because :math:`e_t = (1 - a_t) e_{t-1} + a_t \xi_t`. So two scalars per step simulate the exact law
of :math:`\lVert e_T\rVert` in any dimension, where the direct simulation costs :math:`d` numbers
per step and stream. It is checked against the direct simulation in the tests and the chapter.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..stats.heavy_tails import NoiseModel, sample_pareto_radius, sample_sphere_coordinate

__all__ = ["clip_by_norm", "clip_level", "StreamErrors", "streaming_mean_errors",
           "radial_error_chain", "running_mean"]


def clip_by_norm(g, level):
    r""":math:`g\,\min(1, \Gamma/\lVert g\rVert)` along the last axis (torch or NumPy).

    ``level`` is a number or a tensor/array that broadcasts against ``g[..., :1]``; ``inf`` leaves
    ``g`` unchanged, bit for bit (the factor is exactly 1). A zero vector stays zero.
    """
    if isinstance(g, np.ndarray):
        norm = np.linalg.norm(g, axis=-1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.minimum(1.0, np.asarray(level, dtype=g.dtype) / norm)
        return g * np.where(np.isnan(factor), 1.0, factor)
    import torch

    norm = torch.linalg.vector_norm(g, dim=-1, keepdim=True)
    level = torch.as_tensor(level, dtype=g.dtype, device=g.device)
    factor = torch.clamp(level / norm, max=1.0)          # level/0 = inf -> 1; inf/inf = nan
    return g * torch.nan_to_num(factor, nan=1.0)


def clip_level(trace: float, horizon: int, delta: float, c: float = 1.0,
               op_norm: float | None = None) -> float:
    r""":math:`\Gamma = c\sqrt{\operatorname{Tr}\Sigma\cdot T/\ln(\ln T/\delta)}` (see the module).

    With ``op_norm`` (:math:`\lVert\Sigma\rVert_2`) the trace is replaced by the geometric mean
    :math:`\sqrt{\operatorname{Tr}\Sigma\,\lVert\Sigma\rVert_2}`, the scale of the fluctuation term
    of the paper's rate: :math:`\Gamma^2 = c^2 T\sqrt{\operatorname{Tr}\Sigma\lVert\Sigma\rVert_2}/
    \ln(\ln T/\delta)`, which grows like :math:`\sqrt d` rather than :math:`d` for isotropic noise
    (our variant; see the chapter).
    """
    if not trace > 0:
        raise ValueError(f"trace must be positive, got {trace!r}")
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 3:
        raise ValueError(f"horizon T must be an int >= 3 (ln ln T must be defined), got {horizon!r}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if not c > 0:
        raise ValueError(f"c must be positive (use inf for no clipping), got {c!r}")
    if op_norm is not None:
        if not 0 < op_norm <= trace:
            raise ValueError(f"op_norm must be in (0, trace], got {op_norm!r}")
        trace = math.sqrt(trace * op_norm)
    return c * math.sqrt(trace * horizon / math.log(math.log(horizon) / delta))


def _levels(clip_levels: Mapping[str, float]) -> tuple[list[str], np.ndarray]:
    if not isinstance(clip_levels, Mapping) or not clip_levels:
        raise ValueError("clip_levels must map each estimator's name to its clip level "
                         "(inf for plain SGD)")
    names = list(clip_levels)
    levels = np.array([float(clip_levels[k]) for k in names])
    if np.any(np.isnan(levels)) or np.any(levels <= 0):
        raise ValueError(f"clip levels must be positive (inf for no clipping), got {clip_levels}")
    return names, levels


def _checkpoints(horizon: int, checkpoints: Sequence[int] | None) -> list[int]:
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise ValueError(f"horizon must be a positive int, got {horizon!r}")
    cps = [int(horizon)] if checkpoints is None else sorted({int(c) for c in checkpoints})
    if not cps or cps[0] < 1 or cps[-1] > horizon:
        raise ValueError(f"checkpoints must lie in [1, {horizon}], got {checkpoints!r}")
    return cps


@dataclass(frozen=True)
class StreamErrors:
    """``errors[name][i, s]``: the error norm of estimator ``name`` at ``checkpoints[i]``, stream s."""

    checkpoints: tuple[int, ...]
    errors: dict

    def final(self, name: str) -> np.ndarray:
        """Error norms at the last checkpoint, one per stream."""
        return self.errors[name][-1]


def streaming_mean_errors(noise: NoiseModel, horizon: int, clip_levels: Mapping[str, float],
                          n_streams: int, generator, *, mean_norm: float | None = None,
                          checkpoints: Sequence[int] | None = None, dtype=None) -> StreamErrors:
    r"""Run every estimator of ``clip_levels`` on the same ``n_streams`` streams of length
    ``horizon`` (common random numbers) and return the norms :math:`\lVert x_t - \mu^\star\rVert`.

    The streams are :math:`X_t = \mu^\star + \xi_t` with :math:`\xi_t` from ``noise``; each stream
    has its own :math:`\mu^\star`, uniform in direction with norm ``mean_norm`` (default
    :math:`2\sqrt{\operatorname{Tr}\Sigma}`), and starts at :math:`x_0 = 0`. Only the errors
    :math:`e = x - \mu^\star` are stored: :math:`g = x - X = e - \xi`, and the update is the same.
    Everything is a torch tensor on ``generator``'s device, ``(estimators, streams, d)``.
    """
    import torch

    names, levels = _levels(clip_levels)
    cps = _checkpoints(horizon, checkpoints)
    if isinstance(n_streams, bool) or not isinstance(n_streams, (int, np.integer)) or n_streams < 1:
        raise ValueError(f"n_streams must be a positive int, got {n_streams!r}")
    if not isinstance(generator, torch.Generator):
        raise TypeError("generator must be a torch.Generator (seeded from the ledger's seed)")
    dtype = torch.float64 if dtype is None else dtype
    device = generator.device
    mean_norm = 2.0 * math.sqrt(noise.trace) if mean_norm is None else float(mean_norm)
    direction = torch.randn(n_streams, noise.dim, generator=generator, dtype=dtype, device=device)
    direction = direction / torch.linalg.vector_norm(direction, dim=1, keepdim=True)
    e = (-mean_norm * direction).expand(len(names), -1, -1).clone()      # x_0 = 0
    gamma = torch.as_tensor(levels, dtype=dtype, device=device).view(-1, 1, 1)
    out = {k: np.empty((len(cps), n_streams)) for k in names}
    i = 0
    for t in range(1, horizon + 1):
        g = e - noise.sample(n_streams, generator, dtype=dtype)           # x_{t-1} - X_t
        e -= clip_by_norm(g, gamma) / t
        if t == cps[i]:
            norms = torch.linalg.vector_norm(e, dim=2).cpu().numpy()
            for k, name in enumerate(names):
                out[name][i] = norms[k]
            i += 1
            if i == len(cps):
                break
    return StreamErrors(tuple(cps), out)


def radial_error_chain(noise: NoiseModel, horizon: int, clip_levels: Mapping[str, float],
                       n_streams: int, rng: np.random.Generator, *, initial_error: float | None = None,
                       checkpoints: Sequence[int] | None = None) -> StreamErrors:
    r"""The exact law of :math:`\lVert x_t - \mu^\star\rVert` under isotropic noise, by the radial
    reduction of the module docstring: two scalars per step and stream, whatever the dimension.

    ``noise`` must be isotropic (``scales=None``): radial Pareto, or Gaussian, whose radius is
    :math:`\chi_d`. ``initial_error`` is :math:`\lVert x_0 - \mu^\star\rVert` (default
    :math:`2\sqrt d`, as in :func:`streaming_mean_errors`). All estimators share the draws (common
    random numbers).
    """
    if not isinstance(noise, NoiseModel):
        raise TypeError("noise must be a reprobook.stats.heavy_tails.NoiseModel")
    if noise.scales is not None:
        raise ValueError("the radial reduction needs isotropic noise (scales=None): with an "
                         "anisotropic covariance the error's norm is not a Markov chain")
    dim = noise.dim
    names, levels = _levels(clip_levels)
    cps = _checkpoints(horizon, checkpoints)
    if isinstance(n_streams, bool) or not isinstance(n_streams, (int, np.integer)) or n_streams < 1:
        raise ValueError(f"n_streams must be a positive int, got {n_streams!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator (reprobook.rng(seed, ...))")
    r = np.full((len(names), n_streams), 2.0 * math.sqrt(dim) if initial_error is None
                else float(initial_error))
    gamma = levels[:, None]
    out = {k: np.empty((len(cps), n_streams)) for k in names}
    i = 0
    for t in range(1, horizon + 1):
        if noise.kind == "gaussian":
            big_r = np.sqrt(rng.chisquare(dim, size=n_streams))[None, :]
        else:
            big_r = sample_pareto_radius(n_streams, noise.alpha, noise.radial_scale, rng)[None, :]
        u = sample_sphere_coordinate(n_streams, dim, rng)[None, :]
        cross = r * big_r * u                                          # <e_{t-1}, xi_t>
        g_norm = np.sqrt(np.maximum(r * r - 2.0 * cross + big_r * big_r, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            a = np.minimum(1.0, gamma / g_norm) / t
        a = np.where(np.isnan(a), 1.0 / t, a)
        r = np.sqrt(np.maximum((1 - a) ** 2 * r * r + 2 * a * (1 - a) * cross + a * a * big_r * big_r,
                               0.0))
        if t == cps[i]:
            for k, name in enumerate(names):
                out[name][i] = r[k]
            i += 1
            if i == len(cps):
                break
    return StreamErrors(tuple(cps), out)


def running_mean(samples):
    """The running means of ``samples[..., t, :]`` over ``t`` (cumulative sum / count), NumPy."""
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim < 2:
        raise ValueError(f"samples must be (..., T, d), got shape {x.shape}")
    return np.cumsum(x, axis=-2) / np.arange(1, x.shape[-2] + 1)[:, None]
