r"""Trajectories of two physical systems with known equations: Hindmarsh–Rose and Gray–Scott.

**Hindmarsh–Rose neuron** (three coupled ODEs for membrane potential ``x``, fast recovery ``y``
and slow adaptation ``z``):

.. math::
    \dot x = y - a x^3 + b x^2 - z + I,\qquad \dot y = c - d x^2 - y,\qquad
    \dot z = r\,(s\,(x - x_R) - z).

The defaults are the classic bursting regime (``a=1, b=3, c=1, d=5, r=0.006, s=4, x_R=-1.6,
I=3.25``): fast spikes grouped in bursts by the slow ``z``. (The ControlSynth Neural ODE code
generates its data set with ``r=0.5, x_R=-1.5, I=3``, where the neuron relaxes to a resting state
within a few time units; pass those as keyword arguments to get it.)

**Gray–Scott reaction–diffusion** on an ``N x N`` periodic grid with unit spacing (the five-point
Laplacian ``Δ``):

.. math::
    \dot U = D_u \Delta U - U V^2 + F (1 - U),\qquad \dot V = D_v \Delta V + U V^2 - (F + k) V.

Both are integrated with classical fourth-order Runge–Kutta on a fine inner step and sampled every
``dt`` (``substeps`` inner steps per sample), in float64 NumPy: the data is ground truth up to an
O(h^4) error that the tests bound.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HR_DEFAULTS = dict(a=1.0, b=3.0, c=1.0, d=5.0, r=0.006, s=4.0, x_rest=-1.6, current=3.25)


@dataclass
class Trajectory:
    """A sampled trajectory: ``states`` of shape ``(n_steps + 1, dim)`` at times ``times``."""
    states: np.ndarray
    times: np.ndarray
    dt: float
    grid: int | None = None        # Gray–Scott: the grid side N (states hold U then V, row-major)


def hindmarsh_rose_field(state: np.ndarray, a: float = 1.0, b: float = 3.0, c: float = 1.0,
                         d: float = 5.0, r: float = 0.006, s: float = 4.0, x_rest: float = -1.6,
                         current: float = 3.25) -> np.ndarray:
    """The Hindmarsh–Rose vector field at ``state`` of shape ``(..., 3)``."""
    state = np.asarray(state, dtype=np.float64)
    if state.shape[-1] != 3:
        raise ValueError(f"Hindmarsh–Rose states have 3 components, got shape {state.shape}")
    x, y, z = state[..., 0], state[..., 1], state[..., 2]
    return np.stack([y - a * x ** 3 + b * x ** 2 - z + current,
                     c - d * x ** 2 - y,
                     r * (s * (x - x_rest) - z)], axis=-1)


def laplacian_periodic(field: np.ndarray) -> np.ndarray:
    """Five-point Laplacian of ``(..., N, N)`` fields on a periodic grid with unit spacing."""
    return (np.roll(field, 1, -1) + np.roll(field, -1, -1) + np.roll(field, 1, -2)
            + np.roll(field, -1, -2) - 4.0 * field)


def gray_scott_field(uv: np.ndarray, feed: float = 0.04, kill: float = 0.06, d_u: float = 0.16,
                     d_v: float = 0.08) -> np.ndarray:
    """The Gray–Scott vector field for ``uv`` of shape ``(..., 2, N, N)`` (U, then V)."""
    uv = np.asarray(uv, dtype=np.float64)
    if uv.ndim < 3 or uv.shape[-3] != 2 or uv.shape[-1] != uv.shape[-2]:
        raise ValueError(f"Gray–Scott states have shape (..., 2, N, N), got {uv.shape}")
    u, v = uv[..., 0, :, :], uv[..., 1, :, :]
    reaction = u * v * v
    du = d_u * laplacian_periodic(u) - reaction + feed * (1.0 - u)
    dv = d_v * laplacian_periodic(v) + reaction - (feed + kill) * v
    return np.stack([du, dv], axis=-3)


def rk4(field, x0: np.ndarray, dt: float, n_steps: int, substeps: int = 1) -> np.ndarray:
    """Classical RK4 of ``dx/dt = field(x)``: ``n_steps + 1`` samples ``dt`` apart."""
    if n_steps < 1 or substeps < 1 or not dt > 0:
        raise ValueError(f"need n_steps >= 1, substeps >= 1 and dt > 0, got {n_steps}, {substeps}, {dt}")
    h = dt / substeps
    x = np.array(x0, dtype=np.float64)
    out = np.empty((n_steps + 1,) + x.shape)
    out[0] = x
    for i in range(n_steps):
        for _ in range(substeps):
            k1 = field(x)
            k2 = field(x + 0.5 * h * k1)
            k3 = field(x + 0.5 * h * k2)
            k4 = field(x + h * k3)
            x = x + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        if not np.all(np.isfinite(x)):
            raise FloatingPointError(f"the integration blew up at step {i + 1}; lower dt or raise substeps")
        out[i + 1] = x
    return out


def hindmarsh_rose(n_steps: int = 2000, dt: float = 0.05, x0=(-1.6, -10.0, 2.0), substeps: int = 4,
                   rng: np.random.Generator | None = None, init_noise: float = 0.0,
                   **params) -> Trajectory:
    """A Hindmarsh–Rose trajectory from ``x0`` (plus N(0, init_noise²) if ``rng`` is given)."""
    unknown = set(params) - set(HR_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown Hindmarsh–Rose parameters {sorted(unknown)}; known: {sorted(HR_DEFAULTS)}")
    p = {**HR_DEFAULTS, **params}
    start = np.asarray(x0, dtype=np.float64)
    if start.shape != (3,):
        raise ValueError(f"x0 must have 3 components, got shape {start.shape}")
    if rng is not None and init_noise > 0:
        start = start + rng.normal(0.0, init_noise, 3)
    states = rk4(lambda s: hindmarsh_rose_field(s, **p), start, dt, n_steps, substeps)
    return Trajectory(states, dt * np.arange(n_steps + 1), dt)


def gray_scott(grid: int = 16, n_steps: int = 400, dt: float = 1.0, substeps: int = 2,
               rng: np.random.Generator | None = None, feed: float = 0.04, kill: float = 0.06,
               d_u: float = 0.16, d_v: float = 0.08, seed_square: int = 4) -> Trajectory:
    """A Gray–Scott trajectory on a ``grid x grid`` periodic grid, flattened to ``2 grid²`` states.

    The start is the classic one: ``U = 1, V = 0`` everywhere except a ``seed_square`` block in the
    middle with ``U = 0.5, V = 0.25``, plus uniform noise of ±0.05 from ``rng`` (no noise without
    one). Patterns then grow out of the seeded block.
    """
    if grid < 4 or seed_square < 1 or seed_square > grid:
        raise ValueError(f"need grid >= 4 and 1 <= seed_square <= grid, got {grid}, {seed_square}")
    uv = np.zeros((2, grid, grid))
    uv[0] = 1.0
    lo = grid // 2 - seed_square // 2
    uv[0, lo:lo + seed_square, lo:lo + seed_square] = 0.5
    uv[1, lo:lo + seed_square, lo:lo + seed_square] = 0.25
    if rng is not None:
        uv = uv + rng.uniform(-0.05, 0.05, uv.shape)
    states = rk4(lambda s: gray_scott_field(s, feed, kill, d_u, d_v), uv, dt, n_steps, substeps)
    return Trajectory(states.reshape(n_steps + 1, -1), dt * np.arange(n_steps + 1), dt, grid=grid)
