"""The sine-MLP zoo: shapes, independence of the batched fits, fit quality, splits, bad input."""
import math

import pytest
import torch

from reprobook.data.sine_mlps import (SineMLPZoo, check_mlp_params, make_sine_mlp_zoo, mlp_forward,
                                      sample_points)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _zoo(n=12, **kw):
    kw.setdefault("hidden", (6, 5))
    kw.setdefault("steps", 40)
    return make_sine_mlp_zoo(n, generator=torch.Generator().manual_seed(0), **kw)


def test_shapes_and_ground_truth_ranges():
    zoo = _zoo(omega_range=(0.5, 3.0), amplitude_range=(0.5, 2.0))
    assert zoo.layout == (1, 6, 5, 1) and len(zoo) == 12
    assert [tuple(w.shape) for w in zoo.weights] == [(12, 6, 1), (12, 5, 6), (12, 1, 5)]
    assert [tuple(b.shape) for b in zoo.biases] == [(12, 6), (12, 5), (12, 1)]
    assert bool(((zoo.omega >= 0.5) & (zoo.omega <= 3.0)).all())
    assert bool(((zoo.amplitude >= 0.5) & (zoo.amplitude <= 2.0)).all())
    assert bool(((zoo.phase >= 0) & (zoo.phase <= 2 * math.pi)).all())


def test_forward_matches_a_plain_loop():
    zoo = _zoo(n=3)
    x = torch.linspace(-2, 2, 7)
    out = zoo.predict(x)
    for k in range(3):
        h = x[None, :]
        for l, (w, b) in enumerate(zip(zoo.weights, zoo.biases)):
            h = w[k] @ h + b[k][:, None]
            if l < 2:
                h = torch.relu(h)
        torch.testing.assert_close(out[k], h[0])


def test_same_generator_seed_same_zoo():
    a, b = _zoo(n=4, steps=25), _zoo(n=4, steps=25)
    for x, y in zip(a.weights + a.biases, b.weights + b.biases):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_batched_fit_equals_fitting_each_network_alone():
    # the summed loss makes the fits independent: refit network 1 alone from the same draw
    z1 = make_sine_mlp_zoo(2, hidden=(4, 4), steps=30, generator=torch.Generator().manual_seed(3),
                           dtype=torch.float64)
    params = []
    g = torch.Generator().manual_seed(3)
    draws = [torch.rand(2, generator=g, dtype=torch.float64) for _ in range(3)]
    layout = (1, 4, 4, 1)
    for fi, fo in zip(layout[:-1], layout[1:]):
        bd = 1 / math.sqrt(fi)
        params.append(-bd + 2 * bd * torch.rand((2, fo, fi), generator=g, dtype=torch.float64))
        params.append(-bd + 2 * bd * torch.rand((2, fo), generator=g, dtype=torch.float64))
    omega = 0.5 + 2.5 * draws[0]
    amp = 0.5 + 1.5 * draws[1]
    phase = 2 * math.pi * draws[2]
    one = [p[1:2].clone().requires_grad_(True) for p in params]
    x = sample_points(64, dtype=torch.float64)
    y = amp[1] * torch.sin(omega[1] * x + phase[1])
    opt = torch.optim.Adam(one, lr=1e-2)
    for _ in range(30):
        opt.zero_grad()
        loss = ((mlp_forward(one[0::2], one[1::2], x)[0] - y) ** 2).mean()
        loss.backward()
        opt.step()
    for a, b in zip(one[0::2], z1.weights):
        torch.testing.assert_close(a.detach()[0], b[1], rtol=1e-10, atol=1e-12)


def test_training_fits_the_sinusoids():
    zoo = make_sine_mlp_zoo(16, hidden=(8, 8), steps=300, omega_range=(0.5, 1.5),
                            generator=torch.Generator().manual_seed(1))
    assert float(zoo.rel_fit_mse.median()) < 0.05
    x = sample_points(64)
    torch.testing.assert_close(((zoo.predict(x) - zoo.target(x)) ** 2).mean(1), zoo.fit_mse)


def test_tanh_zoo_and_split():
    zoo = _zoo(n=20, activation="tanh")
    assert zoo.activation == "tanh"
    a, b, c = zoo.split((0.5, 0.25, 0.25))
    assert (len(a), len(b), len(c)) == (10, 5, 5)
    torch.testing.assert_close(b.omega, zoo.omega[10:15])
    sub = zoo.subset([3, 1])
    torch.testing.assert_close(sub.weights[1], zoo.weights[1][[3, 1]])
    assert isinstance(sub, SineMLPZoo)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="n must be"):
        make_sine_mlp_zoo(0)
    with pytest.raises(ValueError, match="unknown activation"):
        make_sine_mlp_zoo(3, activation="gelu")
    with pytest.raises(ValueError, match="hidden"):
        make_sine_mlp_zoo(3, hidden=())
    with pytest.raises(ValueError, match="omega_range"):
        make_sine_mlp_zoo(3, omega_range=(2.0, 1.0))
    zoo = _zoo(n=4)
    with pytest.raises(ValueError, match="too small"):
        zoo.split((0.5, 0.49, 0.01))
    with pytest.raises(ValueError, match="inputs"):
        check_mlp_params([torch.zeros(2, 3, 1), torch.zeros(2, 1, 4)], [torch.zeros(2, 3),
                                                                         torch.zeros(2, 1)])
    with pytest.raises(ValueError, match="same number"):
        check_mlp_params([torch.zeros(2, 3, 1)], [torch.zeros(3, 3)])
    with pytest.raises(ValueError, match="x must have shape"):
        mlp_forward(zoo.weights, zoo.biases, torch.zeros(4, 2))
    with pytest.raises(IndexError):
        zoo.subset([7])
