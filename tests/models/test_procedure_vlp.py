from dataclasses import replace

import numpy as np
import pytest
import torch

from reprobook.data.procedural_videos import make_videos, make_world, noisy_pool
from reprobook.models.procedure_vlp import (VARIANTS, ProcedureVLP, TextTables, Variant,
                                            candidate_tensor, dtw_loss, evaluate, order_candidates,
                                            stack_sets, text_infonce, train)

torch.set_num_threads(1)


def _tiny(seeds=(0, 1), n=10, n_noisy=3):
    sets, pools = [], []
    for s in seeds:
        r = np.random.default_rng(s)
        w = make_world(r)
        pools.append(noisy_pool(n_noisy, r))
        sets.append(make_videos(w, n, r, pools[-1], min_len=2, max_len=3))
    g = torch.Generator().manual_seed(0)
    # random unit "sentence embeddings" stand in for MiniLM (the tests stay offline and fast)
    unit = lambda *s: torch.nn.functional.normalize(torch.randn(*s, 384, generator=g), dim=-1)  # noqa: E731
    text = TextTables(names=unit(10), paraphrases=unit(10, 3), noisy=unit(len(seeds), 10 * n_noisy))
    return sets, text


def test_replicates_train_independently():
    # changing replicate 1's data leaves replicate 0's trained weights exactly as they were:
    # the summed loss gives each replicate its own gradient, and Adam is elementwise
    sets, text = _tiny()
    d1 = stack_sets(sets)
    d2 = {k: v.clone() for k, v in d1.items()}
    d2["x"][1] = 2.0 * d2["x"][1] + 1.0
    m1, m2 = ProcedureVLP([5, 6]), ProcedureVLP([5, 6])
    train(m1, VARIANTS["C"], d1, text, steps=3, batch_size=4, seed=1)
    train(m2, VARIANTS["C"], d2, text, steps=3, batch_size=4, seed=1)
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        assert torch.allclose(p1[0], p2[0], atol=1e-6)
        assert not torch.allclose(p1[1], p2[1])


def test_variant_c_loss_decreases():
    # the notes' smoke assert: C's mean loss over its last 10 steps is below its first 10
    sets, text = _tiny(n=12)
    m = ProcedureVLP([0, 1])
    L = train(m, VARIANTS["C"], stack_sets(sets), text, steps=40, batch_size=6, seed=0)
    assert L[-10:].mean() < L[:10].mean()


def test_text_infonce_prefers_the_right_text():
    t = torch.nn.functional.normalize(torch.randn(1, 4, 8), dim=-1)
    y = torch.tensor([[0, 1, 2, 3, 1]])
    valid = torch.ones(1, 5, dtype=torch.bool)
    good = text_infonce(t[:, y[0]], t, y, valid)
    bad = text_infonce(t[:, (y[0] + 1) % 4], t, y, valid)
    assert good.item() < bad.item()
    # invalid rows do not count
    v2 = valid.clone()
    v2[0, 4] = False
    u = t[:, y[0]].clone()
    u[0, 4] = -u[0, 4]
    assert text_infonce(u, t, y, v2).item() == pytest.approx(
        text_infonce(t[:, y[0, :4]], t, y[:, :4], valid[:, :4]).item(), rel=1e-5)


def test_dtw_loss_hinge_uses_reversed_video():
    Tx = torch.nn.functional.normalize(torch.randn(1, 4, 8), dim=-1)
    V = Tx.repeat_interleave(3, dim=1)
    aligned = dtw_loss(V, Tx, [12], [4], reverse_weight=1.0, beta=0.1)
    no_hinge = dtw_loss(V, Tx, [12], [4], reverse_weight=0.0, beta=0.1)
    assert aligned.item() == pytest.approx(no_hinge.item())     # hinge inactive when aligned
    rev = dtw_loss(V.flip(1), Tx, [12], [4], reverse_weight=1.0, beta=0.1)
    assert rev.item() > aligned.item() + 0.1


def test_order_candidates():
    r = np.random.default_rng(0)
    steps = np.array([0, 1, 2, 3, 4, -1])
    c = order_candidates(steps, r, "random")
    assert c.shape == (5, 6) and (c[0] == steps).all() and (c[1, :5] == steps[:5][::-1]).all()
    assert len({tuple(x) for x in c}) == 5
    s = order_candidates(steps, r, "swaps")
    assert s.shape == (5, 6) and all((x[:5] != steps[:5]).sum() == 2 for x in s[1:])
    with pytest.raises(ValueError, match="kind"):
        order_candidates(steps, r, "other")


def test_evaluate_ranges_and_oracle():
    sets, text = _tiny()
    m = ProcedureVLP([0, 1])
    data = stack_sets(sets)
    cands = {"random": candidate_tensor(sets, [0, 1], "random", 4)}
    out = evaluate(m, data, text.names, cands)
    for k in ("E1", "F1", "E2_random", "E3"):
        assert out[k].shape == (2,) and ((0 <= out[k]) & (out[k] <= 1)).all()


def test_bad_variant_and_shapes():
    with pytest.raises(ValueError, match="clip_text"):
        Variant("x", clip_text="llm")
    with pytest.raises(ValueError, match="gamma"):
        replace(VARIANTS["C"], gamma=0.0)
    m = ProcedureVLP([0])
    with pytest.raises(ValueError, match="x must be"):
        m.encode_clips(torch.zeros(2, 1, 3, 48), torch.ones(2, 1, 3, dtype=torch.bool))
