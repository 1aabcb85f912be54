import numpy as np
import pytest

from reprobook import rng
from reprobook.stats.optimal_design import g_optimal_design, max_leverage


def test_design_reaches_the_kiefer_wolfowitz_bound():
    x = rng(0, 0).dirichlet(np.full(4, 0.3), size=500)
    rho = g_optimal_design(x, tol=0.02)
    assert rho.sum() == pytest.approx(1.0)
    assert max_leverage(x, rho) <= 4 * 1.02 + 1e-9
    # no design does better than d (Kiefer-Wolfowitz), and the uniform one does worse here
    assert max_leverage(x, np.ones(len(x))) > 4.5


def test_orthonormal_points_need_equal_weights():
    x = np.eye(3)
    rho = g_optimal_design(np.concatenate([x, 0.5 * x]), tol=1e-3)
    assert max_leverage(np.concatenate([x, 0.5 * x]), rho) == pytest.approx(3.0, rel=2e-3)
    assert rho[:3].sum() > 0.99


def test_bad_points():
    with pytest.raises(ValueError, match="span"):
        g_optimal_design(np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]))
    with pytest.raises(ValueError, match="shape"):
        g_optimal_design(np.ones(5))
