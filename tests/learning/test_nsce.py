import math

import numpy as np
import pytest
import torch

from reprobook.learning.nsce import (ConfusionTracker, NsCE, hoyer_sparsity, mean_hoyer,
                                     nonsparse_penalty, separation_penalty)
from reprobook.learning.online_stream import colour_shortcut_tasks, run_online


def test_hoyer_extremes_and_scale_invariance():
    d = 16
    assert float(hoyer_sparsity(torch.ones(d))) == pytest.approx(0.0, abs=1e-6)
    assert float(hoyer_sparsity(torch.eye(d)[3])) == pytest.approx(1.0, abs=1e-6)
    w = torch.randn(3, d)
    assert torch.allclose(hoyer_sparsity(w), hoyer_sparsity(-7.0 * w), atol=1e-6)
    # k equal nonzero entries: (sqrt d - sqrt k)/(sqrt d - 1)
    v = torch.zeros(d)
    v[:4] = 2.0
    assert float(hoyer_sparsity(v)) == pytest.approx((4 - 2) / 3, abs=1e-6)
    assert mean_hoyer(torch.stack([torch.ones(d), torch.eye(d)[0]])) == pytest.approx(0.5, abs=1e-6)
    with pytest.raises(ValueError):
        hoyer_sparsity(torch.ones(2, 2, 2))


def test_separation_penalty_vanishes_on_the_simplex_and_matches_brute_force():
    k = 4
    # the regular simplex: k unit vectors with pairwise cos = -1/(k-1)
    E = torch.eye(k) - 1.0 / k
    assert float(separation_penalty(E.double())) == pytest.approx(0.0, abs=1e-10)
    W = torch.randn(6, 5, dtype=torch.float64)
    cls = [0, 2, 3, 5]
    brute = 0.0
    for i in cls:
        for j in cls:
            if i != j:
                c = float(torch.nn.functional.cosine_similarity(W[i], W[j], dim=0))
                brute += max(0.0, c + 1 / 3) ** 2
    assert float(separation_penalty(W, cls)) == pytest.approx(brute, rel=1e-9, abs=1e-12)
    assert float(separation_penalty(W, [1])) == 0.0
    assert float(nonsparse_penalty(W, {1, 4})) == pytest.approx(float(hoyer_sparsity(W[[1, 4]]).sum()))
    with pytest.raises(ValueError, match="rows"):
        separation_penalty(W, [0, 9])


def test_penalties_push_the_way_they_should():
    torch.manual_seed(0)
    W = torch.randn(3, 8)
    W[:, 0] += 5.0                     # every row leans on one shared input: sparse and aligned
    s0, p0 = mean_hoyer(W), float(separation_penalty(W))
    for _ in range(100):
        W.requires_grad_(True)
        g, = torch.autograd.grad(nonsparse_penalty(W) + separation_penalty(W), W)
        W = (W - 0.2 * g).detach()
    assert mean_hoyer(W) < s0 - 0.2
    assert float(separation_penalty(W)) < 0.1 * p0


def test_confusion_tracker():
    t = ConfusionTracker(window=10)
    t.record(torch.tensor([0] * 10 + [1] * 10), torch.tensor([0] * 8 + [2] * 2 + [1] * 10))
    assert t.rate(0, 2) == pytest.approx(0.2)
    assert t.confused(0.1) == {0, 2}
    assert t.confused(0.25) == set()
    t.record(torch.tensor([0] * 10), torch.tensor([0] * 10))       # the window forgets
    assert t.confused(0.1) == set() and math.isnan(t.rate(5, 0))
    with pytest.raises(ValueError):
        t.record(torch.tensor([0, 1]), torch.tensor([0]))


def _tasks():
    return colour_shortcut_tasks(np.random.default_rng(0), per_task=120, test_per_class=30)[0]


def test_targeted_replay_replays_only_confused_classes_and_is_charged():
    torch.manual_seed(0)
    L = NsCE(torch.nn.Linear(32, 10), seed=0, replay_every=5, replay_batch=8, probe=6)
    replayed = []
    orig = L.replay

    def spy():
        m = orig()
        if m is not None:
            replayed.append((set(m["y"].tolist()), L.tracker.confused(L.tau)))
        return m

    L.replay = spy
    r = run_online(L, _tasks(), batch=10, capacity=1e9, rng=np.random.default_rng(1))
    assert replayed, "targeted replay never fired"
    for got, confused in replayed:
        assert got <= confused
    # cost: 10 stream samples + 1 for the regulariser, + probe/3 and the replayed items on checks
    assert set(np.round(r.costs, 6)) <= {11.0, 13.0} | {13.0 + k for k in range(1, 9)}
    assert L.replays == len(replayed)


def test_nsce_components_switch_off():
    torch.manual_seed(0)
    # with both terms off and uniform replay NsCE is throttled ER: same cost per replay step
    L = NsCE(torch.nn.Linear(32, 10), seed=0, gamma_ns=0.0, gamma_sep=0.0, targeted=False,
             replay_every=5)
    r = run_online(L, _tasks(), batch=10, capacity=1e9, rng=np.random.default_rng(1))
    assert set(r.costs.tolist()) <= {10.0, 20.0}
    with pytest.raises(ValueError):
        NsCE(torch.nn.Linear(2, 2), buffer=0)
    with pytest.raises(ValueError, match="tau"):
        NsCE(torch.nn.Linear(2, 2), tau=1.5)


def test_nonsparse_term_lowers_head_sparsity_on_the_colour_stream():
    out = {}
    for g in (0.0, 0.3):
        torch.manual_seed(0)
        L = NsCE(torch.nn.Linear(32, 10), seed=0, gamma_ns=g, gamma_sep=0.0)
        r = run_online(L, _tasks(), batch=10, capacity=1e9, rng=np.random.default_rng(1))
        out[g] = mean_hoyer(torch.tensor(r.heads[-1]))
    assert out[0.3] < out[0.0] - 0.1
