"""Unit tests of reprobook.learning.tds: the band lemma, exact completeness, the baselines."""
import math

import numpy as np
import pytest
from scipy import stats

from reprobook.learning.halfspaces import angle_between, unit
from reprobook.learning.tds import (
    AlwaysAccept, BoundaryProximityTester, MomentTester, band_mass_spherical,
)


def test_band_mass_spherical_against_monte_carlo():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(400_000, 7))
    u1 = np.abs(z[:, 0]) / np.linalg.norm(z, axis=1)
    for s in (0.01, 0.2, 0.7):
        assert band_mass_spherical(s, 7) == pytest.approx(np.mean(u1 <= s), abs=3e-3)
    assert band_mass_spherical(1.0, 7) == 1.0 and band_mass_spherical(0.5, 1) == 0.0


def test_every_disagreement_lies_in_the_band():
    # the lemma behind soundness: sign<w_hat, x> != sign<w, x> and angle <= radius => in band
    rng = np.random.default_rng(1)
    d = 5
    for _ in range(20):
        w_hat = unit(rng.normal(size=d))
        w = unit(w_hat + 0.05 * rng.normal(size=d))
        tester = BoundaryProximityTester(w_hat, angle_between(w_hat, w), 0.05, 0.01)
        x = rng.standard_t(2, size=(20_000, d)) * rng.exponential(size=(20_000, 1))
        disagree = np.sign(x @ w_hat) != np.sign(x @ w)
        assert disagree.any()
        assert tester.in_band(x)[disagree].all()
    # a thinner band misses disagreements
    thin = BoundaryProximityTester(w_hat, angle_between(w_hat, w) / 10, 0.05, 0.01)
    assert not thin.in_band(x)[disagree].all()


def test_exact_acceptance_probability_matches_simulation():
    d, m = 4, 400
    tester = BoundaryProximityTester(unit(np.ones(d)), 0.06, 0.15, 0.05)
    p = band_mass_spherical(math.sin(0.06), d)
    exact = tester.acceptance_probability(p, m)
    assert 0.05 < exact < 0.95                      # a non-trivial case
    rng = np.random.default_rng(2)
    acc = np.mean([tester.accepts(rng.normal(size=(m, d))) for _ in range(3000)])
    assert acc == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 3000))


def test_moment_tester_level_and_power():
    d, m, delta = 3, 2_000, 0.05
    tester = MomentTester(d, delta)
    assert tester.n_statistics == 3 + 6
    rng = np.random.default_rng(3)
    rejections = np.mean([not tester.accepts(rng.normal(size=(m, d))) for _ in range(1000)])
    assert rejections <= delta + 3 * math.sqrt(delta / 1000)
    z = tester.statistics(rng.normal(size=(200_000, d)))
    assert np.abs(z).max() < 5
    assert not tester.accepts(1.2 * rng.normal(size=(m, d)))
    assert not tester.accepts(rng.normal(size=(m, d)) + 0.2)


def test_always_accept_and_bad_inputs():
    assert AlwaysAccept().accepts(np.zeros((3, 2)))
    tester = BoundaryProximityTester(np.ones(3), 0.1, 0.05, 0.01)
    with pytest.raises(ValueError, match="dimension"):
        tester.accepts(np.zeros((5, 2)))
    with pytest.raises(ValueError, match="non-finite"):
        tester.accepts(np.full((5, 3), np.nan))
    with pytest.raises(ValueError, match="radius"):
        BoundaryProximityTester(np.ones(3), 2.0, 0.05, 0.01)
    with pytest.raises(ValueError, match="delta"):
        MomentTester(3, 0.0)
    with pytest.raises(ValueError, match="band_mass"):
        tester.acceptance_probability(1.5, 10)
