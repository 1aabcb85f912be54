r"""Offline-RL data sets of mixed quality, made by behaviour policies as D4RL's were.

D4RL's "medium-expert", "medium-replay" and "random" sets mix transitions of behaviour policies of
different quality; D4RL and Minari download them at run time, so the book generates its own with
known behaviour policies instead:

* :func:`collect` runs named behaviour policies on a :class:`~reprobook.rl.point_mass.PointMass`
  for a number of episodes each and keeps every transition with the name of the policy that made
  it (``source``) and its episode's return;
* :func:`conflict_bandit` is a one-step task (:math:`\gamma=0`) where two behaviour policies are each
  optimal on half of the state space and the worst possible on the other half: at every state the
  data hold two modes of opposite quality. Its optimal action and reward are known in closed form
  (:func:`bandit_reward`, :func:`bandit_optimal_action`);
* :func:`normalized_score` is D4RL's :math:`100\,(R-R_\text{random})/(R_\text{expert}-R_\text{random})`.

:class:`OfflineData` holds one data set as NumPy arrays; :func:`stack` turns several of equal size
(one per seed) into the ``(members, N, ...)`` tensors that :mod:`reprobook.rl.offline_baselines`
trains an ensemble on, one member per data set.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["OfflineData", "collect", "conflict_bandit", "bandit_reward", "bandit_optimal_action",
           "normalized_score", "stack"]


@dataclass
class OfflineData:
    """Transitions ``(obs, actions, rewards, next_obs, terminals)`` with the behaviour policy of
    each (``source``, an index into ``sources``). ``terminals`` is 1 where the episode really ended
    (no bootstrapping), 0 otherwise, including time-limit truncations."""
    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminals: np.ndarray
    source: np.ndarray
    sources: tuple
    episode_returns: dict = field(default_factory=dict)

    def __post_init__(self):
        n = len(self.obs)
        for k in ("actions", "rewards", "next_obs", "terminals", "source"):
            if len(getattr(self, k)) != n:
                raise ValueError(f"{k} has {len(getattr(self, k))} rows, obs has {n}")
        if self.obs.ndim != 2 or self.next_obs.shape != self.obs.shape or self.actions.ndim != 2:
            raise ValueError(f"obs/next_obs must be (N, d_obs) and actions (N, d_act); got "
                             f"{self.obs.shape}, {self.next_obs.shape}, {self.actions.shape}")

    def __len__(self):
        return len(self.obs)

    def subset(self, names) -> "OfflineData":
        """The transitions of the named behaviour policies only."""
        unknown = [k for k in names if k not in self.sources]
        if unknown:
            raise ValueError(f"unknown behaviour policies {unknown}; have {list(self.sources)}")
        keep = np.isin(self.source, [self.sources.index(k) for k in names])
        return OfflineData(self.obs[keep], self.actions[keep], self.rewards[keep],
                           self.next_obs[keep], self.terminals[keep], self.source[keep],
                           self.sources, {k: v for k, v in self.episode_returns.items()
                                          if k in names})


def collect(task, behaviours: dict, rng: np.random.Generator) -> OfflineData:
    """Run each behaviour policy ``behaviours[name] = (policy, n_episodes)`` on ``task`` (a
    :class:`~reprobook.rl.point_mass.PointMass`) and pool the transitions, in the order given."""
    from .point_mass import rollout

    if not behaviours:
        raise ValueError("behaviours must name at least one (policy, n_episodes)")
    parts, returns = [], {}
    for i, (name, spec) in enumerate(behaviours.items()):
        if not (isinstance(spec, tuple) and len(spec) == 2):
            raise ValueError(f"behaviours[{name!r}] must be (policy, n_episodes), got {spec!r}")
        policy, n = spec
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n_episodes of {name!r} must be an int >= 0, got {n!r}")
        if n == 0:
            returns[name] = np.zeros(0)
            continue
        ro = rollout(task, policy, rng, int(n))
        m = int(n) * task.horizon
        parts.append((ro["obs"].reshape(m, -1), ro["actions"].reshape(m, -1),
                      ro["rewards"].reshape(m), ro["next_obs"].reshape(m, -1), np.full(m, i)))
        returns[name] = ro["returns"]
    if not parts:
        raise ValueError("no episodes requested")
    o, a, r, o2, s = (np.concatenate(x) for x in zip(*parts))
    return OfflineData(o, a, r, o2, np.zeros(len(o)), s, tuple(behaviours), returns)


# ----------------------------------------------------------------------------- conflict bandit
BANDIT_MODE = 0.8     # |a*(s)|
BANDIT_SCALE = 0.5    # r = 1 - (a - a*)^2 / scale


def bandit_optimal_action(s) -> np.ndarray:
    r""":math:`a^\star(s) = 0.8\,\mathrm{sign}(s_1)` for states ``s`` (..., 2)."""
    s = np.asarray(s, dtype=np.float64)
    if s.shape[-1:] != (2,):
        raise ValueError(f"bandit states must have shape (..., 2), got {s.shape}")
    return BANDIT_MODE * np.where(s[..., 0] >= 0, 1.0, -1.0)


def bandit_reward(s, a) -> np.ndarray:
    r""":math:`r(s,a) = 1 - (a - a^\star(s))^2/0.5` for states (..., 2) and actions (..., 1),
    broadcast against each other (e.g. actions (E, n, 1) of E policies on states (n, 2)); its
    maximum, 1, is reached at :math:`a^\star(s)` only. Returns shape (...)."""
    a = np.asarray(a, dtype=np.float64)
    star = bandit_optimal_action(s)
    if a.shape[-1:] != (1,):
        raise ValueError(f"actions must have shape (..., 1), got {a.shape}")
    try:
        shape = np.broadcast_shapes(a.shape[:-1], star.shape)
    except ValueError:
        raise ValueError(f"actions {a.shape} do not broadcast against states "
                         f"{np.shape(s)}") from None
    return 1.0 - (np.broadcast_to(a[..., 0], shape) - star) ** 2 / BANDIT_SCALE


def conflict_bandit(n: int, rng: np.random.Generator, mix=(0.4, 0.4, 0.2),
                    noise: float = 0.1) -> OfflineData:
    r"""``n`` one-step transitions: states uniform on :math:`[-1,1]^2`, actions from three
    behaviour policies in proportions ``mix``: ``"plus"`` plays :math:`0.8+0.1\epsilon` everywhere
    (optimal where :math:`s_1>0`), ``"minus"`` plays :math:`-0.8+0.1\epsilon` (optimal where
    :math:`s_1<0`), ``"random"`` is uniform on :math:`[-1,1]`. Every transition is terminal."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    mix = np.asarray(mix, dtype=np.float64)
    if mix.shape != (3,) or np.any(mix < 0) or not np.isclose(mix.sum(), 1.0):
        raise ValueError(f"mix must be three non-negative proportions summing to 1, got {mix}")
    counts = np.floor(mix * n).astype(int)
    counts[np.argmax(mix)] += n - counts.sum()
    src = np.repeat(np.arange(3), counts)
    s = rng.uniform(-1.0, 1.0, size=(n, 2))
    eps = rng.standard_normal(n)
    a = np.where(src == 0, BANDIT_MODE + noise * eps,
                 np.where(src == 1, -BANDIT_MODE + noise * eps, rng.uniform(-1.0, 1.0, n)))
    a = np.clip(a, -1.0, 1.0)[:, None]
    r = bandit_reward(s, a)
    return OfflineData(s, a, r, s.copy(), np.ones(n), src, ("plus", "minus", "random"),
                       {k: r[src == i] for i, k in enumerate(("plus", "minus", "random"))})


def normalized_score(returns, random_return: float, expert_return: float) -> np.ndarray:
    """D4RL's normalised score: 0 for the random policy's return, 100 for the expert's."""
    if not np.isfinite(random_return) or not np.isfinite(expert_return) \
            or expert_return == random_return:
        raise ValueError(f"need finite, distinct reference returns; got random {random_return!r}, "
                         f"expert {expert_return!r}")
    return 100.0 * (np.asarray(returns, dtype=np.float64) - random_return) / (
        expert_return - random_return)


def stack(datasets, dtype=None, device=None) -> dict:
    """Several data sets of equal size as torch tensors with a leading member axis: ``obs``,
    ``actions``, ``next_obs`` (E, N, d), ``rewards`` and ``not_done`` (E, N, 1)."""
    import torch

    datasets = list(datasets)
    if not datasets:
        raise ValueError("stack needs at least one data set")
    sizes = {len(d) for d in datasets}
    if len(sizes) != 1:
        raise ValueError(f"data sets to stack must have equal sizes, got {sorted(sizes)}")
    dtype = dtype or torch.float32

    def t(x):
        return torch.as_tensor(np.stack(x), dtype=dtype, device=device)

    return dict(obs=t([d.obs for d in datasets]), actions=t([d.actions for d in datasets]),
                rewards=t([d.rewards[:, None] for d in datasets]),
                next_obs=t([d.next_obs for d in datasets]),
                not_done=t([1.0 - d.terminals[:, None] for d in datasets]))
