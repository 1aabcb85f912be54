r"""A continuous 2-D point-mass navigation task with an obstacle, batched and as a gymnasium env.

The state is the position :math:`x\in\mathbb{R}^2`, the action :math:`a\in[-1,1]^2` a velocity
command, and the dynamics are a clipped Euler step

.. math:: x_{t+1} = \mathrm{clip}(x_t + \Delta\, a_t,\ \text{lo},\ \text{hi}),

with the reward for the step :math:`r_t = -\lVert x_{t+1} - g\rVert - c\,\mathbf 1[\lVert x_{t+1}
- o\rVert < \rho]`: the distance to the goal :math:`g`, and a penalty :math:`c` per step spent in
the obstacle disc (centre :math:`o`, radius :math:`\rho`) that lies on the straight line from the
start to the goal. Episodes last ``horizon`` steps and end only by that time limit (a truncation,
never a terminal state, as in D4RL's locomotion sets). Starts are uniform in a small square around
``start``.

Two routes go round the obstacle, above and below; :func:`waypoint_policy` follows either, at a
chosen speed and action noise, which is how :mod:`reprobook.rl.offline_data` makes behaviour
policies of different quality that take *conflicting* actions at the start.

:class:`PointMass` holds the task and steps any batch of positions at once (arrays of shape
``(..., 2)``); :class:`PointMassEnv` wraps it in the ``gymnasium.Env`` API with deterministic
seeding for code that expects one environment.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["PointMass", "PointMassEnv", "waypoint_policy", "uniform_policy", "rollout"]


def _pair(name, v):
    v = np.asarray(v, dtype=np.float64)
    if v.shape != (2,) or not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be a finite 2-vector, got {v!r}")
    return v


@dataclass(frozen=True)
class PointMass:
    """The task's constants. All lengths are in the same units as the positions."""
    start: tuple = (0.0, 0.0)
    goal: tuple = (2.0, 0.0)
    obstacle: tuple = (1.0, 0.0)
    obstacle_radius: float = 0.4
    obstacle_penalty: float = 5.0
    dt: float = 0.1
    horizon: int = 40
    start_noise: float = 0.1
    lo: tuple = (-1.0, -2.0)
    hi: tuple = (3.0, 2.0)

    def __post_init__(self):
        for k in ("start", "goal", "obstacle", "lo", "hi"):
            _pair(k, getattr(self, k))
        if not np.all(np.asarray(self.lo) < np.asarray(self.hi)):
            raise ValueError(f"lo {self.lo} must be below hi {self.hi} in both coordinates")
        for k in ("obstacle_radius", "obstacle_penalty", "dt", "start_noise"):
            v = getattr(self, k)
            if not (np.isfinite(v) and v >= 0):
                raise ValueError(f"{k} must be a finite number >= 0, got {v!r}")
        if isinstance(self.horizon, bool) or not isinstance(self.horizon, (int, np.integer)) \
                or self.horizon < 1:
            raise ValueError(f"horizon must be a positive int, got {self.horizon!r}")

    obs_dim = 2
    act_dim = 2

    def reset_batch(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` start positions, shape (n, 2)."""
        return np.asarray(self.start) + self.start_noise * rng.uniform(-1.0, 1.0, size=(n, 2))

    def step_batch(self, pos, act) -> tuple[np.ndarray, np.ndarray]:
        """Next positions and rewards for positions ``pos`` (..., 2) and actions ``act`` (..., 2).
        Actions outside [-1, 1] are clipped (the action box is part of the task)."""
        pos = np.asarray(pos, dtype=np.float64)
        act = np.asarray(act, dtype=np.float64)
        if pos.shape[-1:] != (2,) or act.shape != pos.shape:
            raise ValueError(f"pos and act must both have shape (..., 2); got {pos.shape} and "
                             f"{act.shape}")
        if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(act))):
            raise ValueError("pos and act must be finite")
        nxt = np.clip(pos + self.dt * np.clip(act, -1.0, 1.0), self.lo, self.hi)
        return nxt, self.reward(nxt)

    def reward(self, pos) -> np.ndarray:
        """Reward for arriving at ``pos`` (..., 2): minus the goal distance minus the penalty."""
        pos = np.asarray(pos, dtype=np.float64)
        dist = np.linalg.norm(pos - np.asarray(self.goal), axis=-1)
        inside = np.linalg.norm(pos - np.asarray(self.obstacle), axis=-1) < self.obstacle_radius
        return -dist - self.obstacle_penalty * inside

    def in_obstacle(self, pos) -> np.ndarray:
        pos = np.asarray(pos, dtype=np.float64)
        return np.linalg.norm(pos - np.asarray(self.obstacle), axis=-1) < self.obstacle_radius


Policy = Callable[[np.ndarray, np.random.Generator], np.ndarray]


def waypoint_policy(task: PointMass, waypoint, speed: float = 1.0, sigma: float = 0.1) -> Policy:
    """Head for ``waypoint`` until level with it (its first coordinate), then for the goal, at
    ``speed`` (a fraction of the largest step), slowing down within one step of the target; plus
    Gaussian action noise ``sigma``, clipped to the action box. Markov in the position."""
    wp = _pair("waypoint", waypoint)
    goal = np.asarray(task.goal)
    if not (0 < speed <= 1.0 and sigma >= 0):
        raise ValueError(f"speed must be in (0, 1] and sigma >= 0, got {speed!r}, {sigma!r}")

    def policy(pos, rng):
        pos = np.asarray(pos, dtype=np.float64)
        target = np.where((pos[..., :1] < wp[0] - 0.05), wp, goal)
        d = target - pos
        n = np.linalg.norm(d, axis=-1, keepdims=True)
        # unit direction times speed, but never overshoot: a step of dt*|a| covers at most n
        mag = np.minimum(speed, n / task.dt)
        a = d / np.maximum(n, 1e-9) * mag
        return np.clip(a + sigma * rng.standard_normal(a.shape), -1.0, 1.0)

    return policy


def uniform_policy() -> Policy:
    """Actions uniform on the action box: D4RL's "random" behaviour."""
    def policy(pos, rng):
        return rng.uniform(-1.0, 1.0, size=np.shape(pos))
    return policy


def rollout(task: PointMass, policy, rng: np.random.Generator, n: int, batch_shape=()):
    """Run ``n`` episodes (times ``batch_shape``, e.g. one batch per ensemble member) of
    ``policy(pos, rng)`` from fresh starts. Returns a dict with ``obs``, ``actions``, ``rewards``,
    ``next_obs`` of shape (*batch_shape, n, horizon, ...) and ``returns`` (*batch_shape, n).

    The same ``rng`` draws the starts (all of them first, so the starts do not depend on the
    policy) and then the policy's noise."""
    shape = tuple(batch_shape) + (n,)
    pos = task.reset_batch(rng, int(np.prod(shape))).reshape(shape + (2,))
    H = task.horizon
    obs = np.empty(shape + (H, 2))
    acts = np.empty(shape + (H, 2))
    rews = np.empty(shape + (H,))
    nxt = np.empty(shape + (H, 2))
    for t in range(H):
        a = np.asarray(policy(pos, rng), dtype=np.float64)
        if a.shape != pos.shape:
            raise ValueError(f"policy returned actions of shape {a.shape}, expected {pos.shape}")
        a = np.clip(a, -1.0, 1.0)
        p2, r = task.step_batch(pos, a)
        obs[..., t, :], acts[..., t, :], rews[..., t], nxt[..., t, :] = pos, a, r, p2
        pos = p2
    return dict(obs=obs, actions=acts, rewards=rews, next_obs=nxt, returns=rews.sum(-1))


try:  # the gymnasium API, for code that expects one environment
    import gymnasium as gym
    from gymnasium import spaces
except ImportError:  # pragma: no cover - gymnasium is a dependency of the book
    gym = None


if gym is not None:
    class PointMassEnv(gym.Env):
        """One :class:`PointMass` episode behind ``reset(seed=...)`` / ``step(action)``.

        ``step`` returns ``terminated=False`` always and ``truncated=True`` at the horizon."""
        metadata = {"render_modes": []}

        def __init__(self, task: PointMass | None = None):
            super().__init__()
            self.task = task or PointMass()
            self.observation_space = spaces.Box(np.asarray(self.task.lo, np.float32),
                                                np.asarray(self.task.hi, np.float32),
                                                dtype=np.float32)
            self.action_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
            self._pos = None
            self._t = 0

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self._pos = self.task.reset_batch(self.np_random, 1)[0]
            self._t = 0
            return self._pos.astype(np.float32), {}

        def step(self, action):
            if self._pos is None:
                raise RuntimeError("call reset() before step()")
            a = np.asarray(action, dtype=np.float64)
            if a.shape != (2,):
                raise ValueError(f"action must have shape (2,), got {a.shape}")
            self._pos, r = self.task.step_batch(self._pos, a)
            self._t += 1
            truncated = self._t >= self.task.horizon
            return self._pos.astype(np.float32), float(r), False, truncated, {}
