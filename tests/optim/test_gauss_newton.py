"""Autograd Jacobians and GN matrices: against hand-written Jacobians, the Gram trick, bad input."""
import numpy as np
import pytest
import torch

from reprobook.optim.gauss_newton import (flatten_params, gauss_newton, gauss_newton_eigenvalues,
                                          gram_eigenvalues, jacobian)


def two_layer_relu(params, x):
    return params["W2"] @ torch.relu(params["W1"] @ x + params["b1"])


def make(seed=0, d=4, m=6, k=3, n=9):
    g = torch.Generator().manual_seed(seed)
    p = {"W1": torch.randn(m, d, generator=g, dtype=torch.float64),
         "b1": torch.randn(m, generator=g, dtype=torch.float64),
         "W2": torch.randn(k, m, generator=g, dtype=torch.float64)}
    return p, torch.randn(n, d, generator=g, dtype=torch.float64)


def hand_jacobian(p, x):
    """d f / d theta for f = W2 relu(W1 x + b1), written out (theta = [W1 row-major, b1, W2])."""
    w1, b1, w2 = p["W1"], p["b1"], p["W2"]
    pre = w1 @ x + b1
    mask = (pre > 0).to(x.dtype)
    h = torch.relu(pre)
    k, m = w2.shape
    d_w1 = torch.einsum("km,j->kmj", w2 * mask, x).reshape(k, -1)   # df_k/dW1[m, j]
    d_b1 = w2 * mask
    d_w2 = torch.einsum("kl,m->klm", torch.eye(k, dtype=x.dtype), h).reshape(k, -1)
    return torch.cat([d_w1, d_b1, d_w2], dim=1)


def test_jacobian_matches_hand_derivation():
    p, x = make()
    jac = jacobian(two_layer_relu, p, x)
    assert jac.shape == (9, 3, flatten_params(p).numel())
    for i in range(len(x)):
        torch.testing.assert_close(jac[i], hand_jacobian(p, x[i]), rtol=1e-12, atol=1e-12)


def test_jacobian_chunking_does_not_change_it():
    p, x = make(1)
    torch.testing.assert_close(jacobian(two_layer_relu, p, x), jacobian(two_layer_relu, p, x, chunk_size=2))


def test_gauss_newton_squared_error_and_output_hessian():
    p, x = make(2)
    jac = jacobian(two_layer_relu, p, x)
    g = gauss_newton(two_layer_relu, p, x)
    flat = jac.reshape(-1, jac.shape[2])
    torch.testing.assert_close(g, flat.T @ flat / len(x))
    # a shared output Hessian H: G = 1/n sum J^T H J; H = I gives the squared-error GN
    torch.testing.assert_close(gauss_newton(two_layer_relu, p, x, output_hessian=torch.eye(3)), g)
    h = torch.diag(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    expect = sum(jac[i].T @ h @ jac[i] for i in range(len(x))) / len(x)
    torch.testing.assert_close(gauss_newton(two_layer_relu, p, x, output_hessian=h), expect)


@pytest.mark.parametrize("n", [2, 40])   # nK < p and nK > p: both sides of the Gram trick
def test_gram_trick_gives_the_nonzero_spectrum(n):
    p, x = make(3, n=n)
    g = gauss_newton(two_layer_relu, p, x)
    full = torch.linalg.eigvalsh(g).flip(0)
    small = gauss_newton_eigenvalues(two_layer_relu, p, x)
    r = min(len(full), len(small))
    torch.testing.assert_close(small[:r], full[:r], rtol=1e-9, atol=1e-12)
    assert len(small) == min(flatten_params(p).numel(), 3 * n)


def test_bad_input_is_named():
    p, x = make()
    with pytest.raises(TypeError, match="dict"):
        jacobian(two_layer_relu, [p["W1"]], x)
    with pytest.raises(ValueError, match=r"shape \(n, d\)"):
        jacobian(two_layer_relu, p, x[0])
    with pytest.raises(TypeError, match="floating point"):
        jacobian(two_layer_relu, {"W1": torch.ones(2, 2, dtype=torch.long)}, x)
    with pytest.raises(ValueError, match="1-d tensor"):
        jacobian(lambda q, v: (q["W2"] @ torch.relu(q["W1"] @ v + q["b1"])).sum(), p, x)
    with pytest.raises(ValueError, match="output_hessian"):
        gauss_newton(two_layer_relu, p, x, output_hessian=torch.eye(4))
    with pytest.raises(ValueError, match=r"\(n, K, p\)"):
        gram_eigenvalues(torch.ones(3, 3))
