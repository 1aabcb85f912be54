r"""Reward-free skill discovery on a tabular MDP, with exact successor measures.

A **skill set** is ``n`` stochastic policies :math:`\pi_1..\pi_n` started from one state
:math:`s_0`; skill :math:`z`'s state distribution is its discounted occupancy
:math:`d_z = M_{\pi_z}(s_0, \cdot)` (:mod:`reprobook.rl.successor`). Two objectives of the
occupancies are maximised:

* ``"mi"`` (the MI-only, DIAYN-style objective): :math:`I(S;Z) = \frac1n\sum_z
  \mathrm{KL}(d_z\|\bar d)`, :math:`\bar d = \frac1n\sum_z d_z`. DIAYN maximises a variational
  lower bound of this with a learned discriminator :math:`q(z|s)`; with exact occupancies the
  optimal discriminator is :math:`d_z(s)/(n\bar d(s))` and the bound is tight, so this is the
  objective DIAYN's discriminator reward aims at, without estimation error.
* ``"leads"``: :math:`I(S;Z) + \beta H(\bar d)`, mutual information plus the entropy of the
  skills' pooled occupancy. This is the book's **reconstruction** of the LEADS objective (Le
  Tolguenec et al., NeurIPS 2024): skills are kept apart by the MI term and pushed, by the
  exploration term, toward states that the skill set as a whole rarely reaches. The paper's own
  estimator (C-learning successor measures, an uncertainty measure that picks target states) is
  not reproduced; :func:`leads_reward` is the single place to swap another objective in.

**The update** is exact policy-gradient mirror ascent. For an objective :math:`F(d_1..d_n)`, the
derivative of :math:`F` along a policy change of skill :math:`z` is that of the linear objective
:math:`\sum_s d_z(s) r_z(s)` with the state reward :math:`r_z = \partial F/\partial d_z`
(a chain rule through the occupancy). For the MI, :math:`n\,\partial I/\partial d_z(s) =
\log d_z(s) - \log\bar d(s)`; the entropy term adds :math:`-\beta(\log\bar d(s) + 1)` (the constant
changes no policy). Each iteration computes the occupancies, the rewards (occupancies floored at
``floor`` inside the logarithms), the exact action values :math:`Q_z` of the reward received on
arrival in the next state (:func:`reprobook.rl.mdp.evaluate`), and takes one KL mirror step
:math:`\log\pi_z \leftarrow \log\pi_z + \eta Q_z - \log\sum_a(\cdot)` per skill
(:func:`reprobook.rl.pmd.pmd_step`). ``"random"`` skills are the same initial policies, not
trained: the control that the objective, not the initialisation, makes the skill set.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .mdp import TabularMDP, action_values, evaluate
from .pmd import pmd_step
from .successor import entropy, mutual_information, occupancy

__all__ = ["OBJECTIVES", "mi_reward", "leads_reward", "skill_objective", "initial_skills",
           "skill_occupancies", "SkillRun", "train_skills"]

OBJECTIVES = ("mi", "leads")
#: Occupancies are floored here inside the logarithms, so an unvisited state has a finite reward.
FLOOR = 1e-8


def _occupancies(d) -> np.ndarray:
    d = np.asarray(d, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] < 2:
        raise ValueError(f"d must have shape (n_skills >= 2, S), got {d.shape}")
    return d


def mi_reward(d, floor: float = FLOOR) -> np.ndarray:
    r"""Per-skill state rewards :math:`\log d_z - \log\bar d` (shape of ``d``): the MI's gradient."""
    d = np.maximum(_occupancies(d), floor)
    return np.log(d) - np.log(d.mean(axis=0))


def leads_reward(d, beta: float = 1.0, floor: float = FLOOR) -> np.ndarray:
    r"""The reconstructed LEADS rewards :math:`\log d_z - (1+\beta)\log\bar d`: the gradient of
    :math:`I(S;Z) + \beta H(\bar d)` up to a constant. ``beta = 0`` is :func:`mi_reward`."""
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not np.isfinite(beta):
        raise ValueError(f"beta must be a finite number, got {beta!r}")
    d = np.maximum(_occupancies(d), floor)
    return np.log(d) - (1.0 + beta) * np.log(d.mean(axis=0))


def skill_objective(d, objective: str, beta: float = 1.0) -> float:
    """The value of ``objective`` ("mi" or "leads") at occupancies ``d`` (n_skills, S)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {OBJECTIVES}")
    mi = mutual_information(d)
    return mi if objective == "mi" else mi + beta * entropy(np.asarray(d).mean(axis=0))


def initial_skills(n_skills: int, n_states: int, n_actions: int, rng: np.random.Generator,
                   scale: float = 1.0) -> np.ndarray:
    r"""Random softmax policies, log-probabilities of shape (n, S, A): logits ~ scale * N(0, 1)."""
    if isinstance(n_skills, bool) or not isinstance(n_skills, (int, np.integer)) or n_skills < 2:
        raise ValueError(f"n_skills must be an int >= 2, got {n_skills!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    x = scale * rng.standard_normal((int(n_skills), n_states, n_actions))
    x -= x.max(axis=2, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=2, keepdims=True))


def skill_occupancies(mdp: TabularMDP, log_pis, start) -> np.ndarray:
    """The occupancy :math:`d_z` of every skill from ``start``: shape (n_skills, S)."""
    return np.stack([occupancy(mdp, np.exp(lp), start) for lp in np.asarray(log_pis)])


@dataclass
class SkillRun:
    """A trained skill set: final log-policies (n, S, A) and the per-iteration history."""

    log_pis: np.ndarray
    objective: str
    history: dict = field(default_factory=dict)   # "objective", "mi", "entropy": one per iterate

    @property
    def policies(self) -> np.ndarray:
        return np.exp(self.log_pis)


def train_skills(mdp: TabularMDP, start, log_pis0, n_iters: int, objective: str = "leads",
                 beta: float = 1.0, eta: float = 1.0, floor: float = FLOOR) -> SkillRun:
    """Exact mirror ascent on ``objective`` from the skills ``log_pis0`` (see the module docstring).

    ``n_iters`` updates of every skill, all from the same occupancies (a simultaneous step).
    The history holds the objective, the MI and the pooled entropy at each of the
    ``n_iters + 1`` iterates.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {OBJECTIVES}")
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    log_pis = np.array(log_pis0, dtype=np.float64)
    if log_pis.ndim != 3 or log_pis.shape[1:] != (mdp.n_states, mdp.n_actions):
        raise ValueError(f"log_pis0 must have shape (n, S, A) = (n, {mdp.n_states}, "
                         f"{mdp.n_actions}), got {log_pis.shape}")
    if isinstance(n_iters, bool) or not isinstance(n_iters, (int, np.integer)) or n_iters < 0:
        raise ValueError(f"n_iters must be an int >= 0, got {n_iters!r}")
    b = 0.0 if objective == "mi" else beta
    hist = {"objective": [], "mi": [], "entropy": []}

    def log(d):
        mi, h = mutual_information(d), entropy(d.mean(axis=0))
        hist["mi"].append(mi)
        hist["entropy"].append(h)
        hist["objective"].append(mi + b * h)

    for _ in range(int(n_iters)):
        d = skill_occupancies(mdp, log_pis, start)
        log(d)
        rewards = leads_reward(d, b, floor)
        for z in range(log_pis.shape[0]):
            # reward on arrival: r(s, a) = sum_s' P(s, a, s') r_z(s')
            task = TabularMDP(mdp.P, mdp.P @ rewards[z], mdp.gamma)
            q = action_values(task, evaluate(task, np.exp(log_pis[z])))
            log_pis[z] = pmd_step(log_pis[z], q, eta)
    log(skill_occupancies(mdp, log_pis, start))
    return SkillRun(log_pis, objective, {k: np.array(v) for k, v in hist.items()})
