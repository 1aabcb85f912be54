r"""Stochastic dueling bandits: a Bradley–Terry user, double Thompson sampling, and its clustered form.

A dueling bandit picks a pair of arms :math:`(x_t, y_t)` each round and sees only which one won.
With a preference matrix :math:`P_{ij} = \Pr(i \succ j)` and a Condorcet winner :math:`a^*`
(the arm that beats every other with probability above one half), the regret of round ``t`` is

.. math::  r_t = \tfrac12\,[\epsilon(a^*, x_t) + \epsilon(a^*, y_t)], \qquad
           \epsilon(i, j) = P_{ij} - \tfrac12 ,

so playing :math:`(a^*, a^*)` costs nothing.

**Double Thompson sampling** (D-TS; Wu & Liu, NeurIPS 2016) keeps win counts :math:`W_{ij}` and
draws two sets of samples from the Beta posteriors :math:`\theta_{ij} \sim
\mathrm{Beta}(W_{ij}+1, W_{ji}+1)`. The first arm maximises the sampled Copeland score
:math:`\sum_j 1[\theta^{(1)}_{ij} > \tfrac12]` among the arms whose *upper-confidence* Copeland
score is maximal (RUCB bounds :math:`u_{ij} = \hat p_{ij} + \sqrt{\alpha \ln t / n_{ij}}`); the
second maximises a fresh sample :math:`\theta^{(2)}_{i,\text{first}}` among the arms that are not
confidently beaten by the first (:math:`l_{i,\text{first}} \le \tfrac12`). Its regret is
:math:`O(K^2 \log T)` for K arms.

**Clustered D-TS** (the D-PBEMO bandit, reconstructed; Huang, Wang & Li, NeurIPS 2024) partitions
the N arms into K clusters. An outer D-TS runs over the K clusters, a duel between two clusters
being a duel between a uniformly drawn member of each; when the outer bandit pits a cluster
against itself, an inner D-TS over that cluster's members plays the round. The regret then scales
with the number of clusters and the size of one cluster, :math:`O((K^2 + (N/K)^2) \log T)` for
balanced clusters, instead of :math:`O(N^2 \log T)`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

__all__ = ["BradleyTerryUser", "DoubleThompson", "ClusteredDoubleThompson", "UniformDuels",
           "run_duels", "copeland_winner"]


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@dataclass
class BradleyTerryUser:
    r"""A simulated decision maker: :math:`\Pr(i \succ j) = \sigma((u_i - u_j)/\tau)`.

    ``utilities`` are the arms' latent utilities (higher is better), ``temperature`` is τ > 0.
    """

    utilities: np.ndarray
    temperature: float = 0.05
    P: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        u = np.asarray(self.utilities, dtype=float)
        if u.ndim != 1 or u.size < 1 or not np.all(np.isfinite(u)):
            raise ValueError(f"utilities must be a finite 1-D array, got shape {u.shape}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        self.utilities = u
        self.P = _sigmoid((u[:, None] - u[None, :]) / self.temperature)
        np.fill_diagonal(self.P, 0.5)

    @property
    def n_arms(self) -> int:
        return self.utilities.size

    @property
    def best(self) -> int:
        """The Condorcet winner: the arm of highest utility."""
        return int(np.argmax(self.utilities))

    def duel(self, i: int, j: int, rng: np.random.Generator) -> bool:
        """True when arm ``i`` wins against arm ``j`` (a fair coin when i == j)."""
        return bool(rng.random() < self.P[i, j])

    def regret(self, i: int, j: int) -> float:
        """The round's regret :math:`\\tfrac12[\\epsilon(a^*, i) + \\epsilon(a^*, j)]`."""
        b = self.best
        return 0.5 * (self.P[b, i] - 0.5 + self.P[b, j] - 0.5)


def _bounds(W: np.ndarray, t: int, alpha: float):
    """RUCB confidence bounds on :math:`P_{ij}` from win counts (1 / 0 where a pair is unplayed)."""
    N = W + W.T
    with np.errstate(divide="ignore", invalid="ignore"):
        p = W / N
        rad = np.sqrt(alpha * np.log(max(t, 1)) / N)
        U = np.where(N > 0, p + rad, 1.0)
        L = np.where(N > 0, p - rad, 0.0)
    np.fill_diagonal(U, 0.5)
    np.fill_diagonal(L, 0.5)
    return U, L


@lru_cache(maxsize=64)
def _upper_triangle(n: int):
    return np.triu_indices(n, 1)


def _argmax_random(x: np.ndarray, rng: np.random.Generator) -> int:
    best = np.flatnonzero(x == x.max())
    return int(best[rng.integers(best.size)]) if best.size > 1 else int(best[0])


def copeland_winner(W: np.ndarray) -> int:
    """The arm that beats the most others in the empirical preferences (unplayed pairs count as won,
    as in D-TS's recommendation rule; ties go to the lowest index)."""
    W = np.asarray(W, dtype=float)
    N = W + W.T
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(N > 0, W / N, 1.0)
    np.fill_diagonal(p, 0.5)
    return int(np.argmax((p > 0.5).sum(axis=1)))


class DoubleThompson:
    """D-TS over ``n_arms`` arms (see the module docstring). ``alpha`` is RUCB's exploration constant
    (> 1/2 for the guarantee)."""

    def __init__(self, n_arms: int, alpha: float = 0.51):
        if int(n_arms) < 1:
            raise ValueError(f"n_arms must be >= 1, got {n_arms}")
        if not alpha > 0:
            raise ValueError(f"alpha must be > 0, got {alpha}")
        self.n_arms, self.alpha = int(n_arms), float(alpha)
        self.W = np.zeros((self.n_arms, self.n_arms))
        self.t = 0

    def select(self, rng: np.random.Generator) -> tuple[int, int]:
        self.t += 1
        K = self.n_arms
        if K == 1:
            return 0, 0
        U, L = _bounds(self.W, self.t, self.alpha)
        upper = (U > 0.5).sum(axis=1)
        # Thompson samples are only needed on the candidates' rows; within the candidate block they
        # must be antisymmetric (theta_ji = 1 - theta_ij), as one draw of the preference matrix.
        rows = np.flatnonzero(upper == upper.max())
        theta = rng.beta(self.W[rows] + 1.0, self.W.T[rows] + 1.0)
        block = theta[:, rows]
        iu = _upper_triangle(rows.size)
        block.T[iu] = 1.0 - block[iu]
        np.fill_diagonal(block, 0.5)
        theta[:, rows] = block
        score = np.full(K, -1)
        score[rows] = (theta > 0.5).sum(axis=1)
        first = _argmax_random(score, rng)
        theta2 = rng.beta(self.W[:, first] + 1.0, self.W[first, :] + 1.0)
        theta2[first] = 0.5
        theta2 = np.where(L[:, first] <= 0.5, theta2, -1.0)
        second = _argmax_random(theta2, rng)
        return first, second

    def update(self, i: int, j: int, i_won: bool) -> None:
        if i == j:
            return
        if i_won:
            self.W[i, j] += 1
        else:
            self.W[j, i] += 1

    def recommend(self) -> int:
        return copeland_winner(self.W)


class UniformDuels:
    """A pair of arms drawn uniformly each round: no learning at all (a control with linear regret)."""

    def __init__(self, n_arms: int):
        self.n_arms = int(n_arms)
        self.W = np.zeros((self.n_arms, self.n_arms))

    def select(self, rng):
        return int(rng.integers(self.n_arms)), int(rng.integers(self.n_arms))

    def update(self, i, j, i_won):
        DoubleThompson.update(self, i, j, i_won)

    def recommend(self) -> int:
        return copeland_winner(self.W)


class ClusteredDoubleThompson:
    """Clustered D-TS over arms with cluster ``labels`` (integers 0..K-1, one per arm).

    An outer D-TS duels clusters; each cluster keeps an inner D-TS over its own members. When the
    outer bandit pits two different clusters, a uniformly drawn member of each duels and the outcome
    updates the outer counts; when it pits a cluster against itself (it believes that cluster wins),
    the round goes to that cluster's inner D-TS. No hard switch is needed: the outer regret is
    D-TS's over K arms, the inner one D-TS's over one cluster's members.
    """

    def __init__(self, labels, alpha: float = 0.51):
        labels = np.asarray(labels)
        if labels.ndim != 1 or labels.size < 1 or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError("labels must be a 1-D integer array with one cluster id per arm")
        ids = np.unique(labels)
        if ids[0] < 0 or not np.array_equal(ids, np.arange(ids.size)):
            raise ValueError(f"cluster ids must be 0..K-1 with none empty, got {ids.tolist()}")
        self.labels, self.alpha = labels, float(alpha)
        self.members = [np.flatnonzero(labels == k) for k in ids]
        self.outer = DoubleThompson(ids.size, alpha)
        self.inner = [DoubleThompson(m.size, alpha) for m in self.members]
        self._pending: tuple[int, int, int] | None = None

    @property
    def n_arms(self) -> int:
        return self.labels.size

    @property
    def n_clusters(self) -> int:
        return len(self.members)

    def select(self, rng: np.random.Generator) -> tuple[int, int]:
        a, b = self.outer.select(rng)
        if a != b:
            self._pending = (-1, a, b)
            ma, mb = self.members[a], self.members[b]
            return int(ma[rng.integers(ma.size)]), int(mb[rng.integers(mb.size)])
        i, j = self.inner[a].select(rng)
        self._pending = (a, i, j)
        m = self.members[a]
        return int(m[i]), int(m[j])

    def update(self, x: int, y: int, x_won: bool) -> None:
        if self._pending is None:
            raise RuntimeError("update() before select()")
        c, i, j = self._pending
        (self.outer if c < 0 else self.inner[c]).update(i, j, x_won)
        self._pending = None

    def recommend(self) -> int:
        c = self.outer.recommend()
        return int(self.members[c][self.inner[c].recommend()])


def run_duels(algorithm, user: BradleyTerryUser, rounds: int, rng: np.random.Generator,
              on_duel=None) -> np.ndarray:
    """Play ``rounds`` duels of ``algorithm`` against ``user``; return the cumulative regret per round.

    ``on_duel(x, y, x_won)`` (optional) sees every comparison, e.g. to fit a reward model on the
    same feedback.
    """
    if algorithm.n_arms != user.n_arms:
        raise ValueError(f"the algorithm has {algorithm.n_arms} arms but the user {user.n_arms}")
    if int(rounds) < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    regret = np.empty(int(rounds))
    for t in range(int(rounds)):
        x, y = algorithm.select(rng)
        won = user.duel(x, y, rng)
        algorithm.update(x, y, won)
        if on_duel is not None:
            on_duel(x, y, won)
        regret[t] = user.regret(x, y)
    return np.cumsum(regret)
