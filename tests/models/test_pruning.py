"""Layer-wise ratios, exact counts and the magnitude / Wanda masks."""
import numpy as np
import pytest
import torch

from reprobook.models.pruning import (layerwise_ratios, magnitude_mask, prune_counts, prune_layers,
                                      realized_sparsity, uniform_ratios, wanda_mask)


def test_alpha_ratios_meet_the_budget_and_follow_the_score():
    sizes = [100, 400, 100, 400]
    r = layerwise_ratios([2.0, 2.0, 4.0, 4.0], sizes, 0.6, 0.2, groups=[0, 0, 1, 1])
    assert np.dot(r, sizes) / sum(sizes) == pytest.approx(0.6, abs=1e-12)
    assert r[0] == r[1] < r[2] == r[3]
    assert r[2] / r[0] == pytest.approx(1.2 / 0.8)
    flat = layerwise_ratios([3.0] * 4, sizes, 0.6, 0.3)
    assert np.allclose(flat, uniform_ratios(sizes, 0.6))


def test_clipping_is_refused_or_done_within_budget():
    with pytest.raises(ValueError, match="clip"):
        layerwise_ratios([1.0, 5.0], [10, 10], 0.9, 0.5)
    r = layerwise_ratios([1.0, 5.0], [10, 10], 0.9, 0.5, clip=True)
    assert r.max() <= 1 and np.mean(r) == pytest.approx(0.9)


def test_counts_are_exact():
    sizes = [7, 13, 101, 3]
    k = prune_counts(sizes, [0.33, 0.71, 0.52, 0.9], 0.5)
    assert k.sum() == round(0.5 * sum(sizes)) and np.all(k <= sizes)


def test_magnitude_mask_prunes_the_smallest():
    W = torch.tensor([[0.1, -5.0], [2.0, -0.05]])
    m = magnitude_mask(W, 2)
    assert m.tolist() == [[True, False], [False, True]]


def test_wanda_mask_uses_activation_norms_per_row_and_exact_count():
    W = torch.tensor([[1.0, 1.0, 1.0], [3.0, 2.0, 1.0]])
    m = wanda_mask(W, torch.tensor([10.0, 1.0, 0.1]), 3)
    assert int(m.sum()) == 3
    assert m[0, 2] and m[1, 2]                     # lowest |W| * norm in each row
    assert m[0, 1] and not m[1, 1]                 # remainder goes to the row with the lower next score
    g = torch.Generator().manual_seed(0)
    W = torch.randn(5, 8, generator=g)
    for k in range(0, 41, 7):
        m = wanda_mask(W, torch.rand(8, generator=g), k)
        assert int(m.sum()) == k and int(m.sum(1).max() - m.sum(1).min()) <= 1


def test_prune_layers_restores_and_counts():
    torch.manual_seed(0)
    layers = {"a": torch.nn.Linear(6, 4), "b": torch.nn.Linear(4, 6)}
    before = {n: l.weight.clone() for n, l in layers.items()}
    norms = {"a": torch.ones(6), "b": torch.ones(4)}
    with prune_layers(layers, [5, 7], "wanda", norms=norms) as p:
        assert int((layers["a"].weight == 0).sum()) == 5
        assert realized_sparsity(p.masks) == pytest.approx(12 / 48)
    assert all(torch.equal(layers[n].weight, before[n]) for n in layers)
    seen = []
    prune_layers(layers, [1, 1], "wanda", groups=[0, 1],
                 norms_fn=lambda names: seen.append((names, int((layers["a"].weight == 0).sum())))
                 or {n: torch.ones(layers[n].in_features) for n in names}).restore()
    assert seen == [(["a"], 0), (["b"], 1)]        # sequential: b's norms after a was pruned


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown pruning method"):
        prune_layers({"a": torch.nn.Linear(2, 2)}, [1], "random")
    with pytest.raises(ValueError, match="exactly one of"):
        prune_layers({"a": torch.nn.Linear(2, 2)}, [1], "wanda")
    with pytest.raises(ValueError, match="global sparsity"):
        uniform_ratios([3], 1.5)
    with pytest.raises(ValueError, match="col_norms"):
        wanda_mask(torch.ones(2, 3), torch.ones(2), 1)
