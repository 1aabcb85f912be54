"""Log-log slopes."""
import numpy as np
import pytest

from reprobook.stats.power_law import loglog_slope


def test_recovers_exponents_row_by_row():
    x = np.array([2.0, 4.0, 8.0, 16.0])
    y = np.stack([3 * x ** -1.0, 0.5 * x ** 0.5, np.ones(4)])
    assert np.allclose(loglog_slope(x, y), [-1.0, 0.5, 0.0])
    assert float(loglog_slope(x, 7 * x ** 2)) == pytest.approx(2.0)


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="positive"):
        loglog_slope([1, 2], [1.0, 0.0])
    with pytest.raises(ValueError, match="distinct"):
        loglog_slope([2, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match="last axis"):
        loglog_slope([1, 2, 3], [1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        loglog_slope([1, 2], [1.0, np.nan])
