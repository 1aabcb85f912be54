"""Unit tests of reprobook.learning.interneuron_circuit: the activation family, the response
solver, the exact whitening fixed point of the linear circuit, the transport-map Jacobian."""
import numpy as np
import pytest
from scipy import integrate, stats

from reprobook.learning.interneuron_circuit import (
    InterneuronCircuit, activation, activation_potential, activation_slope, gaussian_abs_moment,
    gaussian_abs_moment_dp, moment_constraint, moment_constraint_dtheta, shape_coefficients,
    tight_frame,
)
from reprobook.stats.whitening import inverse_sqrt


def test_gaussian_abs_moments_match_numerical_integration():
    for p in (1.0, 2.0, 2.5, 3.7):
        num = integrate.quad(lambda z: abs(z) ** p * stats.norm.pdf(z), -np.inf, np.inf)[0]
        assert gaussian_abs_moment(p) == pytest.approx(num, rel=1e-8)
    assert gaussian_abs_moment(2.0) == pytest.approx(1.0)
    h = 1e-6
    for p in (2.0, 3.3):
        fd = (gaussian_abs_moment(p + h) - gaussian_abs_moment(p - h)) / (2 * h)
        assert gaussian_abs_moment_dp(p) == pytest.approx(fd, rel=1e-6)


def test_theta_one_is_linear_and_its_constraint_is_the_second_moment():
    z = np.linspace(-3, 3, 13)
    assert np.allclose(activation(z, 1.0), 2 * z)
    assert np.allclose(moment_constraint(z, 1.0), z**2 - 1)


def test_slope_and_potential_are_the_derivative_and_antiderivative():
    z = np.linspace(-2.5, 2.5, 11) + 0.01
    h = 1e-6
    for theta in (1.0, 1.7, 2.3, 3.0):
        fd = (activation(z + h, theta) - activation(z - h, theta)) / (2 * h)
        assert np.allclose(activation_slope(z, theta), fd, rtol=1e-6)
        fd = (activation_potential(z + h, theta) - activation_potential(z - h, theta)) / (2 * h)
        assert np.allclose(activation(z, theta), fd, rtol=1e-6)
        assert np.all(activation_slope(z, theta) > 0)


def test_theta_update_is_the_theta_derivative_where_b_is_unclipped():
    # above theta = 6^(1/2.32) the official b'(theta) is the true derivative, so dc/dtheta is exact
    z = np.array([-2.0, -0.3, 0.0, 0.5, 1.7])
    h = 1e-6
    for theta in (2.3, 2.8):
        fd = (moment_constraint(z, theta + h) - moment_constraint(z, theta - h)) / (2 * h)
        assert np.allclose(moment_constraint_dtheta(z, theta), fd, rtol=1e-5, atol=1e-8)
    a, b = shape_coefficients(1.5)
    assert a == pytest.approx(1.0) and b == pytest.approx(1.0)


def test_gaussian_inputs_satisfy_the_moment_constraints():
    z = stats.norm.ppf((np.arange(200_000) + 0.5) / 200_000)   # a quasi-Gaussian sample
    for theta in (1.0, 2.0, 2.7):
        c = moment_constraint(z, theta)
        assert abs(c.mean()) < 1e-3 * c.std()


def test_frame_has_unit_columns_and_full_rank():
    w = tight_frame(2, 4, np.random.default_rng(0))
    assert np.allclose(np.linalg.norm(w, axis=0), 1)
    assert np.linalg.matrix_rank(w) == 2
    with pytest.raises(ValueError, match="at least"):
        tight_frame(3, 2, np.random.default_rng(0))


def test_responses_solve_the_circuit_equation_including_heavy_tails():
    rng = np.random.default_rng(1)
    c = InterneuronCircuit.create(2, 3, rng, batch=(2,), g0=[[0.2, 0.5, 1.0], [0.1, 0.1, 0.3]],
                                  theta0=[[1.0, 2.3, 3.0], [2.0, 2.0, 2.9]])
    s = rng.standard_t(1.5, size=(2, 400, 2)) * 3
    r = c.responses(s)
    assert np.allclose(c.interneuron_output(r) @ np.swapaxes(c.W, -1, -2), s, atol=1e-8)


def test_the_linear_circuit_fixed_point_is_zca_exactly():
    # A stimulus set whose second moment is exactly cov: +-sqrt(d) cov^(1/2) e_k. Full-batch
    # updates are then the exact expected updates, and the linear circuit (theta = 1) must settle
    # at Cov(r) = I with the response map cov^(-1/2) (ZCA), whatever its synapses do.
    cov = np.array([[2.0, 1.2], [1.2, 1.5]])
    lam, u = np.linalg.eigh(cov)
    root = (u * np.sqrt(lam)) @ u.T
    s = np.concatenate([np.sqrt(2) * root, -np.sqrt(2) * root])[None]
    assert np.allclose(s[0].T @ s[0] / 4, cov)
    c = InterneuronCircuit.create(2, 3, np.random.default_rng(2), batch=(1,), linear=True, g0=0.5)
    c.fit(s, 400, 4, np.random.default_rng(3), lr_g=0.5, lr_w=0.05)
    r = c.responses(s)[0]
    assert np.abs(r.T @ r / 4 - np.eye(2)).max() < 1e-10
    assert np.abs(c.jacobian(r[:1])[0, 0] - inverse_sqrt(cov)).max() < 1e-10


def test_with_fewer_than_three_interneurons_the_linear_circuit_cannot_whiten():
    # K = 2 < s(s+1)/2 = 3 directions cannot pin a 2x2 covariance: the gain fixed point makes
    # E z_i^2 = 1 on two directions only, so Cov(r) = I fails for a generic input covariance
    cov = np.array([[2.0, 1.2], [1.2, 1.5]])
    lam, u = np.linalg.eigh(cov)
    root = (u * np.sqrt(lam)) @ u.T
    s = np.concatenate([np.sqrt(2) * root, -np.sqrt(2) * root])[None]
    w0 = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    c = InterneuronCircuit(w0, np.full((1, 2), 0.5), np.ones((1, 2)), adapt_theta=False,
                           adapt_synapses=False)
    c.fit(s, 400, 4, np.random.default_rng(3), lr_g=0.5)
    r = c.responses(s)[0]
    assert np.allclose(np.diag(r.T @ r / 4), 1, atol=1e-8)
    assert np.abs(r.T @ r / 4 - np.eye(2)).max() > 0.1


def test_the_jacobian_is_symmetric_positive_definite_a_transport_map():
    rng = np.random.default_rng(4)
    c = InterneuronCircuit.create(2, 4, rng, g0=rng.uniform(0.05, 1, 4), theta0=rng.uniform(1, 3, 4))
    c.W = c.W + 0.3 * rng.normal(size=c.W.shape)             # any synapses, not only a frame
    c.W /= np.linalg.norm(c.W, axis=0)
    s = rng.standard_t(2, size=(200, 2))
    jac = c.jacobian(c.responses(s))
    assert np.abs(jac - np.swapaxes(jac, -1, -2)).max() < 1e-10 * np.abs(jac).max()
    assert np.linalg.eigvalsh(jac).min() > 0
    # and it is the derivative of the response map
    h = 1e-6
    e = np.array([h, 0.0])
    fd = (c.responses(s[:5] + e) - c.responses(s[:5] - e)) / (2 * h)
    assert np.allclose(fd, jac[:5, :, 0], rtol=1e-5, atol=1e-7)


def test_the_rules_move_the_parameters_the_right_way_and_flags_freeze_them():
    rng = np.random.default_rng(5)
    s = rng.normal(size=(2, 500, 2)) * 3                      # too large: gains must grow
    c = InterneuronCircuit.create(2, 3, rng, batch=(2,), g0=0.2, theta0=2.3,
                                  adapt_theta=[True, False], adapt_synapses=[False, True])
    w0, theta0 = c.W.copy(), c.theta.copy()
    c.fit(s, 20, 50, rng, lr_g=1e-2, lr_theta=1e-2, lr_w=1e-2, record_every=10)
    assert np.all(c.g > 0.2)
    assert np.array_equal(c.W[0], w0[0]) and not np.allclose(c.W[1], w0[1])
    assert not np.allclose(c.theta[0], theta0[0]) and np.array_equal(c.theta[1], theta0[1])
    assert len(c.history["g"]) == 2
    both = InterneuronCircuit.concatenate([c, c])
    assert both.W.shape == (2, 2, 2, 3) and both.adapt_theta.shape == (2, 2)


def test_bad_input_is_refused_with_a_clear_error():
    rng = np.random.default_rng(6)
    c = InterneuronCircuit.create(2, 3, rng)
    with pytest.raises(ValueError, match="stimuli must have shape"):
        c.responses(np.zeros((10, 3)))
    with pytest.raises(ValueError, match="theta"):
        InterneuronCircuit(c.W, c.g, np.full(3, 3.5))
    with pytest.raises(ValueError, match="non-negative"):
        InterneuronCircuit(c.W, -c.g, c.theta)
    with pytest.raises(ValueError, match="batch_size"):
        c.fit(np.zeros((5, 2)), 1, 10, rng)
    dead = InterneuronCircuit(c.W, np.array([1.0, 0.0, 0.0]), c.theta)
    with pytest.raises(np.linalg.LinAlgError, match="span"):
        dead.responses(np.zeros((3, 2)))
