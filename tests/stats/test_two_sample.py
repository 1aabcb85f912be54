"""Two-sample distances: zero for one law, closed forms for shifted Gaussians, mode coverage."""
import numpy as np
import pytest
import torch

from reprobook.stats.two_sample import (energy_distance, frechet_distance, mmd2, mode_coverage,
                                        sliced_w2)


def _g(seed):
    return torch.Generator().manual_seed(seed)


def test_energy_distance_separates_laws():
    a = torch.randn(1500, 2, generator=_g(0), dtype=torch.float64)
    b = torch.randn(1500, 2, generator=_g(1), dtype=torch.float64)
    assert abs(energy_distance(a, b)) < 0.01
    assert energy_distance(a, b + 1.0) > 0.5


def test_sliced_w2_of_a_shift():
    a = torch.randn(500, 3, generator=_g(0), dtype=torch.float64)
    m = torch.tensor([1.0, 2.0, -2.0], dtype=torch.float64)
    # W2 of the projected shift u.m is |u.m|; E (u.m)^2 = |m|^2 / d
    assert abs(sliced_w2(a, a + m, 400, _g(1)) - float(m.norm()) / 3 ** 0.5) < 0.15
    with pytest.raises(ValueError, match="equal size"):
        sliced_w2(a, a[:10], 5, _g(1))


def test_frechet_distance_closed_form():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(20000, 2))
    b = rng.normal(size=(20000, 2)) * 2 + 1
    # |m|^2 + tr(I + 4I - 2 * 2I) = 2 + 2
    assert abs(frechet_distance(a, b) - 4.0) < 0.15


def test_mmd_and_coverage():
    a = torch.randn(500, 2, generator=_g(0), dtype=torch.float64)
    assert mmd2(a, a + 2, 1.0) > 10 * abs(mmd2(a, torch.randn(500, 2, generator=_g(3),
                                                               dtype=torch.float64), 1.0))
    means = np.array([[0.0, 0.0], [5.0, 0.0]])
    x = np.r_[np.zeros((95, 2)), np.full((5, 2), [5.0, 0.0]) + 0.01]
    k, rel = mode_coverage(x, means, [0.5, 0.5], radius=0.5, min_share=0.2)
    assert k == 1 and np.allclose(rel, [1.9, 0.1])
    with pytest.raises(ValueError):
        energy_distance(np.zeros((3, 2)), np.zeros((3, 3)))
