"""Rank-aware condition numbers."""
import numpy as np
import pytest
import torch

from reprobook.linalg.spectrum import condition_number, nonzero_eigenvalues, numerical_rank


def test_rank_and_condition_number_ignore_zeros():
    ev = np.array([1e-17, 4.0, 0.5, -1e-16, 2.0])
    assert numerical_rank(ev) == 3
    np.testing.assert_array_equal(nonzero_eigenvalues(ev), [4.0, 2.0, 0.5])
    assert condition_number(ev) == 8.0
    assert condition_number(torch.tensor([3.0, 1.0], dtype=torch.float64)) == 3.0


def test_threshold_and_degenerate_cases():
    assert numerical_rank([1.0, 1e-9], rtol=1e-8) == 1
    assert numerical_rank([1.0, 1e-9], rtol=1e-10) == 2
    assert numerical_rank([0.0, 0.0]) == 0 and condition_number([0.0]) == float("inf")


def test_bad_input():
    with pytest.raises(ValueError, match="non-empty 1-d"):
        numerical_rank(np.ones((2, 2)))
    with pytest.raises(ValueError, match="NaN"):
        condition_number([1.0, np.nan])
    with pytest.raises(ValueError, match="rtol"):
        numerical_rank([1.0], rtol=2.0)
