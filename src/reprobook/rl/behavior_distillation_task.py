r"""The point-mass testbed for offline behaviour distillation: expert, action values, data, scores.

Built on :class:`~reprobook.rl.point_mass.PointMass` (go round an obstacle to a goal):

* the **near-expert** :math:`\pi^\star` is the deterministic :func:`~reprobook.rl.point_mass.
  waypoint_policy` over the upper route (it plays the part of the paper's Cal-QL policy);
* its **action values** :math:`q_{\pi^\star}(s,\pi^\star(s))` are computed by rolling
  :math:`\pi^\star` out from :math:`s` (policy and dynamics are deterministic, so one rollout is
  exact) for as many steps as make :math:`\gamma^{H}` smaller than ``tail``, on the *shifted*
  reward :math:`r' = \max(0, 1 + r/R)` with :math:`R` the largest distance from the goal to a
  corner of the box. Outside the obstacle :math:`r'\in[0,1]` is a positive affine map of the
  task's reward (same ranking of policies, same normalised returns); inside it, where the task
  charges a penalty, :math:`r'=0`, the worst. It makes :math:`q\ge 0`, as the paper's weighting
  needs (its D4RL rewards are positive). The weights depend on this shift: adding a constant to
  the reward adds a constant to every :math:`q`, which flattens the weighting toward PBC's;
* the **offline data** mix uniform-random episodes with noisy expert episodes (a
  "medium-replay"-like mixture) through :func:`~reprobook.rl.offline_data.collect`;
* a policy's **normalised return** is D4RL's :math:`(J-J_{\rm rand})/(J_{\pi^\star}-J_{\rm rand})`
  (as a fraction, not a percentage).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .behavior_distillation import policy_forward
from .offline_data import collect
from .point_mass import PointMass, rollout, uniform_policy, waypoint_policy

__all__ = ["EXPERT_WAYPOINT", "expert_policy", "shifted_reward", "expert_q", "make_offline",
           "torch_policy", "mean_returns", "reference_returns", "normalized"]

EXPERT_WAYPOINT = (1.0, 0.7)   # above the obstacle (centre (1, 0), radius 0.4)


def expert_policy(task: PointMass, sigma: float = 0.0):
    """:math:`\\pi^\\star`: full speed over the upper waypoint, Gaussian noise ``sigma``."""
    return waypoint_policy(task, EXPERT_WAYPOINT, speed=1.0, sigma=sigma)


def shifted_reward(task: PointMass, r) -> np.ndarray:
    """:math:`\\max(0, 1 + r/R)\\in[0,1]` (module docstring)."""
    lo, hi = np.asarray(task.lo), np.asarray(task.hi)
    corners = np.array([[lo[0], lo[1]], [lo[0], hi[1]], [hi[0], lo[1]], [hi[0], hi[1]]])
    R = float(np.linalg.norm(corners - np.asarray(task.goal), axis=1).max())
    return np.maximum(0.0, 1.0 + np.asarray(r, dtype=np.float64) / R)


def expert_q(task: PointMass, states, gamma: float, tail: float = 1e-3) -> np.ndarray:
    """:math:`q_{\\pi^\\star}(s,\\pi^\\star(s))` on the shifted reward for states (n, 2), exact up
    to the truncated tail (at most ``tail``/(1-gamma))."""
    if not 0 < gamma < 1 or not 0 < tail < 1:
        raise ValueError(f"gamma and tail must be in (0, 1), got {gamma}, {tail}")
    pos = np.asarray(states, dtype=np.float64)
    if pos.ndim != 2 or pos.shape[1] != 2:
        raise ValueError(f"states must be (n, 2), got {pos.shape}")
    pi = expert_policy(task)
    rng = np.random.default_rng(0)   # unused: the expert is noiseless
    H = int(math.ceil(math.log(tail) / math.log(gamma)))
    q = np.zeros(len(pos))
    for t in range(H):
        pos, r = task.step_batch(pos, pi(pos, rng))
        q += gamma ** t * shifted_reward(task, r)
    return q


def make_offline(task: PointMass, n_random: int, n_expert: int, expert_sigma: float, gamma: float,
                 rngs, dtype=torch.float32) -> dict:
    """One offline data set per generator in ``rngs`` (the ensemble members): ``n_random``
    uniform-random and ``n_expert`` noisy-expert episodes each, with the expert's action and value
    at every state. Tensors ``obs``, ``actions``, ``expert_actions`` (E, N, 2) and ``q`` (E, N, 1)."""
    rngs = list(rngs)
    if not rngs:
        raise ValueError("rngs must hold at least one numpy Generator (one per member)")
    sets = [collect(task, {"random": (uniform_policy(), int(n_random)),
                           "expert-noisy": (expert_policy(task, expert_sigma), int(n_expert))}, r)
            for r in rngs]
    obs = np.stack([d.obs for d in sets])
    flat = obs.reshape(-1, 2)
    exp_a = expert_policy(task)(flat, rngs[0]).reshape(obs.shape)     # noiseless: rng unused
    q = expert_q(task, flat, gamma).reshape(obs.shape[:2] + (1,))     # all members in one pass
    t = lambda x: torch.as_tensor(np.asarray(x), dtype=dtype)
    return dict(obs=t(obs), actions=t(np.stack([d.actions for d in sets])),
                expert_actions=t(exp_a), q=t(q))


def torch_policy(params):
    """A NumPy policy ``pos (M, n, 2) -> actions`` for :func:`rollout` from ensemble parameters
    with M members."""
    def policy(pos, rng):
        with torch.no_grad():
            s = torch.as_tensor(pos, dtype=params[0].dtype)
            return policy_forward(params, s).double().numpy()
    return policy


def mean_returns(task: PointMass, params, n_episodes: int, rng: np.random.Generator) -> np.ndarray:
    """Mean return of each of the M ensemble policies over ``n_episodes`` episodes, shape (M,)."""
    M = params[0].shape[0]
    return rollout(task, torch_policy(params), rng, n_episodes, batch_shape=(M,))["returns"].mean(1)


def reference_returns(task: PointMass, n_episodes: int, rng: np.random.Generator):
    """(J_rand, J_expert): mean returns of the uniform policy and of the noiseless expert."""
    j_rand = rollout(task, uniform_policy(), rng, n_episodes)["returns"].mean()
    j_exp = rollout(task, expert_policy(task), rng, n_episodes)["returns"].mean()
    return float(j_rand), float(j_exp)


def normalized(returns, j_rand: float, j_expert: float) -> np.ndarray:
    """:math:`(J-J_{\\rm rand})/(J_{\\pi^\\star}-J_{\\rm rand})`."""
    if not j_expert > j_rand:
        raise ValueError(f"the expert's return {j_expert} must exceed the random one {j_rand}")
    return (np.asarray(returns, dtype=np.float64) - j_rand) / (j_expert - j_rand)
