import numpy as np
import pytest

from reprobook.data.elliptic_pde import (darcy_coefficient, darcy_fields, darcy_solve, grid,
                                         poisson_coefficients, poisson_fd, poisson_solution,
                                         poisson_source)


def _laplacian_periodic_free(u, n):
    """5-point -Lap on the interior nodes (h = 1/n) of a (count, n, n) array with u = 0 at k = n."""
    p = np.pad(u, ((0, 0), (0, 1), (0, 1)))
    c = p[:, 1:-1, 1:-1]
    return (4 * c - p[:, 2:, 1:-1] - p[:, :-2, 1:-1] - p[:, 1:-1, 2:] - p[:, 1:-1, :-2]) * n ** 2


def test_poisson_series_solves_the_pde_spectrally():
    # the series satisfies -Lap u = f mode by mode: check with a fine FD Laplacian (O(h^2) error)
    a = poisson_coefficients(2, 4, np.random.default_rng(0))
    errs = []
    for n in (32, 64):
        u, f = poisson_solution(a, n), poisson_source(a, n)
        r = _laplacian_periodic_free(u, n) - f[:, 1:, 1:]
        errs.append(np.abs(r).max() / np.abs(f).max())
    assert errs[1] < errs[0] / 3.5          # second order
    assert errs[1] < 1e-2


def test_poisson_boundary_and_nesting():
    a = poisson_coefficients(3, 16, np.random.default_rng(1))
    u32, u64 = poisson_solution(a, 32), poisson_solution(a, 64)
    assert np.allclose(u32[:, 0, :], 0) and np.allclose(u32[:, :, 0], 0)
    np.testing.assert_allclose(u64[:, ::2, ::2], u32, atol=1e-14)     # the same function


def test_poisson_fd_converges_to_series():
    a = poisson_coefficients(2, 8, np.random.default_rng(2))
    errs = [np.abs(poisson_fd(poisson_source(a, n)) - poisson_solution(a, n)).max() for n in (16, 32)]
    assert errs[1] < errs[0] / 3.5
    single = poisson_fd(poisson_source(a, 16)[0])
    assert single.shape == (16, 16)


def test_darcy_fields_are_real_and_exact_on_nested_grids():
    c = darcy_fields(3, 5, np.random.default_rng(3))
    a32, a64 = darcy_coefficient(c, 32), darcy_coefficient(c, 64)
    assert set(np.unique(a32)) <= {3.0, 12.0}
    np.testing.assert_array_equal(a64[:, ::2, ::2], a32)
    from reprobook.data.elliptic_pde import _field_values
    g = _field_values(c, 40)
    np.testing.assert_allclose((g ** 2).mean(axis=(1, 2)), 1.0, rtol=1e-10)
    # a real field: the conjugate-symmetric spectrum gives a zero imaginary part
    assert np.all(np.isfinite(g))


def test_darcy_constant_coefficient_matches_poisson_fd():
    n = 16
    u = darcy_solve(np.full((n, n), 2.0))
    ref = poisson_fd(np.full((n, n), 0.5))
    np.testing.assert_allclose(u, ref, atol=1e-12)


def test_darcy_conservation_and_positivity():
    c = darcy_fields(1, 4, np.random.default_rng(4))
    u = darcy_solve(darcy_coefficient(c, 24))
    assert u.shape == (1, 24, 24) and np.all(u[:, 1:, 1:] > 0)
    assert np.allclose(u[:, 0, :], 0)


def test_bad_input_errors():
    with pytest.raises(ValueError, match="n"):
        grid(2)
    with pytest.raises(ValueError, match="K"):
        poisson_coefficients(2, 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="positive"):
        darcy_solve(-np.ones((8, 8)))
    with pytest.raises(ValueError, match="shape"):
        darcy_coefficient(np.zeros((2, 3, 3)), 16)
