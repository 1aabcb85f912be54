r"""The context chain: a finite-horizon MDP where one mistake is fatal, for imitation learning.

There are ``n_contexts`` context states :math:`s = 0, \dots, S-1`, each with a feature vector
:math:`\phi(s) \sim \mathcal{N}(0, I_d)`, and one absorbing ``FAIL`` state (index :math:`S`, feature
zero). The expert is deterministic and log-linear in the limit:
:math:`\pi^\star(s) = \arg\max_a (W^\star\phi(s))_a` with :math:`W^\star \sim \mathcal{N}(0, I)`, so a
log-linear policy class :math:`\pi_\theta(a|s) \propto \exp(\theta_a\cdot\phi(s))` contains
policies arbitrarily close to it (realizable, up to the norm of :math:`\theta`).

Taking the expert's action moves to a successor :math:`s' \sim K(\cdot|s)`, a fixed random sparse
kernel with ``branching`` successors per context (weights Dirichlet(1)); **any other action moves to
FAIL for the rest of the episode**. The initial distribution is uniform over the contexts. This is
the worst case for compounding errors: a learner that errs with probability :math:`\epsilon_h` at
step :math:`h` survives :math:`H` steps with probability :math:`\prod_h (1-\epsilon_h)`.

Rewards, both in :math:`[0, 1]` per step:

* **sparse**: 1 at the last step if the expert's action is taken there (so the return is 1 exactly
  when the episode never failed), range :math:`R = 1`;
* **dense**: 1 at every step on which the expert's action is taken, range :math:`R = H`.

The expert earns the maximum of both, :math:`J(\pi^\star) = 1` and :math:`H`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .finite_horizon import state_distributions

__all__ = ["ContextChain", "context_chain", "REWARDS"]

REWARDS = ("sparse", "dense")


@dataclass(frozen=True, eq=False)
class ContextChain:
    """A context chain; build it with :func:`context_chain`. ``FAIL`` is the last state index."""

    features: np.ndarray       # (S + 1, d); the FAIL row is zero
    expert_actions: np.ndarray  # (S + 1,); the FAIL entry is 0 (any action: FAIL is absorbing)
    kernel: np.ndarray         # (S, S): K(s' | s), the move on the expert's action
    n_actions: int

    @property
    def n_contexts(self) -> int:
        return self.kernel.shape[0]

    @property
    def n_states(self) -> int:
        return self.n_contexts + 1

    @property
    def fail(self) -> int:
        return self.n_contexts

    @property
    def dim(self) -> int:
        return self.features.shape[1]

    @cached_property
    def P(self) -> np.ndarray:
        """The transition tensor (S + 1, A, S + 1), built once and read-only."""
        S, A = self.n_contexts, self.n_actions
        P = np.zeros((S + 1, A, S + 1))
        P[:S, :, S] = 1.0                                   # a wrong action fails ...
        ctx = np.arange(S)
        P[ctx, self.expert_actions[:S], S] = 0.0            # ... the expert's action does not
        P[ctx, self.expert_actions[:S], :S] = self.kernel
        P[S, :, S] = 1.0
        P.setflags(write=False)
        return P

    @cached_property
    def d1(self) -> np.ndarray:
        """Uniform over the contexts, nothing on FAIL (read-only)."""
        d = np.full(self.n_states, 1.0 / self.n_contexts)
        d[self.fail] = 0.0
        d.setflags(write=False)
        return d

    def expert_policy(self) -> np.ndarray:
        """The expert as an (S + 1, A) one-hot table."""
        pi = np.zeros((self.n_states, self.n_actions))
        pi[np.arange(self.n_states), self.expert_actions] = 1.0
        return pi

    def regrets(self, pi, H: int) -> tuple[float, float]:
        r"""Exact ``(sparse regret, dense regret / H)`` of a policy (S + 1, A) or (H, S + 1, A).

        One forward pass: the step-:math:`h` reward is earned exactly when the episode has not
        failed by the end of step :math:`h`, so with :math:`f_h` the mass on FAIL after :math:`h`
        steps, the sparse regret is :math:`f_H` and the dense regret is :math:`\sum_{h\le H} f_h`.
        """
        f = state_distributions(self.P, self.d1, pi, H)[1:, self.fail]
        return float(f[-1]), float(f.sum() / H)

    def rewards(self, kind: str, H: int) -> np.ndarray:
        """Per-step rewards (H, S + 1, A) for ``kind`` in :data:`REWARDS` (see the module doc)."""
        if kind not in REWARDS:
            raise ValueError(f"kind must be one of {REWARDS}, got {kind!r}")
        if isinstance(H, bool) or not isinstance(H, (int, np.integer)) or H < 1:
            raise ValueError(f"H must be an int >= 1, got {H!r}")
        good = np.zeros((self.n_states, self.n_actions))
        good[np.arange(self.n_contexts), self.expert_actions[:self.n_contexts]] = 1.0
        r = np.zeros((int(H), self.n_states, self.n_actions))
        if kind == "dense":
            r[:] = good
        else:
            r[-1] = good
        return r


def context_chain(n_contexts: int, n_actions: int, dim: int, branching: int,
                  rng: np.random.Generator) -> ContextChain:
    """Draw a context chain (features, expert weights and kernel) from ``rng``."""
    for name, v, lo in (("n_contexts", n_contexts, 1), ("n_actions", n_actions, 2),
                        ("dim", dim, 1), ("branching", branching, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    if branching > n_contexts:
        raise ValueError(f"branching ({branching}) cannot exceed n_contexts ({n_contexts})")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    S, A, d = int(n_contexts), int(n_actions), int(dim)
    phi = np.zeros((S + 1, d))
    phi[:S] = rng.standard_normal((S, d))
    W = rng.standard_normal((A, d))
    expert = np.zeros(S + 1, dtype=np.int64)
    expert[:S] = (phi[:S] @ W.T).argmax(axis=1)
    K = np.zeros((S, S))
    for s in range(S):
        succ = rng.choice(S, size=branching, replace=False)
        K[s, succ] = rng.dirichlet(np.ones(branching))
    for a in (phi, expert, K):
        a.setflags(write=False)
    return ContextChain(features=phi, expert_actions=expert, kernel=K, n_actions=A)
