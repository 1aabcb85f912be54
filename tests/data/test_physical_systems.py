import numpy as np
import pytest

from reprobook.data.physical_systems import (gray_scott, gray_scott_field, hindmarsh_rose,
                                             hindmarsh_rose_field, laplacian_periodic, rk4)


def test_rk4_is_fourth_order_on_exponential_decay():
    errs = []
    for substeps in (2, 4):
        x = rk4(lambda s: -s, np.array([1.0]), 0.5, 4, substeps)
        errs.append(abs(x[-1, 0] - np.exp(-2.0)))
    assert errs[0] / errs[1] == pytest.approx(16, rel=0.15)


def test_hindmarsh_rose_fixed_point_is_stationary():
    # the resting state of the classic parameters: solve the cubic for x, then y and z follow
    p = dict(a=1.0, b=3.0, c=1.0, d=5.0, s=4.0, x_rest=-1.6, current=3.25)
    roots = np.roots([-p["a"], p["b"] - p["d"], -p["s"], p["c"] + p["s"] * p["x_rest"] + p["current"]])
    x = roots[np.abs(roots.imag) < 1e-9].real[0]
    state = np.array([x, p["c"] - p["d"] * x ** 2, p["s"] * (x - p["x_rest"])])
    assert np.abs(hindmarsh_rose_field(state)).max() < 1e-9


def test_hindmarsh_rose_spikes_and_is_deterministic():
    a = hindmarsh_rose(600, 0.05)
    b = hindmarsh_rose(600, 0.05)
    np.testing.assert_array_equal(a.states, b.states)
    x = a.states[:, 0]
    assert a.states.shape == (601, 3)
    assert ((x[1:] > 1) & (x[:-1] <= 1)).sum() >= 2          # the classic regime spikes
    c = hindmarsh_rose(50, 0.05, rng=np.random.default_rng(0), init_noise=0.1)
    assert not np.allclose(c.states[0], a.states[0])


def test_hindmarsh_rose_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown Hindmarsh"):
        hindmarsh_rose(10, bogus=1.0)
    with pytest.raises(ValueError, match="3 components"):
        hindmarsh_rose(10, x0=(1.0, 2.0))


def test_laplacian_of_constant_is_zero_and_sums_to_zero():
    f = np.random.default_rng(0).normal(size=(5, 5))
    assert np.abs(laplacian_periodic(np.ones((4, 4)))).max() == 0
    assert abs(laplacian_periodic(f).sum()) < 1e-12


def test_gray_scott_homogeneous_state_and_translation_equivariance():
    uv = np.zeros((2, 6, 6))
    uv[0] = 1.0
    assert np.abs(gray_scott_field(uv)).max() == 0           # U = 1, V = 0 is a fixed point
    tr = gray_scott(8, 20, 1.0, rng=np.random.default_rng(1))
    start = tr.states[0].reshape(2, 8, 8)
    shifted = rk4(gray_scott_field, np.roll(start, (2, 3), (1, 2)), 1.0, 20, 2)
    np.testing.assert_allclose(shifted[-1], np.roll(tr.states[-1].reshape(2, 8, 8), (2, 3), (1, 2)), atol=1e-12)
    assert tr.states.shape == (21, 128) and tr.grid == 8


def test_gray_scott_rejects_bad_input():
    with pytest.raises(ValueError, match="grid"):
        gray_scott(2, 5)
    with pytest.raises(ValueError, match="shape"):
        gray_scott_field(np.zeros((3, 4, 4)))
