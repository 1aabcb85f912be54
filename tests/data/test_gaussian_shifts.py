"""Unit tests of reprobook.data.gaussian_shifts: sampling, moments and exact errors."""
import numpy as np
import pytest

from reprobook.data.gaussian_shifts import (
    Component, Marginal, adversarial_shifts, benign_shifts, disagreement_plane,
)
from reprobook.learning.halfspaces import angle_between, unit


def _pair(d=4, angle=0.15, seed=0):
    rng = np.random.default_rng(seed)
    w_star = unit(rng.normal(size=d))
    v = unit(rng.normal(size=d) - (rng.normal(size=d) @ w_star) * w_star)
    v = unit(v - (v @ w_star) * w_star)
    return unit(np.cos(angle) * w_star + np.sin(angle) * v), w_star


def test_exact_errors_match_monte_carlo_on_every_family():
    w_hat, w_star = _pair()
    rng = np.random.default_rng(1)
    for shift in benign_shifts(w_star) + adversarial_shifts(w_hat, w_star, thickness=0.01):
        x = shift.sample(300_000, rng)
        mc = np.mean(np.sign(x @ w_hat) != np.sign(x @ w_star))
        assert shift.disagreement(w_hat, w_star) == pytest.approx(mc, abs=4e-3), shift.name


def test_moments_and_matched_wedge():
    w_hat, w_star = _pair(d=3, angle=0.05)
    rng = np.random.default_rng(2)
    for shift in benign_shifts(w_star)[:3] + adversarial_shifts(w_hat, w_star):
        mean, cov = shift.moments()
        x = shift.sample(400_000, rng)
        assert x.mean(axis=0) == pytest.approx(mean, abs=0.02), shift.name
        assert np.cov(x.T) == pytest.approx(cov, abs=0.04), shift.name
    matched = [s for s in adversarial_shifts(w_hat, w_star) if "matched" in s.name][0]
    mean, cov = matched.moments()
    assert np.abs(mean).max() < 1e-12 and np.abs(cov - np.eye(3)).max() < 1e-12


def test_wedge_points_are_misclassified_and_benign_shifts_are_easy():
    w_hat, w_star = _pair(d=5, angle=0.01)
    e1, e2, alpha = disagreement_plane(w_hat, w_star)
    assert alpha == pytest.approx(angle_between(w_hat, w_star))
    assert w_star @ (np.cos(alpha) * e1 + np.sin(alpha) * e2) == pytest.approx(1.0)
    for shift in adversarial_shifts(w_hat, w_star):
        if shift.name.startswith("wedge"):
            q = 0.05 if "0.05" in shift.name else 0.2
            assert shift.disagreement(w_hat, w_star) >= q
    for shift in benign_shifts(w_star):
        assert shift.disagreement(w_hat, w_star) < 0.01


def test_samples_are_reproducible_and_checked():
    m = Marginal("t", [Component(1.0, np.zeros(2), np.eye(2), kind="student")])
    a = m.sample(10, np.random.default_rng(3))
    assert np.array_equal(a, m.sample(10, np.random.default_rng(3))) and a.shape == (10, 2)
    with pytest.raises(ValueError, match="centred"):
        Component(1.0, np.ones(2), np.eye(2), kind="shell")
    with pytest.raises(ValueError, match="kind"):
        Component(1.0, np.zeros(2), np.eye(2), kind="cauchy")
    with pytest.raises(ValueError, match="positive int"):
        m.sample(0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="moment matching"):
        adversarial_shifts(*_pair(), radius=3.0)
    with pytest.raises(ValueError, match="coincide"):
        disagreement_plane(np.ones(3), np.ones(3))
