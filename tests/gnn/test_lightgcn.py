import numpy as np
import pytest
import torch

from reprobook.gnn.lightgcn import (LightGCN, bipartite_adjacency, bpr_loss, propagate,
                                    sample_negatives)


def test_adjacency_is_the_symmetric_normalised_bipartite_matrix():
    edges = np.array([[0, 0], [0, 1], [1, 1], [2, 2], [0, 1]])   # a duplicate counts once
    A = bipartite_adjacency(edges, 4, 3).to_dense().numpy()
    dense = np.zeros((7, 7))
    for u, i in {(0, 0), (0, 1), (1, 1), (2, 2)}:
        dense[u, 4 + i] = dense[4 + i, u] = 1
    d = dense.sum(1)
    d[d == 0] = 1          # user 3 has no edge
    expected = dense / np.sqrt(np.outer(d, d))
    assert np.allclose(A, expected, atol=1e-6)


def test_propagation_is_the_mean_over_layers():
    g = torch.Generator().manual_seed(0)
    edges = np.array([[0, 0], [1, 0], [1, 1], [2, 1]])
    adj = bipartite_adjacency(edges, 3, 2)
    e0 = torch.randn(5, 4, generator=g)
    A = adj.to_dense()
    want = (e0 + A @ e0 + A @ A @ e0) / 3
    assert torch.allclose(propagate(adj, e0, 2), want, atol=1e-6)
    model = LightGCN(3, 2, dim=4, layers=2, generator=g)
    u, i = model(adj)
    assert u.shape == (3, 4) and i.shape == (2, 4)
    with pytest.raises(ValueError, match="left_extra"):
        model(adj, torch.zeros(2, 4))


def test_bpr_training_ranks_observed_items_above_the_rest():
    rng = np.random.default_rng(0)
    # two communities: users 0-19 like items 0-4, users 20-39 like items 5-9
    edges = np.array([(u, i) for u in range(40) for i in range(10)
                      if (u < 20) == (i < 5) and rng.random() < 0.6])
    pos = np.zeros((40, 10), bool)
    pos[edges[:, 0], edges[:, 1]] = True
    adj = bipartite_adjacency(edges, 40, 10)
    model = LightGCN(40, 10, dim=8, layers=2, generator=torch.Generator().manual_seed(0))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    e = torch.from_numpy(edges)
    for _ in range(30):
        neg = torch.from_numpy(sample_negatives(edges, pos, rng))
        u, i = model(adj)
        loss = bpr_loss(u[e[:, 0]], i[e[:, 1]], i[neg])
        opt.zero_grad()
        loss.backward()
        opt.step()
    u, i = model(adj)
    s = (u @ i.T).detach().numpy()
    same = np.array([[(a < 20) == (b < 5) for b in range(10)] for a in range(40)])
    assert s[same].mean() > s[~same].mean() + 0.5


def test_negatives_are_never_positives_and_bad_input_is_named():
    rng = np.random.default_rng(1)
    pos = rng.random((30, 6)) < 0.7
    pos[:, 0] = False
    edges = np.argwhere(pos)
    neg = sample_negatives(edges, pos, rng)
    assert not pos[edges[:, 0], neg].any()
    full = np.ones((2, 3), bool)
    with pytest.raises(ValueError, match="every right node"):
        sample_negatives(np.array([[0, 1]]), full, rng)
    with pytest.raises(ValueError, match="shape"):
        bipartite_adjacency(np.array([0, 1, 2]), 3, 3)
    with pytest.raises(ValueError, match="right indices"):
        bipartite_adjacency(np.array([[0, 5]]), 3, 3)
    with pytest.raises(ValueError, match="same shape"):
        bpr_loss(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(2, 2))
