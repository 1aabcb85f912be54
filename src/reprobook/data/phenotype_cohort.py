r"""A synthetic patient cohort for phenotype imputation: latent biology, omics with missing
modalities, and patient-phenotype edges, with the ground truth known.

Each patient :math:`p` has a latent biology :math:`z_p\sim N(0, I_{d_z})` and a latent that only
the phenotypes see, :math:`u_p\sim N(0, I_{d_u})`.

**Omics.** Modality :math:`k` has ``informative`` dimensions
:math:`x^k_{p,\mathrm{inf}} = s\,W_k z_p + \sigma\,\varepsilon` (:math:`W_k` with unit-variance
rows, :math:`s` = ``omics_signal``) and ``noise_dims`` pure-noise dimensions
:math:`\varepsilon\sim N(0, 1)`, in a random column order. Modality :math:`k` is missing for a
patient with probability ``missing[k]``, independently (missing completely at random); the rows of
absent patients are NaN. ``omics_signal = 0`` gives omics that are pure noise.

**Phenotypes.** :math:`M` binary phenotypes in ``n_clusters`` co-occurring clusters,

.. math:: \mathrm{logit}\,\Pr(y_{pm}=1) = c_m + a\,z_p^\top B_m + b\,u_p^\top V_m,

with :math:`B_m, V_m` a cluster direction plus a small phenotype-specific part (so phenotypes of
one cluster co-occur), :math:`a` = ``bio_weight``, :math:`b` = ``pheno_weight`` and :math:`c_m`
solved so that phenotype :math:`m`'s prevalence in the cohort is a target drawn uniformly from
``prevalence``.

**Observation.** Every positive :math:`(p, m)` is an edge, assigned independently to the test set
with probability ``test_frac``, to the validation set with probability ``valid_frac`` and to the
training set otherwise. Negatives are never observed (implicit feedback), as in a biobank where an
absent diagnosis code does not mean an absent condition.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..seeding import rng as _rng

__all__ = ["PhenotypeCohort", "make_cohort", "noise_omics", "modality_groups"]


@dataclass(frozen=True)
class PhenotypeCohort:
    """A drawn cohort. ``omics[k]`` is ``(P, D_k)`` float32 with NaN rows where ``present[:, k]``
    is False; ``train``/``valid``/``test`` are ``(E, 2)`` int64 arrays of (patient, phenotype)."""

    omics: tuple
    present: np.ndarray          # (P, K) bool: which modalities each patient has
    informative: tuple           # per modality, (D_k,) bool: which columns carry biology
    phenotypes: np.ndarray       # (P, M) bool: every true positive
    prob: np.ndarray             # (P, M) the true probabilities (the Bayes ranker)
    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray
    z: np.ndarray                # (P, d_z) latent biology
    cluster: np.ndarray          # (M,) cluster of each phenotype

    @property
    def n_patients(self) -> int:
        return int(self.phenotypes.shape[0])

    @property
    def n_phenotypes(self) -> int:
        return int(self.phenotypes.shape[1])

    @property
    def n_modalities(self) -> int:
        return len(self.omics)


def _positive_int(name, v, minimum=1):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {v!r}")
    return int(v)


def _solve_offsets(signal: np.ndarray, target: np.ndarray, iters: int = 60) -> np.ndarray:
    """The :math:`c_m` with mean sigmoid(c_m + signal[:, m]) = target[m], by bisection."""
    lo = np.full(signal.shape[1], -30.0)
    hi = np.full(signal.shape[1], 30.0)
    for _ in range(iters):
        mid = (lo + hi) / 2
        prev = (1 / (1 + np.exp(-(mid + signal)))).mean(0)
        lo = np.where(prev < target, mid, lo)
        hi = np.where(prev < target, hi, mid)
    return (lo + hi) / 2


def make_cohort(n_patients: int, n_phenotypes: int = 50, *, bio_dim: int = 8, pheno_dim: int = 4,
                n_clusters: int = 5, modalities=((120, 80), (60, 40)), feature_noise: float = 0.5,
                missing=(0.4, 0.3), omics_signal: float = 1.0, bio_weight: float = 1.5,
                pheno_weight: float = 1.0, prevalence=(0.05, 0.12), test_frac: float = 0.3,
                valid_frac: float = 0.1, seed: int = 0) -> PhenotypeCohort:
    """Draw a cohort (see the module docstring). ``modalities`` lists ``(informative, noise_dims)``
    per modality and ``missing`` the probability that each is absent."""
    P = _positive_int("n_patients", n_patients, 2)
    M = _positive_int("n_phenotypes", n_phenotypes, 2)
    dz = _positive_int("bio_dim", bio_dim)
    du = _positive_int("pheno_dim", pheno_dim)
    C = _positive_int("n_clusters", n_clusters)
    if C > M:
        raise ValueError(f"n_clusters ({C}) must be at most n_phenotypes ({M})")
    modalities = [tuple(m) for m in modalities]
    if not modalities or any(len(m) != 2 for m in modalities):
        raise ValueError(f"modalities must be a non-empty list of (informative, noise_dims) pairs, "
                         f"got {modalities!r}")
    for k, (inf, noi) in enumerate(modalities):
        _positive_int(f"modalities[{k}] informative dims", inf)
        _positive_int(f"modalities[{k}] noise dims", noi, 0)
    missing = [float(m) for m in missing]
    if len(missing) != len(modalities) or not all(0 <= m < 1 for m in missing):
        raise ValueError(f"missing must give one probability in [0, 1) per modality "
                         f"({len(modalities)}), got {missing!r}")
    lo_prev, hi_prev = (float(v) for v in prevalence)
    if not 0 < lo_prev <= hi_prev < 1:
        raise ValueError(f"prevalence must be (low, high) with 0 < low <= high < 1, got {prevalence!r}")
    if not (0 <= test_frac and 0 <= valid_frac and test_frac + valid_frac < 1):
        raise ValueError(f"test_frac and valid_frac must be >= 0 with a sum below 1, got "
                         f"{test_frac}, {valid_frac}")
    if feature_noise < 0 or omics_signal < 0 or bio_weight < 0 or pheno_weight < 0:
        raise ValueError("feature_noise, omics_signal, bio_weight and pheno_weight must be >= 0")

    g = _rng(seed, 35)
    z = g.standard_normal((P, dz))
    u = g.standard_normal((P, du))
    # phenotype loadings: a cluster direction (unit norm) plus a smaller phenotype-specific part
    cluster = np.sort(np.arange(M) % C)
    dir_b = g.standard_normal((C, dz))
    dir_b /= np.linalg.norm(dir_b, axis=1, keepdims=True)
    dir_v = g.standard_normal((C, du))
    dir_v /= np.linalg.norm(dir_v, axis=1, keepdims=True)
    B = dir_b[cluster] + 0.3 * g.standard_normal((M, dz)) / np.sqrt(dz)
    V = dir_v[cluster] + 0.3 * g.standard_normal((M, du)) / np.sqrt(du)
    signal = bio_weight * z @ B.T + pheno_weight * u @ V.T
    target = g.uniform(lo_prev, hi_prev, M)
    c = _solve_offsets(signal, target)
    prob = 1 / (1 + np.exp(-(c + signal)))
    Y = g.random((P, M)) < prob

    omics, informative = [], []
    present = np.zeros((P, len(modalities)), dtype=bool)
    for k, (inf, noi) in enumerate(modalities):
        W = g.standard_normal((inf, dz)) / np.sqrt(dz)
        x_inf = omics_signal * z @ W.T + feature_noise * g.standard_normal((P, inf))
        x = np.concatenate([x_inf, g.standard_normal((P, noi))], axis=1)
        order = g.permutation(inf + noi)
        x, is_inf = x[:, order], (order < inf)
        present[:, k] = g.random(P) >= missing[k]
        x[~present[:, k]] = np.nan
        omics.append(x.astype(np.float32))
        informative.append(is_inf)

    pp, mm = np.nonzero(Y)
    r = g.random(pp.size)
    edges = np.stack([pp, mm], 1).astype(np.int64)
    test = edges[r < test_frac]
    valid = edges[(r >= test_frac) & (r < test_frac + valid_frac)]
    train = edges[r >= test_frac + valid_frac]
    return PhenotypeCohort(omics=tuple(omics), present=present, informative=tuple(informative),
                           phenotypes=Y, prob=prob, train=train, valid=valid, test=test, z=z,
                           cluster=cluster)


def noise_omics(cohort: PhenotypeCohort, seed: int) -> PhenotypeCohort:
    """The same cohort with every omics value replaced by independent N(0, 1) noise (same shapes,
    same missing modalities): what a method sees when the measured biology carries nothing."""
    g = _rng(seed, 36)
    new = []
    for x, pres in zip(cohort.omics, cohort.present.T):
        y = g.standard_normal(x.shape).astype(np.float32)
        y[~pres] = np.nan
        new.append(y)
    return replace(cohort, omics=tuple(new),
                   informative=tuple(np.zeros_like(i) for i in cohort.informative))


def modality_groups(cohort: PhenotypeCohort) -> np.ndarray:
    """(P,) int: how many modalities each patient has (0 = none)."""
    return cohort.present.sum(1)
