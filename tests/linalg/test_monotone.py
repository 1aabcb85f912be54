"""Strong monotonicity: ratios, iteration, and the factorisation into monotone maps and a reflection."""
import numpy as np
import pytest
from scipy.linalg import polar

from reprobook import rng
from reprobook.linalg.monotone import (invert_monotone, monotone_factorisation, monotonicity_ratios,
                                       sym_min_eig)


def random_matrix(n, g, det_sign):
    # U diag(s) V^T with singular values in [0.8, 1.25]: well conditioned, random orientation
    u, _ = np.linalg.qr(g.normal(size=(n, n)))
    v, _ = np.linalg.qr(g.normal(size=(n, n)))
    a = u @ np.diag(g.uniform(0.8, 1.25, n)) @ v.T
    if np.sign(np.linalg.det(a)) != det_sign:
        a[:, 0] *= -1
    return a


def test_sym_min_eig_and_ratios_of_a_linear_map():
    a = np.array([[2.0, 3.0], [-3.0, 1.0]])       # symmetric part diag(2, 1)
    assert sym_min_eig(a) == pytest.approx(1.0)
    g = rng(0)
    u, v = g.normal(size=(50, 2)), g.normal(size=(50, 2))
    r = monotonicity_ratios(lambda x: x @ a.T, u, v)
    assert r.min() >= 1.0 - 1e-12 and r.max() <= 2.0 + 1e-12


@pytest.mark.parametrize("det_sign", [1, -1])
@pytest.mark.parametrize("n", [2, 5, 12])
def test_factorisation_reproduces_a_with_monotone_factors(n, det_sign):
    a = random_matrix(n, rng(n, det_sign + 2), det_sign)
    f = monotone_factorisation(a, k=3)
    np.testing.assert_allclose(f.product(), a, rtol=1e-11, atol=1e-11)
    assert (f.reflection is not None) == (det_sign < 0)
    assert min(f.monotone_constants()) > 0
    assert sym_min_eig(f.s) == pytest.approx(np.linalg.svd(a, compute_uv=False)[-1], rel=1e-10)
    np.testing.assert_allclose(f.q @ f.q.T, np.eye(n), atol=1e-12)


def test_without_the_reflection_an_orientation_reversing_map_is_not_reproduced():
    a = random_matrix(5, rng(9), -1)
    bad = monotone_factorisation(a, k=3, use_reflection=False)
    assert np.linalg.norm(bad.product() - a, 2) > 0.1


def test_iteration_inverts_a_strongly_monotone_map_and_not_a_reflected_one():
    g = rng(3)
    n = 6
    a = random_matrix(n, g, -1)
    q, s = polar(a)
    sv = np.linalg.svd(a, compute_uv=False)
    b = g.normal(size=(n, n))
    b /= np.linalg.norm(b, 2)
    eps = 0.5 * sv[-1]
    f = lambda u: a @ u + eps * np.tanh(b @ u)
    m = lambda u: q.T @ f(u)
    c, lip = sv[-1] - eps, sv[0] + eps
    target = g.normal(size=n)
    inv = invert_monotone(m, q.T @ target, c, lip)
    assert inv.converged and np.linalg.norm(f(inv.u) - target) < 1e-10
    assert inv.contraction <= np.sqrt(1 - c ** 2 / lip ** 2) + 1e-12
    direct = invert_monotone(f, target, c, lip, max_steps=3000)
    assert not direct.converged


def test_bad_input():
    with pytest.raises(ValueError, match="square"):
        sym_min_eig(np.ones((2, 3)))
    with pytest.raises(ValueError, match="u != v"):
        monotonicity_ratios(lambda x: x, np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="0 < c <= lipschitz"):
        invert_monotone(lambda x: x, np.ones(2), 2.0, 1.0)
    with pytest.raises(ValueError, match="k must be"):
        monotone_factorisation(np.eye(2), k=0)
