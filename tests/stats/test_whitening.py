"""Unit tests of reprobook.stats.whitening."""
import numpy as np
import pytest

from reprobook.stats.whitening import ZCA, inverse_sqrt


def test_zca_whitens_exactly_and_is_symmetric():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 3)) @ np.array([[2.0, 0.5, 0.0], [0.0, 1.0, 0.3], [0.0, 0.0, 0.2]]) + 4
    z = ZCA(x)
    w = z(x)
    assert np.allclose(np.cov(w.T), np.eye(3), atol=1e-10)
    assert np.allclose(z.matrix, z.matrix.T)
    m = inverse_sqrt(z.cov)
    assert np.allclose(m @ z.cov @ m, np.eye(3), atol=1e-10)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="positive definite"):
        inverse_sqrt(np.array([[1.0, 1.0], [1.0, 1.0]]))
    with pytest.raises(ValueError, match="square"):
        inverse_sqrt(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        ZCA(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"\(n, 2\)"):
        ZCA(np.random.default_rng(0).normal(size=(10, 2)))(np.zeros((3, 3)))
