"""GMN and ScaleGMN on MLP weights: invariances, what breaks them, equal-size widths, bad input."""
import pytest
import torch

from reprobook.data.sine_mlps import make_sine_mlp_zoo
from reprobook.data.weight_symmetries import act_on_mlp, random_symmetry
from reprobook.models.graph_metanet import GMN, ScaleGMN, count_parameters, width_for_budget


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _zoo(activation, n=10, hidden=(5, 4)):
    return make_sine_mlp_zoo(n, hidden=hidden, steps=20, activation=activation,
                             generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def _model(cls, zoo, **kw):
    torch.manual_seed(0)
    m = cls(zoo.layout, d=8, n_layers=3, **kw).double().eval()
    m.set_input_scales(zoo.weights, zoo.biases)
    return m


@pytest.mark.parametrize("readout", ["last", "graph"])
@pytest.mark.parametrize("activation,symmetry", [("relu", "scale"), ("tanh", "sign")])
def test_scalegmn_is_exactly_invariant(activation, symmetry, readout):
    zoo = _zoo(activation)
    m = _model(ScaleGMN, zoo, symmetry=symmetry, readout=readout)
    out = m(zoo.weights, zoo.biases)
    for s in range(5):
        w, b = random_symmetry(zoo.weights, zoo.biases, activation,
                               torch.Generator().manual_seed(10 + s))
        diff = (m(w, b) - out).abs().max()
        assert float(diff) <= 1e-9 * max(1.0, float(out.abs().max()))


def test_scalegmn_is_invariant_in_float32():
    zoo = make_sine_mlp_zoo(10, hidden=(5, 4), steps=20, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    m = ScaleGMN(zoo.layout, d=8).eval()
    m.set_input_scales(zoo.weights, zoo.biases)
    out = m(zoo.weights, zoo.biases)
    w, b = random_symmetry(zoo.weights, zoo.biases, "relu", torch.Generator().manual_seed(1))
    assert float((m(w, b) - out).abs().max()) <= 1e-4 * max(1.0, float(out.abs().max()))


@pytest.mark.parametrize("readout", ["last", "graph"])
def test_gmn_is_permutation_but_not_scale_invariant(readout):
    zoo = _zoo("relu")
    m = _model(GMN, zoo, readout=readout)
    out = m(zoo.weights, zoo.biases)
    w, b = random_symmetry(zoo.weights, zoo.biases, "relu", torch.Generator().manual_seed(1),
                           scale_range=(1.0, 1.0))                      # permutations only
    assert float((m(w, b) - out).abs().max()) <= 1e-9
    w, b = random_symmetry(zoo.weights, zoo.biases, "relu", torch.Generator().manual_seed(1))
    assert float((m(w, b) - out).abs().mean()) >= 1e-2


@pytest.mark.parametrize("readout", ["last", "graph"])
def test_broken_scalegmns_are_not_invariant(readout):
    # an untrained ScaleGMN's output varies little between networks (products of small numbers),
    # so "not invariant" is judged against float64 round-off (1e-16), where invariance lives
    zoo = _zoo("relu")
    w, b = random_symmetry(zoo.weights, zoo.biases, "relu", torch.Generator().manual_seed(1))
    no_canon = _model(ScaleGMN, zoo, canonicalize=False, readout=readout)
    assert float((no_canon(w, b) - no_canon(zoo.weights, zoo.biases)).abs().max()) > 1e-8
    # the ReLU variant does not cover tanh's sign flips
    tanh = _zoo("tanh")
    m = _model(ScaleGMN, tanh, symmetry="scale", readout=readout)
    w, b = random_symmetry(tanh.weights, tanh.biases, "tanh", torch.Generator().manual_seed(1))
    assert float((m(w, b) - m(tanh.weights, tanh.biases)).abs().max()) > 1e-8


def test_output_depends_on_every_layer():
    # three rounds carry the first layer's weights to the output node ("last" readout)
    zoo = _zoo("relu")
    m = _model(ScaleGMN, zoo)
    out = m(zoo.weights, zoo.biases)
    for layer in range(3):
        w = list(zoo.weights)
        w[layer] = w[layer] * 1.5
        assert float((m(w, zoo.biases) - out).abs().max()) > 1e-12   # round-off: 1e-16
    shallow = ScaleGMN(zoo.layout, d=8, n_layers=0).double()
    assert shallow(zoo.weights, zoo.biases).shape == (10,)


def test_width_for_budget_matches_sizes():
    layout = (1, 8, 8, 1)
    budget = count_parameters(ScaleGMN(layout, d=16))
    d = width_for_budget(lambda k: GMN(layout, d=k), budget)
    n = count_parameters(GMN(layout, d=d))
    assert abs(n - budget) <= abs(count_parameters(GMN(layout, d=d + 1)) - budget)
    assert abs(n - budget) <= abs(count_parameters(GMN(layout, d=d - 1)) - budget)
    assert abs(n - budget) / budget < 0.1


def test_bad_input_is_named():
    zoo = _zoo("relu")
    m = _model(ScaleGMN, zoo)
    with pytest.raises(ValueError, match="layout"):
        m(zoo.weights[:2], zoo.biases[:2])
    with pytest.raises(ValueError, match="layout must list"):
        ScaleGMN((1, 4))
    with pytest.raises(ValueError, match="unknown symmetry"):
        ScaleGMN((1, 4, 1), symmetry="rotation")
    with pytest.raises(ValueError, match="unknown readout"):
        GMN((1, 4, 1), readout="mean")
    with pytest.raises(ValueError, match="n_layers"):
        GMN((1, 4, 1), n_layers=-1)
    with pytest.raises(ValueError, match="budget"):
        width_for_budget(lambda k: GMN((1, 4, 1), d=k), 0)
