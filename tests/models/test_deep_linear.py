"""Deep linear networks: shapes, the residual form, initialisation, training."""
import math

import numpy as np
import pytest
import torch

from reprobook import rng
from reprobook.models.deep_linear import (DeepLinear, deep_linear, kaiming_normal, residual_linear,
                                          train_deep_linear)


def test_forward_matches_end_to_end_map():
    for net in (deep_linear([3, 5, 4, 2], rng(0)), residual_linear(4, 3, rng(1), beta=0.5)):
        x = rng(2).normal(size=(7, net.dims[0]))
        out = net.forward(net.params(), torch.tensor(x)).numpy()
        np.testing.assert_allclose(out, x @ net.end_to_end().T, rtol=1e-12)
        one = net.forward(net.params(), torch.tensor(x[0])).numpy()
        np.testing.assert_allclose(one, out[0], rtol=1e-12)


def test_residual_layer_is_identity_plus_scaled_branch():
    net = residual_linear(3, 2, rng(3), beta=0.25)
    for a, w in zip(net.effective(), net.weights):
        np.testing.assert_allclose(a, np.eye(3) + 0.25 * w)
    np.testing.assert_array_equal(net.scales(), [0.25, 0.25])
    assert net.n_params == 18 and net.depth == 2


def test_kaiming_variance():
    w = kaiming_normal(400, 250, rng(4))
    assert w.var() == pytest.approx(2 / 250, rel=0.03)


def test_training_reduces_the_loss_and_records_snapshots():
    g = rng(5)
    x, y = g.normal(size=(40, 3)), g.normal(size=(40, 2))
    net = deep_linear([3, 6, 2], g, gain=1.0)
    snaps, losses = train_deep_linear(net, x, y, lr=0.05, steps=30, record_every=10)
    assert len(snaps) == 4 and len(losses) == 31 and losses[-1] < losses[0]
    np.testing.assert_array_equal(snaps[0].weights[0], net.weights[0])


def test_bad_input():
    with pytest.raises(ValueError, match="square"):
        DeepLinear([np.ones((3, 2))], (True,))
    with pytest.raises(ValueError, match="columns"):
        DeepLinear([np.ones((3, 2)), np.ones((2, 4))], (False, False))
    with pytest.raises(ValueError, match="one flag per layer"):
        DeepLinear([np.ones((3, 2))], (False, False))
    with pytest.raises(TypeError, match="numpy Generator"):
        kaiming_normal(2, 2, 0)
    with pytest.raises(ValueError, match="beta"):
        residual_linear(3, 2, rng(0), beta=0.0)
    net = deep_linear([3, 2], rng(0))
    with pytest.raises(ValueError, match=r"x must be \(n, 3\)"):
        train_deep_linear(net, np.ones((4, 2)), np.ones((4, 2)), lr=0.1, steps=1)
