"""TuRBO region: expansion after successes, shrinking after failures, restart, clipping."""
import pytest
import torch

from reprobook.bo.trust_region import TrustRegion


def test_expand_shrink_restart():
    tr = TrustRegion(2, length=0.4, success_tol=2, failure_tol=2)
    tr.best_value = 0.0
    tr.update(torch.tensor([1.0]))
    tr.update(torch.tensor([2.0]))
    assert tr.length == pytest.approx(0.8)
    for _ in range(2):
        tr.update(torch.tensor([0.0]))
    assert tr.length == pytest.approx(0.4)
    for _ in range(2 * 10):
        tr.update(torch.tensor([0.0]))
    assert tr.restarts >= 1 and tr.length_min <= tr.length <= 0.4


def test_bounds_are_clipped_to_cube():
    tr = TrustRegion(3, length=0.8)
    lo, hi = tr.bounds(torch.tensor([0.1, 0.5, 0.95], dtype=torch.float64))
    assert (lo >= 0).all() and (hi <= 1).all()
    assert torch.allclose(hi - lo, torch.tensor([0.5, 0.8, 0.45], dtype=torch.float64))


def test_bad_input():
    with pytest.raises(ValueError, match="dim"):
        TrustRegion(0)
    with pytest.raises(ValueError, match="length"):
        TrustRegion(2, length=3.0)
    with pytest.raises(ValueError, match="center"):
        TrustRegion(2).bounds(torch.zeros(3))
