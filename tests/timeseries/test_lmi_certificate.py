import numpy as np
import pytest

from reprobook.data.physical_systems import rk4
from reprobook.timeseries.lmi_certificate import (envelope_excess, find_certificate, lmi_margin,
                                                  lure_matrix, unforced_field)


def _linear(A0):
    n = A0.shape[0]
    return A0, [np.zeros((n, 1))], [np.zeros((1, n))]


def test_feasible_on_stable_linear_system_with_the_right_rate():
    A0, As, Ws = _linear(np.diag([-1.0, -2.0]))
    cert = find_certificate(A0, As, Ws, eps_max=4.0, iters=10)
    assert cert.feasible and cert.max_eig < 0
    # the best rate for V = x'Px on diag(-1, -2) is 1 (slowest mode); 0.9 of the bisection's bound
    assert 0.8 < cert.eps < 1.0


def test_infeasible_on_unstable_linear_system():
    A0, As, Ws = _linear(np.array([[0.5, 1.0], [0.0, -1.0]]))
    t, _, _ = lmi_margin(A0, As, Ws, 0.0)
    assert t > 0
    assert not find_certificate(A0, As, Ws, iters=3).feasible


def test_lure_matrix_bounds_vdot_on_random_points():
    g = np.random.default_rng(0)
    n, m = 3, 4
    A0 = -3 * np.eye(n)
    As, Ws = [0.5 * g.normal(size=(n, m))], [g.normal(size=(m, n))]
    cert = find_certificate(A0, As, Ws, iters=6)
    assert cert.feasible
    f = unforced_field(A0, As, Ws, ["tanh"])
    M = lure_matrix(cert.P, A0, As, Ws, cert.lams, cert.eps)
    for _ in range(50):
        x = g.normal(size=n)
        zeta = np.concatenate([x, np.tanh(Ws[0] @ x)])
        vdot = 2 * x @ cert.P @ f(x)
        assert vdot + 2 * cert.eps * x @ cert.P @ x <= zeta @ M @ zeta + 1e-9


def test_certificate_envelope_holds_and_a_wrong_rate_breaks_it():
    g = np.random.default_rng(1)
    n = 3
    A0 = -2 * np.eye(n) + 0.3 * g.normal(size=(n, n))
    As, Ws = [g.normal(size=(n, n)) / 2, g.normal(size=(n, n)) / 2], [g.normal(size=(n, n)) / 2] * 2
    cert = find_certificate(A0, As, Ws, iters=6)
    x = rk4(unforced_field(A0, As, Ws, ["tanh", "relu"]), g.normal(size=(10, n)), 0.02, 200)
    times = 0.02 * np.arange(201)
    assert envelope_excess(cert.P, cert.eps, x, times) <= 1e-6
    assert envelope_excess(cert.P, 50.0, x, times) > 1.0


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="square"):
        find_certificate(np.zeros((2, 3)), [np.zeros((2, 1))], [np.zeros((1, 2))])
    with pytest.raises(ValueError, match="sub-network 0"):
        lmi_margin(-np.eye(2), [np.zeros((3, 1))], [np.zeros((1, 2))], 0.0)
    with pytest.raises(ValueError, match="unknown activations"):
        unforced_field(-np.eye(2), [np.zeros((2, 1))], [np.zeros((1, 2))], ["sigmoid"])
