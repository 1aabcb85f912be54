r"""DAgger (Ross, Gordon & Bagnell, 2011) with LogLossBC as its learner, at a fixed label budget.

Online imitation: the learner may roll out its own policy and ask the expert which action it would
have taken in the states it visits. With a budget of ``labels`` expert labels split evenly over
``rounds``:

1. round 1 spends its share on expert trajectories (plain behaviour cloning);
2. every later round rolls out the current learner and asks the expert to label each visited
   state, until the round's share is spent; states in ``unlabelable`` (an absorbing failure state,
   where every action is the same) are skipped and cost nothing;
3. after each round the learner is refit by LogLossBC on everything gathered so far.

So DAgger and offline LogLossBC with ``labels / H`` expert trajectories use the same number of
expert labels and the same learner; only where the labels are taken differs.
"""
from __future__ import annotations

import numpy as np

from .behavior_cloning import behavior_cloning, log_linear_policy
from ..threads import single_threaded_blas
from .finite_horizon import check_finite_mdp, sample_trajectories

__all__ = ["dagger"]


@single_threaded_blas()
def dagger(P, d1, features, expert_actions, H: int, labels: int, rounds: int,
           rng: np.random.Generator, *, unlabelable=(), l2: float = 1e-4
           ) -> tuple[np.ndarray, int]:
    """Run DAgger for a stationary log-linear learner; returns ``(theta, labels_used)``.

    ``expert_actions`` (S,) is the deterministic expert; ``labels`` the total budget (a multiple
    of ``H * rounds`` keeps every round's share whole trajectories in round 1).
    """
    P, d1 = check_finite_mdp(P, d1)
    S, A, _ = P.shape
    expert_actions = np.asarray(expert_actions)
    if expert_actions.shape != (S,):
        raise ValueError(f"expert_actions must have shape (S,) = ({S},), got {expert_actions.shape}")
    for name, v in (("H", H), ("labels", labels), ("rounds", rounds)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    share = labels // rounds
    if share < H:
        raise ValueError(f"each round's share of the budget ({labels} // {rounds} = {share}) must "
                         f"cover at least one trajectory of H = {H} steps")
    skip = np.zeros(S, dtype=bool)
    skip[list(unlabelable)] = True
    expert = np.zeros((S, A))
    expert[np.arange(S), expert_actions] = 1.0

    states, _ = sample_trajectories(P, d1, expert, H, share // H, rng)
    data = [states.reshape(-1)]
    theta = None
    for k in range(rounds):
        if k > 0:
            pi = log_linear_policy(theta, features)
            got, need, tries = [], share, 0
            while need > 0:                      # roll out until this round's labels are spent
                tries += 1
                if tries > 10_000:
                    raise RuntimeError("the learner's rollouts visit no labelable state")
                s, _ = sample_trajectories(P, d1, pi, H, max(1, -(-need // H)), rng)
                s = s.reshape(-1)
                s = s[~skip[s]][:need]
                got.append(s)
                need -= len(s)
            data.append(np.concatenate(got))
        seen = np.concatenate(data)
        theta, _ = behavior_cloning(features, seen[None, :], expert_actions[seen][None, :], A,
                                    shared=True, l2=l2)
    return theta, int(sum(len(x) for x in data))
