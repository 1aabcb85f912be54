import pytest
import torch

from reprobook.gnn.message_passing import EdgeWeightGNN


def _inputs(n=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    edges = torch.tensor([[0, 1], [1, 2], [2, 3], [3, 4], [0, 4]])
    return (torch.randn(n, 4, generator=g), edges, torch.randn(len(edges), 2, generator=g),
            torch.randn(n, 2, generator=g))


def test_shapes_and_gradients():
    torch.manual_seed(0)
    net = EdgeWeightGNN(4, 2, hidden=8, layers=2)
    x, e, eb, ed = _inputs()
    theta = net(x, e, eb, ed)
    assert theta.shape == (len(e) + 5,)
    theta.sum().backward()
    assert all(p.grad is not None for p in net.parameters())


def test_edge_weights_are_symmetric_and_permutation_equivariant():
    torch.manual_seed(0)
    net = EdgeWeightGNN(4, 2, hidden=8, layers=2)
    x, e, eb, ed = _inputs()
    theta = net(x, e, eb, ed)
    assert torch.allclose(theta, net(x, e.flip(1), eb, ed), atol=1e-6)
    perm = torch.tensor([3, 0, 4, 1, 2])          # new index of old node i is inv[i]
    inv = torch.argsort(perm)
    theta_p = net(x[perm], inv[e], eb, ed[perm])
    assert torch.allclose(theta_p[:len(e)], theta[:len(e)], atol=1e-5)
    assert torch.allclose(theta_p[len(e):], theta[len(e):][perm], atol=1e-5)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="hidden"):
        EdgeWeightGNN(4, 2, hidden=0)
    net = EdgeWeightGNN(4, 2, hidden=8)
    x, e, eb, ed = _inputs()
    with pytest.raises(ValueError, match="x must"):
        net(x[:, :3], e, eb, ed)
    with pytest.raises(ValueError, match="edges"):
        net(x, e + 10, eb, ed)
    with pytest.raises(ValueError, match="e_dep"):
        net(x, e, eb, ed[:3])
