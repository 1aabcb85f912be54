import numpy as np
import pytest
import torch

from reprobook.gnn.fit import accuracy, fit_full_batch, predict_proba
from reprobook.gnn.gin import GIN, batch_graphs
from reprobook.graphs.generators import csl_graphs, relabel
from reprobook.graphs.individualization import individualize


def test_gin_without_ids_is_blind_on_csl_and_sees_with_ids():
    torch.manual_seed(0)
    graphs = csl_graphs()
    blind = GIN(1, hidden=16, layers=3, n_classes=10)
    out = predict_proba(blind, batch_graphs(graphs, [individualize("none", n, e) for n, e in graphs]))
    assert float((out - out[0]).abs().max()) < 1e-5
    seeing = GIN(7, hidden=16, layers=3, n_classes=10)
    x = [individualize("tinhofer", n, e) for n, e in graphs]
    out = predict_proba(seeing, batch_graphs(graphs, x))
    assert float((out - out[0]).abs().max()) > 1e-3


def test_gin_is_invariant_to_node_order_and_tinhofer_ids_follow_the_nodes():
    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    n, e = csl_graphs()[4]
    model = GIN(7, hidden=16, layers=3, n_classes=10)
    a = predict_proba(model, batch_graphs([(n, e)], [individualize("tinhofer", n, e)]))
    e2 = relabel(n, e, rng.permutation(n))
    b = predict_proba(model, batch_graphs([(n, e2)], [individualize("tinhofer", n, e2)]))
    assert torch.allclose(a, b, atol=1e-5)


def test_fit_learns_a_small_task_and_checks_inputs():
    torch.manual_seed(0)
    graphs = csl_graphs()
    data = batch_graphs(graphs, [individualize("tinhofer", n, e) for n, e in graphs])
    model = GIN(7, hidden=64, layers=4, n_classes=10, generator=torch.Generator().manual_seed(0))
    losses = fit_full_batch(model, data, np.arange(10), epochs=200, lr=1e-3)
    assert losses[-1] < 0.1 * losses[0]
    assert accuracy(model, data, np.arange(10)) == 1.0
    with pytest.raises(ValueError, match="labels"):
        fit_full_batch(model, data, np.arange(9), epochs=1, lr=1e-2)
    with pytest.raises(ValueError, match="node features"):
        model(batch_graphs(graphs, [individualize("none", n, e) for n, e in graphs]))
    with pytest.raises(ValueError, match="one feature array"):
        batch_graphs(graphs, [])
    with pytest.raises(ValueError, match="in_dim"):
        GIN(0)


def test_generator_initialisation_is_reproducible():
    a = GIN(3, 8, 2, 4, generator=torch.Generator().manual_seed(5))
    b = GIN(3, 8, 2, 4, generator=torch.Generator().manual_seed(5))
    c = GIN(3, 8, 2, 4, generator=torch.Generator().manual_seed(6))
    sa, sb, sc = (torch.cat([p.flatten() for p in m.parameters()]) for m in (a, b, c))
    assert torch.equal(sa, sb) and not torch.equal(sa, sc)
