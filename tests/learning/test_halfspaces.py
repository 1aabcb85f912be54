"""Unit tests of reprobook.learning.halfspaces."""
import math

import numpy as np
import pytest
from scipy import stats

from reprobook.learning.halfspaces import (
    angle_between, bivariate_normal_cdf, chow_angle_bound, chow_estimate, gaussian_disagreement,
    train_chow, unit,
)


def test_angle_between_is_accurate_for_tiny_angles():
    u = np.array([1.0, 0.0, 0.0])
    for a in (1e-9, 1e-4, 0.3, math.pi / 2, 3.0):
        v = np.array([math.cos(a), math.sin(a), 0.0])
        assert angle_between(u, 5 * v) == pytest.approx(a, rel=1e-9)


def test_unit_rejects_bad_directions():
    with pytest.raises(ValueError, match="non-zero"):
        unit(np.zeros(3))
    with pytest.raises(ValueError, match="1-D"):
        unit(np.ones((2, 2)))
    with pytest.raises(ValueError, match="same dimension"):
        angle_between(np.ones(2), np.ones(3))


def test_bivariate_cdf_matches_scipy_including_zero_limits():
    rng = np.random.default_rng(0)
    for _ in range(300):
        h, k = rng.normal(0, 1.5, 2)
        r = rng.uniform(-0.999, 0.999)
        h = 0.0 if rng.random() < 0.2 else h
        k = 0.0 if rng.random() < 0.2 else k
        ref = stats.multivariate_normal(mean=[0, 0], cov=[[1, r], [r, 1]]).cdf([h, k])
        assert bivariate_normal_cdf(h, k, r) == pytest.approx(ref, abs=1e-6)


def test_bivariate_cdf_special_cases():
    for r in (-0.7, 0.0, 0.5):                                  # Sheppard
        assert bivariate_normal_cdf(0, 0, r) == pytest.approx(0.25 + math.asin(r) / (2 * math.pi))
    assert bivariate_normal_cdf(0.3, -0.2, 1.0) == pytest.approx(stats.norm.cdf(-0.2))
    assert bivariate_normal_cdf(0.3, -0.2, -1.0) == pytest.approx(stats.norm.cdf(0.3)
                                                                  - stats.norm.cdf(0.2))
    assert bivariate_normal_cdf(-0.3, -0.2, -1.0) == 0.0
    assert bivariate_normal_cdf(0.3, 0.2, -1.0) == pytest.approx(stats.norm.cdf(0.3)
                                                                 - stats.norm.cdf(-0.2))
    with pytest.raises(ValueError, match="correlation"):
        bivariate_normal_cdf(0, 0, 1.5)


def test_centred_disagreement_is_the_angle_over_pi():
    rng = np.random.default_rng(1)
    w1 = unit(rng.normal(size=6))
    for eps in (1e-5, 1e-2, 0.5):
        w2 = unit(w1 + eps * rng.normal(size=6))
        assert gaussian_disagreement(w1, w2, np.zeros(6), np.eye(6)) == pytest.approx(
            angle_between(w1, w2) / math.pi, rel=1e-7)


def test_disagreement_against_monte_carlo():
    rng = np.random.default_rng(2)
    for _ in range(3):
        d = 4
        w1, w2 = unit(rng.normal(size=d)), unit(rng.normal(size=d))
        mean, a = rng.normal(size=d), rng.normal(size=(d, d))
        cov = a @ a.T
        x = rng.multivariate_normal(mean, cov, size=400_000)
        mc = np.mean(np.sign(x @ w1) != np.sign(x @ w2))
        assert gaussian_disagreement(w1, w2, mean, cov) == pytest.approx(mc, abs=4e-3)


def test_degenerate_components():
    w1, w2 = np.array([1.0, 0.0]), unit(np.array([1.0, 0.5]))
    p = np.array([-0.1, 1.0])                     # w1.p < 0 < w2.p: a misclassified point mass
    assert gaussian_disagreement(w1, w2, p, np.zeros((2, 2))) == 1.0
    assert gaussian_disagreement(w1, w2, -p, np.zeros((2, 2))) == 1.0
    assert gaussian_disagreement(w1, w2, np.array([1.0, 0.0]), np.zeros((2, 2))) == 0.0
    # flat along w1: u = mean_u fixed, v Gaussian
    cov = np.diag([0.0, 1.0])
    mean = np.array([0.3, 0.0])
    x = mean + np.random.default_rng(3).normal(size=(400_000, 2)) @ np.sqrt(cov)
    mc = np.mean(np.sign(x @ w1) != np.sign(x @ w2))
    assert gaussian_disagreement(w1, w2, mean, cov) == pytest.approx(mc, abs=3e-3)
    with pytest.raises(ValueError, match="boundary"):
        gaussian_disagreement(w1, w2, np.zeros(2), np.zeros((2, 2)))


def test_chow_estimate_and_training_are_consistent():
    rng = np.random.default_rng(4)
    w = unit(np.array([1.0, -2.0, 0.5]))
    x = rng.normal(size=(50_000, 3))
    y = np.sign(x @ w)
    assert angle_between(chow_estimate(x, y), w) < 0.05
    a = train_chow(w, 30_000, np.random.default_rng(5), chunk=7_000)
    b = train_chow(w, 30_000, np.random.default_rng(5), chunk=7_000)
    assert np.array_equal(a, b) and angle_between(a, w) < 0.05
    with pytest.raises(ValueError, match="labels"):
        chow_estimate(x, y * 2)


def test_angle_bound_covers_at_its_level():
    d, n, delta = 6, 2_000, 0.2
    w = unit(np.ones(d))
    theta = chow_angle_bound(n, d, delta)
    angles = [angle_between(train_chow(w, n, np.random.default_rng(100 + i)), w)
              for i in range(300)]
    assert np.mean(np.array(angles) <= theta) >= 1 - delta
    assert chow_angle_bound(4 * n, d, delta) < theta
    with pytest.raises(ValueError, match="too small"):
        chow_angle_bound(3, 2, 0.001)
