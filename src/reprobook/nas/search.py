r"""Multi-objective architecture search on surrogate objectives: NSGA-II against random search.

Both searches minimise a vector objective ``objective(archs) -> [n, m]`` (for instance predicted
perplexity and predicted latency) over a :class:`~reprobook.models.supernet_gpt.GPTSpace` with the
same budget of ``n_evals`` evaluations, and return every architecture they evaluated with its
objective values, in evaluation order (the search's trajectory).

* :func:`nsga2_search`: pymoo's NSGA-II (non-dominated sorting, crowding distance, binary
  tournaments) on the space's integer genome ``[e, l, h_1..h_L, r_1..r_L]`` (choice indices; genes
  of unused layers are carried but ignored), with simulated binary crossover and polynomial
  mutation rounded to integers, duplicates removed. Objective calls are batched per generation.
* :func:`random_search`: ``n_evals`` architectures drawn uniformly from the space (batched).

:func:`hypervolume` scores a set of objective vectors by the area (volume) it dominates up to a
reference point, after scaling each objective by ``(f - ideal) / (nadir - ideal)``; points beyond
the reference contribute nothing. :func:`hypervolume_trace` gives it after each prefix of a
trajectory (the anytime performance of a search).
"""
from __future__ import annotations

import numpy as np
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.core.problem import Problem
from pymoo.indicators.hv import HV
from pymoo.operators.crossover.sbx import SBX
from pymoo.operators.mutation.pm import PM
from pymoo.operators.repair.rounding import RoundingRepair
from pymoo.operators.sampling.rnd import IntegerRandomSampling
from pymoo.optimize import minimize

from ..models.supernet_gpt import GPTSpace

__all__ = ["nsga2_search", "random_search", "hypervolume", "hypervolume_trace"]


def _budget(n_evals, pop_size=1):
    if isinstance(n_evals, bool) or not isinstance(n_evals, int) or n_evals < pop_size:
        raise ValueError(f"n_evals must be an int >= pop_size ({pop_size}), got {n_evals!r}")


class _Logged(Problem):
    def __init__(self, space: GPTSpace, objective, n_obj: int):
        super().__init__(n_var=space.genome_size, n_obj=n_obj, xl=0, xu=space.genome_bounds(),
                         vtype=int)
        self.space, self.objective = space, objective
        self.archs, self.F = [], []

    def _evaluate(self, x, out, *args, **kwargs):
        archs = [self.space.decode(g) for g in x]
        F = np.asarray(self.objective(archs), dtype=float)
        if F.shape != (len(archs), self.n_obj):
            raise ValueError(f"objective returned shape {F.shape}, expected {(len(archs), self.n_obj)}")
        self.archs += archs
        self.F.append(F)
        out["F"] = F


def nsga2_search(objective, space: GPTSpace, n_evals: int, *, pop_size: int = 20, n_obj: int = 2,
                 seed: int = 0):
    """NSGA-II for ``n_evals`` evaluations; returns ``(archs, F)`` in evaluation order."""
    _budget(n_evals, pop_size)
    problem = _Logged(space, objective, n_obj)
    algo = NSGA2(pop_size=pop_size, sampling=IntegerRandomSampling(),
                 crossover=SBX(prob=1.0, eta=3.0, vtype=float, repair=RoundingRepair()),
                 mutation=PM(prob=1.0, eta=3.0, vtype=float, repair=RoundingRepair()),
                 eliminate_duplicates=True)
    minimize(problem, algo, ("n_evals", n_evals), seed=int(seed), verbose=False)
    F = np.concatenate(problem.F)[:n_evals]
    return problem.archs[:n_evals], F


def random_search(objective, space: GPTSpace, n_evals: int, *, n_obj: int = 2, seed: int = 0):
    """Uniform random search for ``n_evals`` evaluations; returns ``(archs, F)``."""
    _budget(n_evals)
    rng = np.random.default_rng([int(seed), 77])
    archs = [space.sample(rng) for _ in range(n_evals)]
    F = np.asarray(objective(archs), dtype=float)
    if F.shape != (n_evals, n_obj):
        raise ValueError(f"objective returned shape {F.shape}, expected {(n_evals, n_obj)}")
    return archs, F


def hypervolume(F, ideal, nadir, ref: float = 1.1) -> float:
    """Hypervolume of the points ``F`` ([n, m], minimised) after scaling to ``(F - ideal) /
    (nadir - ideal)``, against the reference point ``(ref, ..., ref)``."""
    F = np.atleast_2d(np.asarray(F, dtype=float))
    ideal, nadir = np.asarray(ideal, dtype=float), np.asarray(nadir, dtype=float)
    if ideal.shape != (F.shape[1],) or nadir.shape != ideal.shape:
        raise ValueError(f"ideal and nadir must have {F.shape[1]} entries, got {ideal.shape}, {nadir.shape}")
    if not np.all(nadir > ideal):
        raise ValueError("every nadir coordinate must exceed the ideal's")
    Z = (F - ideal) / (nadir - ideal)
    Z = Z[np.all(Z < ref, axis=1)]
    if len(Z) == 0:
        return 0.0
    return float(HV(ref_point=np.full(F.shape[1], float(ref)))(Z))


def hypervolume_trace(F, ideal, nadir, at, ref: float = 1.1) -> np.ndarray:
    """Hypervolume of the first ``k`` points of a trajectory, for each ``k`` in ``at``."""
    return np.array([hypervolume(np.asarray(F)[:int(k)], ideal, nadir, ref) for k in at])
