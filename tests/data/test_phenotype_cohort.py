import numpy as np
import pytest

from reprobook.data.phenotype_cohort import make_cohort, modality_groups, noise_omics

SMALL = dict(modalities=((12, 8), (6, 4)), seed=3)


def test_shapes_missingness_and_split_partition_the_positives():
    c = make_cohort(500, 20, **SMALL)
    assert [x.shape for x in c.omics] == [(500, 20), (500, 10)]
    for x, pres in zip(c.omics, c.present.T):
        assert np.isnan(x[~pres]).all() and not np.isnan(x[pres]).any()
    # missing at the requested rates (0.4, 0.3), independently
    assert abs((~c.present[:, 0]).mean() - 0.4) < 0.07
    assert abs((~c.present[:, 1]).mean() - 0.3) < 0.07
    assert abs((modality_groups(c) == 0).mean() - 0.12) < 0.05
    edges = np.concatenate([c.train, c.valid, c.test])
    assert len(np.unique(edges, axis=0)) == len(edges) == c.phenotypes.sum()
    assert c.phenotypes[edges[:, 0], edges[:, 1]].all()
    assert abs(len(c.test) / len(edges) - 0.3) < 0.06


def test_prevalence_is_calibrated_and_phenotypes_depend_on_biology():
    c = make_cohort(3000, 10, prevalence=(0.05, 0.12), **SMALL)
    prev = c.prob.mean(0)
    assert (prev > 0.049).all() and (prev < 0.121).all()
    # the latent biology predicts the phenotypes: a phenotype's logit correlates with z
    logit = np.log(c.prob / (1 - c.prob))
    r = max(abs(np.corrcoef(c.z[:, j], logit[:, 0])[0, 1]) for j in range(c.z.shape[1]))
    assert r > 0.2


def test_informative_columns_carry_the_biology_and_noise_omics_do_not():
    c = make_cohort(800, 10, **SMALL)
    x, pres, inf = c.omics[0], c.present[:, 0], c.informative[0]
    z = c.z[pres]
    # least-squares R^2 of each column on z: high for informative columns, ~0 for noise columns
    def r2(col):
        y = col - col.mean()
        beta, *_ = np.linalg.lstsq(z, y, rcond=None)
        return 1 - ((y - z @ beta) ** 2).sum() / (y ** 2).sum()
    xs = x[pres]
    assert np.mean([r2(xs[:, j]) for j in np.nonzero(inf)[0]]) > 0.6
    assert np.mean([r2(xs[:, j]) for j in np.nonzero(~inf)[0]]) < 0.05
    n = noise_omics(c, 0)
    assert np.array_equal(np.isnan(n.omics[0]), np.isnan(c.omics[0]))
    assert np.mean([r2(n.omics[0][pres][:, j]) for j in range(x.shape[1])]) < 0.05
    assert np.array_equal(n.phenotypes, c.phenotypes) and np.array_equal(n.test, c.test)


def test_zero_signal_gives_pure_noise_and_seed_is_deterministic():
    a = make_cohort(200, 10, omics_signal=0.0, **SMALL)
    b = make_cohort(200, 10, omics_signal=0.0, **SMALL)
    assert np.array_equal(a.test, b.test)
    assert np.allclose(np.nan_to_num(a.omics[0]), np.nan_to_num(b.omics[0]))


@pytest.mark.parametrize("kw, msg", [
    (dict(n_patients=1), "n_patients"),
    (dict(n_clusters=30), "n_clusters"),
    (dict(missing=(0.4,)), "missing"),
    (dict(modalities=((0, 3),)), "informative"),
    (dict(prevalence=(0.2, 0.1)), "prevalence"),
    (dict(test_frac=0.7, valid_frac=0.4), "test_frac"),
])
def test_bad_input_is_named(kw, msg):
    args = dict(n_patients=50, n_phenotypes=20, **SMALL)
    args.update(kw)
    n = args.pop("n_patients")
    with pytest.raises(ValueError, match=msg):
        make_cohort(n, **args)
