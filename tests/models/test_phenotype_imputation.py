import numpy as np
import pytest
import torch

from reprobook.data.phenotype_cohort import make_cohort
from reprobook.models.phenotype_imputation import (METHODS, TrainConfig, factor_edges, fit_method,
                                                   hit_at, info_nce, known_matrix, mrr, ranks,
                                                   residual_quantize, standardize)


def test_ranks_hit_and_mrr_by_hand():
    scores = np.array([[0.9, 0.5, 0.1, 0.7],
                       [0.2, 0.2, 0.2, 0.8]])
    known = np.array([[True, False, False, False],     # phenotype 0 is a training edge of patient 0
                      [False, False, False, False]])
    targets = np.array([[0, 1], [0, 2], [1, 0]])
    r = ranks(scores, targets, known)
    # patient 0: candidates 1, 2, 3 -> 0.5 ranks 2nd (0.7 above), 0.1 ranks 3rd
    # patient 1: 0.2 ties with two others (half each) below 0.8 -> 1 + 1 + 1
    assert np.allclose(r, [2, 3, 3])
    assert hit_at(r, 2) == pytest.approx(1 / 3)
    assert mrr(r) == pytest.approx((1 / 2 + 1 / 3 + 1 / 3) / 3)
    with pytest.raises(ValueError, match="same shape"):
        ranks(scores, targets, known[:1])


def test_residual_quantization_error_falls_with_each_level():
    x = np.random.default_rng(0).standard_normal((300, 10))
    rq = residual_quantize(x, levels=3, codebook_size=8, seed=0)
    assert rq.codes.shape == (300, 3) and rq.codes.max() < 8
    assert np.all(np.diff(rq.errors) < 0)
    # reconstruction from the codes reproduces the final residual
    recon = sum(book[rq.codes[:, l]] for l, book in enumerate(rq.codebooks))
    assert np.allclose(((x - recon) ** 2).sum(1).mean(), rq.errors[-1])
    with pytest.raises(ValueError, match="codebook_size"):
        residual_quantize(x[:4], 1, 8, 0)


def test_missing_modality_means_no_factor_edges():
    c = make_cohort(120, 10, modalities=((6, 4), (4, 2)), seed=0)
    edges, n_factors, errors = factor_edges(c.omics, c.present, levels=2, codebook_size=4, seed=0)
    assert n_factors == 2 * 2 * 4
    per_patient = np.bincount(edges[:, 0], minlength=120)
    assert np.array_equal(per_patient, 2 * c.present.sum(1))     # levels edges per present modality
    mod = edges[:, 1] // 8
    assert c.present[edges[:, 0], mod].all()
    assert len(errors) == 2 and all(e[2] < e[1] < e[0] for e in errors)
    x = standardize(c.omics[0], c.present[:, 0])
    assert np.allclose(x[~c.present[:, 0]], 0) and np.allclose(x[c.present[:, 0]].mean(0), 0)


def test_info_nce_prefers_matching_rows():
    g = torch.Generator().manual_seed(0)
    t = torch.randn(16, 8, generator=g)
    matched = info_nce(t + 0.01 * torch.randn(16, 8, generator=g), t, 0.2)
    shuffled = info_nce(t[torch.randperm(16, generator=g)], t, 0.2)
    assert matched < 0.5 and shuffled > 2.0
    with pytest.raises(ValueError, match="same"):
        info_nce(t, t[:3], 0.2)


def test_popularity_ranks_by_training_prevalence():
    c = make_cohort(200, 12, modalities=((12, 4), (6, 2)), seed=1)
    fit = fit_method("popularity", c, TrainConfig(), seed=0)
    deg = np.bincount(c.train[:, 1], minlength=12)
    assert np.array_equal(fit.scores[0], deg) and np.array_equal(fit.scores[-1], deg)


@pytest.mark.parametrize("method", [m for m in METHODS if m != "popularity"])
def test_every_trained_method_beats_chance_on_a_small_cohort(method):
    c = make_cohort(200, 12, modalities=((12, 4), (6, 2)), seed=1)
    cfg = TrainConfig(dim=8, layers=2, epochs=15, lr=0.05, codebook=4, kd_batch=64)
    fit = fit_method(method, c, cfg, seed=0)
    assert fit.scores.shape == (200, 12) and np.isfinite(fit.scores).all()
    known = known_matrix(np.concatenate([c.train, c.valid]), 200, 12)
    r = ranks(fit.scores, c.test, known)
    n_cand = (~known[c.test[:, 0]]).sum(1)
    rng = np.random.default_rng(0)
    chance = np.mean([mrr(ranks(rng.random((200, 12)), c.test, known)) for _ in range(20)])
    assert mrr(r) > chance + 0.02
    assert (r <= n_cand).all()
    if method.startswith("mpi") and method != "mpi-sum":
        assert len(fit.history["kd"]) == 15


def test_distillation_pulls_the_views_together_and_is_deterministic():
    c = make_cohort(200, 12, modalities=((12, 4), (6, 2)), seed=2)
    cfg = TrainConfig(dim=8, layers=2, epochs=20, lr=0.05, codebook=4, kd_batch=64, mu=1.0)
    a = fit_method("mpi", c, cfg, seed=0)
    assert np.mean(a.history["kd"][-5:]) < np.mean(a.history["kd"][:5])
    b = fit_method("mpi", c, cfg, seed=0)
    assert np.array_equal(a.scores, b.scores)


def test_bad_options_are_named():
    c = make_cohort(60, 10, modalities=((6, 4), (4, 2)), seed=0)
    with pytest.raises(ValueError, match="unknown method"):
        fit_method("mpi-deluxe", c, TrainConfig(), 0)
    with pytest.raises(ValueError, match="epochs"):
        TrainConfig(epochs=0)
    with pytest.raises(ValueError, match="tau"):
        TrainConfig(tau=0.0)
