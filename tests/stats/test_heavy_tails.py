"""Unit tests of reprobook.stats.heavy_tails."""
import math

import numpy as np
import pytest
import torch
from scipy import stats

from reprobook.stats.heavy_tails import (
    NoiseModel, harmonic_scales, pareto_clipped_second_moment, pareto_scale, pareto_tail,
    sample_pareto_radius, sample_sphere_coordinate,
)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_pareto_scale_gives_the_second_moment():
    xm = pareto_scale(2.2, 100.0)
    assert 2.2 * xm**2 / 0.2 == pytest.approx(100.0)


def test_radius_sampler_matches_the_pareto_tail():
    xm = pareto_scale(2.5, 4.0)
    r = sample_pareto_radius(200_000, 2.5, xm, np.random.default_rng(0))
    assert r.min() >= xm
    ks = stats.kstest(r, lambda x: 1 - pareto_tail(x, 2.5, xm))
    assert ks.pvalue > 1e-3


def test_clipped_second_moment_closed_form_against_monte_carlo():
    xm = pareto_scale(2.2, 10.0)
    r = sample_pareto_radius(2_000_000, 2.2, xm, np.random.default_rng(1))
    for c in (0.5 * xm, 2 * xm, 20 * xm):
        mc = np.minimum(r, c) ** 2
        assert pareto_clipped_second_moment(c, 2.2, xm) == pytest.approx(mc.mean(),
                                                                           abs=4 * mc.std() / 1414 + 1e-12)
    assert pareto_clipped_second_moment(np.inf, 2.2, xm) == pytest.approx(10.0)
    assert pareto_clipped_second_moment(0.3 * xm, 2.2, xm) == pytest.approx((0.3 * xm) ** 2)


def test_sphere_coordinate_law():
    u = sample_sphere_coordinate(200_000, 7, np.random.default_rng(2))
    assert np.abs(u).max() <= 1
    assert u.var() == pytest.approx(1 / 7, rel=0.02)
    assert set(np.unique(sample_sphere_coordinate(50, 1, np.random.default_rng(3)))) <= {-1.0, 1.0}


def test_harmonic_scales_trace_and_norm():
    s = harmonic_scales(100)
    assert np.sum(s**2) == pytest.approx(100.0)
    assert np.max(s**2) == pytest.approx(100 / np.sum(1 / np.arange(1, 101)))


def test_samples_shape_dtype_and_determinism():
    noise = NoiseModel("radial-pareto", 6)
    a = noise.sample(50, gen(5), dtype=torch.float32)
    b = noise.sample(50, gen(5), dtype=torch.float32)
    assert a.shape == (50, 6) and a.dtype == torch.float32
    assert torch.equal(a, b)
    assert not torch.equal(a, noise.sample(50, gen(6), dtype=torch.float32))


def test_radial_noise_radius_and_direction():
    d = 5
    noise = NoiseModel("radial-pareto", d, alpha=2.5)
    x = noise.sample(100_000, gen(7)).numpy()
    radius = np.linalg.norm(x, axis=1)
    ks = stats.kstest(radius, lambda r: 1 - pareto_tail(r, 2.5, noise.radial_scale))
    assert ks.pvalue > 1e-3
    u = x / radius[:, None]
    assert np.abs(u.mean(axis=0)).max() < 0.02                   # uniform direction
    assert np.abs(u.T @ u / len(u) - np.eye(d) / d).max() < 0.01


def test_gaussian_covariance_follows_scales():
    scales = (1.0, 2.0, 0.5)
    x = NoiseModel("gaussian", 3, scales=scales).sample(200_000, gen(8)).numpy()
    assert np.cov(x.T) == pytest.approx(np.diag(np.square(scales)), abs=0.03)


def test_clipped_trace_anisotropic_against_samples():
    d = 8
    noise = NoiseModel("radial-pareto", d, scales=tuple(harmonic_scales(d)))
    level = 3.0
    x = noise.sample(400_000, gen(9)).numpy()
    brute = np.minimum(np.sum(x**2, axis=1), level**2)
    semi = noise.clipped_trace(level, np.random.default_rng(10), n_directions=400_000)
    assert semi == pytest.approx(brute.mean(), abs=4 * brute.std() / math.sqrt(len(brute)) + 5e-3)
    assert noise.clipped_trace(math.inf) == pytest.approx(d)
    iso = NoiseModel("radial-pareto", d)
    assert iso.clipped_trace(level) == pytest.approx(
        float(pareto_clipped_second_moment(level, 2.2, iso.radial_scale)))


@pytest.mark.parametrize("kwargs, match", [
    (dict(kind="cauchy", dim=3), "unknown noise kind"),
    (dict(kind="radial-pareto", dim=3, alpha=2.0), "alpha"),
    (dict(kind="radial-pareto", dim=0), "dim"),
    (dict(kind="gaussian", dim=3, scales=(1.0, 2.0)), "scales"),
    (dict(kind="gaussian", dim=2, scales=(1.0, -1.0)), "scales"),
])
def test_bad_models_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NoiseModel(**kwargs)


def test_bad_sampling_arguments():
    noise = NoiseModel("gaussian", 2)
    with pytest.raises(TypeError, match="torch.Generator"):
        noise.sample(3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="positive int"):
        noise.sample(0, gen())
    with pytest.raises(ValueError, match="rng"):
        NoiseModel("gaussian", 2).clipped_trace(1.0)
