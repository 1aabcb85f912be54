r"""Preference-based evolutionary multi-objective search on pymoo's NSGA-II.

A simulated decision maker (DM) has a solution of interest (SOI) :math:`z` on the Pareto front and
prefers solutions whose objective vectors are closer to it: :math:`u(F) = -\lVert F - z\rVert`, with
Bradley–Terry feedback (:class:`~reprobook.bandits.dueling.BradleyTerryUser`). Every few
generations the search *consults* the DM: it clusters the population in objective space and asks a
budget of duels chosen by a dueling bandit. Three ways to use the answers, all on the same NSGA-II,
differing only in how the last (splitting) non-dominated front is truncated:

``"nsga2"``
    no consultation; crowding distance (plain NSGA-II).
``"dpbemo"``
    D-PBEMO (Huang, Wang & Li, NeurIPS 2024), reconstructed: the clustered dueling bandit's
    recommended solution :math:`r_c` of each consultation c enters a preference density
    :math:`\tilde p(F) \propto \sum_c \gamma^{\,n-1-c}\, \exp(-\lVert F - r_c\rVert^2 / 2\sigma^2)`
    (recent consultations weigh more), and the last front keeps the solutions of highest density.
    Consultations stop when :math:`\mathrm{KL}(\tilde p_t \,\Vert\, \tilde p_{t-1})` over the current
    population falls below a threshold (the paper's termination criterion) or after a cap.
``"reward-model"``
    the baseline D-PBEMO argues against: a Bradley–Terry utility with quadratic features of F, fitted
    by logistic regression on the *same* comparisons, and the last front keeps the solutions of
    highest predicted utility.

The official implementation (C++, EMOC) puts one-dimensional Gaussians on each objective around the
recommended points; we use the isotropic multivariate Gaussian, which ranks by distance to the
recommendation.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.core.callback import Callback
from pymoo.operators.survival.rank_and_crowding import RankAndCrowding
from pymoo.operators.survival.rank_and_crowding.metrics import CrowdingDiversity, get_crowding_function
from pymoo.optimize import minimize
from pymoo.problems import get_problem
from sklearn.cluster import KMeans
from sklearn.linear_model import LogisticRegression

from reprobook.bandits.dueling import (BradleyTerryUser, ClusteredDoubleThompson, DoubleThompson,
                                       run_duels)

__all__ = ["METHODS", "PROBLEMS", "solution_of_interest", "PreferenceDensity", "PBEMOResult",
           "run_pbemo", "quadratic_features"]

METHODS = ("nsga2", "dpbemo", "reward-model")
#: name -> (pymoo problem name, keyword arguments, reference point the SOI is nearest to)
PROBLEMS = {
    "zdt1": ("zdt1", {"n_var": 30}, (0.3, 0.6)),
    "dtlz2": ("dtlz2", {"n_var": 12, "n_obj": 3}, (0.2, 0.5, 0.6)),
}


def solution_of_interest(problem: str) -> np.ndarray:
    """The point of the true Pareto front closest to the problem's reference point."""
    if problem not in PROBLEMS:
        raise ValueError(f"unknown problem {problem!r}; choose from {sorted(PROBLEMS)}")
    ref = np.asarray(PROBLEMS[problem][2], dtype=float)
    if problem == "zdt1":  # front f2 = 1 - sqrt(f1), f1 in [0, 1]
        f1 = np.linspace(0.0, 1.0, 200_001)
        front = np.stack([f1, 1.0 - np.sqrt(f1)], axis=1)
        return front[np.argmin(np.linalg.norm(front - ref, axis=1))]
    return ref / np.linalg.norm(ref)  # DTLZ2: the unit sphere's positive orthant


_CROWDING = get_crowding_function("cd")


def _crowding(F: np.ndarray) -> np.ndarray:
    return _CROWDING.do(F)


def quadratic_features(F: np.ndarray) -> np.ndarray:
    """[F, F_i F_j for i <= j]: the reward model's features."""
    F = np.atleast_2d(F)
    iu = np.triu_indices(F.shape[1])
    return np.concatenate([F, (F[:, :, None] * F[:, None, :])[:, iu[0], iu[1]]], axis=1)


@dataclass
class PreferenceDensity:
    """Discounted mixture of isotropic Gaussians around the DM's recommended points."""

    sigma: float = 0.1
    gamma: float = 0.9
    centres: list = field(default_factory=list)

    def __call__(self, F: np.ndarray) -> np.ndarray:
        F = np.atleast_2d(F)
        n = len(self.centres)
        out = np.zeros(F.shape[0])
        for c, r in enumerate(self.centres):
            d2 = ((F - r) ** 2).sum(axis=1)
            out += self.gamma ** (n - 1 - c) * np.exp(-d2 / (2 * self.sigma ** 2))
        return out

    def distribution(self, F: np.ndarray) -> np.ndarray:
        """The density normalised over the rows of F (a distribution over the population)."""
        p = self(F) + 1e-300
        return p / p.sum()


class _LastFrontScore(CrowdingDiversity):
    """pymoo's hook for truncating the last front: higher scores survive."""

    def __init__(self):
        super().__init__()
        self.score = None  # None: NSGA-II's crowding distance

    def _do(self, F, n_remove=0, **kwargs):
        if self.score is None:
            return _crowding(F)
        return self.score(F)


@dataclass
class PBEMOResult:
    F: np.ndarray                 # final population's objective vectors
    soi: np.ndarray
    mean_distance: float          # ē(S): mean distance of the population to the SOI
    min_distance: float           # ε*(S): distance of the closest solution to the SOI
    consultations: int
    terminated_early: bool        # the KL criterion stopped consulting before the cap
    kl_history: list
    duel_regret: float            # cumulative dueling regret over all consultations


class _Consultant(Callback):
    def __init__(self, method, soi, score_hook, rng, *, first, every, max_rounds, n_clusters,
                 queries, temperature, kl_threshold, sigma, gamma, feedback, bandit):
        super().__init__()
        self.method, self.soi, self.hook, self.rng = method, soi, score_hook, rng
        self.first, self.every, self.max_rounds = first, every, max_rounds
        self.n_clusters, self.queries, self.temperature = n_clusters, queries, temperature
        self.kl_threshold, self.feedback, self.bandit = kl_threshold, feedback, bandit
        self.density = PreferenceDensity(sigma, gamma)
        self.pairs: list = []
        self.rounds, self.stopped, self.kl, self.regret = 0, False, [], 0.0

    def notify(self, algorithm):
        gen = algorithm.n_gen
        if (self.method == "nsga2" or self.stopped or self.rounds >= self.max_rounds
                or gen < self.first or (gen - self.first) % self.every):
            return
        F = algorithm.pop.get("F").astype(float)
        k = min(self.n_clusters, len(F))
        labels = KMeans(k, n_init=3, random_state=int(self.rng.integers(2**31))).fit(F).labels_
        utilities = -np.linalg.norm(F - self.soi, axis=1)
        if self.feedback == "random":  # a broken DM: every answer a fair coin
            utilities = np.zeros_like(utilities)
        user = BradleyTerryUser(utilities, self.temperature)
        bandit = (ClusteredDoubleThompson(labels) if self.bandit == "clustered"
                  else DoubleThompson(len(F)))
        if self.method == "reward-model":
            def record(x, y, x_won):
                if x != y:
                    self.pairs.append((F[x], F[y], x_won))
        else:
            record = None
        regret = run_duels(bandit, user, self.queries, self.rng, on_duel=record)
        self.regret += float(regret[-1])
        self.rounds += 1
        if self.method == "dpbemo":
            before = self.density.distribution(F) if self.density.centres else None
            best = int(np.argmax(utilities)) if self.feedback == "oracle" else bandit.recommend()
            self.density.centres.append(F[best].copy())
            self.hook.score = self.density
            if before is not None:
                after = self.density.distribution(F)
                kl = float(np.sum(after * np.log(after / before)))
                self.kl.append(kl)
                if kl < self.kl_threshold:
                    self.stopped = True
        else:
            self.hook.score = self._fit_reward_model()

    def _fit_reward_model(self):
        if not self.pairs:
            return None
        a = np.array([p[0] for p in self.pairs])
        b = np.array([p[1] for p in self.pairs])
        y = np.array([p[2] for p in self.pairs], dtype=int)
        X = quadratic_features(a) - quadratic_features(b)
        # Symmetrise so both classes exist and the model has no intercept to hide behind.
        X = np.concatenate([X, -X])
        y = np.concatenate([y, 1 - y])
        if np.unique(y).size < 2:
            return None
        clf = LogisticRegression(C=10.0, fit_intercept=False, max_iter=2000).fit(X, y)
        w = clf.coef_.ravel()
        return lambda F: quadratic_features(F) @ w


def run_pbemo(problem: str, method: str, *, seed: int, pop_size: int = 40, generations: int = 100,
              first_consultation: float = 0.5, every: int = 10, max_rounds: int = 5,
              n_clusters: int = 5, queries: int = 200, temperature: float = 0.05,
              kl_threshold: float = 0.05, sigma: float = 0.1, gamma: float = 0.9,
              feedback: str = "dm", bandit: str = "clustered") -> PBEMOResult:
    """One run of preference-based NSGA-II (see the module docstring).

    The first consultation comes after ``first_consultation`` of the generations, then one every
    ``every`` generations until the KL criterion or ``max_rounds``. ``feedback="random"`` replaces
    the DM by fair coins (a control); ``feedback="oracle"`` makes D-PBEMO's recommendation the
    population's truly best member (a perfect bandit: a positive control; the duels still run, so
    the regret is reported as usual); ``bandit="flat"`` uses D-TS over the whole population.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {METHODS}")
    if feedback not in ("dm", "random", "oracle"):
        raise ValueError(f"feedback must be 'dm', 'random' or 'oracle', got {feedback!r}")
    if bandit not in ("clustered", "flat"):
        raise ValueError(f"bandit must be 'clustered' or 'flat', got {bandit!r}")
    if pop_size < 4 or generations < 2:
        raise ValueError("pop_size must be >= 4 and generations >= 2")
    soi = solution_of_interest(problem)  # checks the problem's name
    name, kwargs, _ = PROBLEMS[problem]
    hook = _LastFrontScore()
    rng = np.random.default_rng(seed)
    cb = _Consultant(method, soi, hook, rng, first=max(1, int(first_consultation * generations)),
                     every=every, max_rounds=max_rounds, n_clusters=n_clusters, queries=queries,
                     temperature=temperature, kl_threshold=kl_threshold, sigma=sigma, gamma=gamma,
                     feedback=feedback, bandit=bandit)
    algo = NSGA2(pop_size=pop_size, survival=RankAndCrowding(crowding_func=hook))
    res = minimize(get_problem(name, **kwargs), algo, ("n_gen", generations), seed=int(seed),
                   callback=cb, verbose=False, copy_algorithm=False)
    F = res.pop.get("F").astype(float)
    d = np.linalg.norm(F - soi, axis=1)
    return PBEMOResult(F=F, soi=soi, mean_distance=float(d.mean()), min_distance=float(d.min()),
                       consultations=cb.rounds, terminated_early=cb.stopped, kl_history=cb.kl,
                       duel_regret=cb.regret)
