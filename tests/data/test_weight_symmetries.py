"""Weight-space symmetries of MLPs: they preserve the function, compose as a group, bad input."""
import pytest
import torch

from reprobook.data.sine_mlps import make_sine_mlp_zoo, mlp_forward
from reprobook.data.weight_symmetries import act_on_mlp, random_group_element, random_symmetry


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _params(activation, n=6, layout=(1, 5, 4, 1), dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    w = tuple(torch.randn(n, o, i, generator=g, dtype=dtype) for i, o in zip(layout[:-1], layout[1:]))
    b = tuple(torch.randn(n, o, generator=g, dtype=dtype) for o in layout[1:])
    return w, b


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_random_symmetry_preserves_the_function(activation):
    w, b = _params(activation)
    x = torch.linspace(-4, 4, 100, dtype=torch.float64)
    w2, b2 = random_symmetry(w, b, activation, torch.Generator().manual_seed(1))
    f, f2 = mlp_forward(w, b, x, activation), mlp_forward(w2, b2, x, activation)
    assert float((f - f2).abs().max()) <= 1e-12 * max(1.0, float(f.abs().max()))
    assert float((w2[1] - w[1]).abs().max()) > 0.1          # the weights did change


def test_trained_zoo_float32_function_is_preserved():
    zoo = make_sine_mlp_zoo(8, hidden=(6, 6), steps=30, generator=torch.Generator().manual_seed(2))
    w2, b2 = random_symmetry(zoo.weights, zoo.biases, "relu", torch.Generator().manual_seed(3))
    x = torch.linspace(-3.1, 3.1, 100)
    assert float((zoo.predict(x) - mlp_forward(w2, b2, x)).abs().max()) <= 1e-5


def test_wrong_group_changes_the_function():
    # negative scales are not a symmetry of ReLU networks, positive non-unit ones not of tanh
    w, b = _params("relu")
    x = torch.linspace(-4, 4, 50, dtype=torch.float64)
    neg = [-torch.ones(6, 5, dtype=torch.float64), -torch.ones(6, 4, dtype=torch.float64)]
    w2, b2 = act_on_mlp(w, b, scales=neg)
    assert float((mlp_forward(w, b, x) - mlp_forward(w2, b2, x)).abs().max()) > 1e-2
    two = [2 * torch.ones(6, 5, dtype=torch.float64), 2 * torch.ones(6, 4, dtype=torch.float64)]
    w3, b3 = act_on_mlp(w, b, scales=two)
    assert float((mlp_forward(w, b, x, "tanh") - mlp_forward(w3, b3, x, "tanh")).abs().max()) > 1e-2


def test_scaling_law_on_edges_and_nodes():
    w, b = _params("relu", n=1, layout=(1, 2, 2, 1))
    q1 = torch.tensor([[2.0, 3.0]], dtype=torch.float64)
    q2 = torch.tensor([[5.0, 7.0]], dtype=torch.float64)
    w2, b2 = act_on_mlp(w, b, scales=[q1, q2])
    torch.testing.assert_close(b2[0], b[0] * q1)
    torch.testing.assert_close(w2[1][0, 1, 0], w[1][0, 1, 0] * 7.0 / 2.0)   # edge 0 -> 1: q_i/q_j
    torch.testing.assert_close(w2[2][0, 0, 1], w[2][0, 0, 1] / 7.0)         # into the output


def test_permutation_moves_neurons():
    w, b = _params("relu", n=1, layout=(1, 3, 2, 1))
    perm = [torch.tensor([[2, 0, 1]]), torch.tensor([[1, 0]])]
    w2, b2 = act_on_mlp(w, b, perms=perm)
    torch.testing.assert_close(b2[0][0], b[0][0][[2, 0, 1]])
    torch.testing.assert_close(w2[1][0], w[1][0][[1, 0]][:, [2, 0, 1]])
    torch.testing.assert_close(w2[2][0], w[2][0][:, [1, 0]])


def test_group_element_draws():
    g = torch.Generator().manual_seed(4)
    s, p = random_group_element((1, 50, 50, 1), 40, "relu", g, scale_range=(0.1, 10.0))
    q = torch.cat([x.flatten() for x in s])
    assert float(q.min()) >= 0.1 and float(q.max()) <= 10.0
    assert abs(float(q.log().mean())) < 0.1                   # log-uniform: q and 1/q alike
    assert all(torch.equal(x.sort(1).values, torch.arange(50).expand(40, 50)) for x in p)
    s, p = random_group_element((1, 50, 1), 40, "tanh", g, permute=False)
    assert p is None and set(s[0].unique().tolist()) == {-1.0, 1.0}


def test_bad_input_is_named():
    w, b = _params("relu")
    with pytest.raises(ValueError, match="one entry per hidden layer"):
        act_on_mlp(w, b, scales=[torch.ones(6, 5)])
    with pytest.raises(ValueError, match="zeros"):
        act_on_mlp(w, b, scales=[torch.zeros(6, 5), torch.ones(6, 4)])
    with pytest.raises(ValueError, match="not a permutation"):
        act_on_mlp(w, b, perms=[torch.zeros(6, 5, dtype=torch.long), torch.zeros(6, 4,
                                                                                  dtype=torch.long)])
    with pytest.raises(ValueError, match="unknown activation"):
        random_symmetry(w, b, "gelu", torch.Generator())
    with pytest.raises(ValueError, match="scale_range"):
        random_symmetry(w, b, "relu", torch.Generator(), scale_range=(0.0, 1.0))
