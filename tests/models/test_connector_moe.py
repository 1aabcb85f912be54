import numpy as np
import pytest
import torch

from reprobook.data.digit_tasks import TOKEN, VOCAB, make_examples
from reprobook.models.connector_moe import (ConnectorMoE, DigitMLLM, FrozenPatchEncoder, LinearConnector,
                                            WideLinearConnector, answer_loss, batch_tensors,
                                            evaluate_mllm, matched_width, n_params, routing_js,
                                            train_mllm)
from reprobook.models.tiny_transformer import TinyTransformer


def _vis(B=6, N=4, d=12, seed=0):
    return torch.randn(B, N, d, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("router", ["soft", "sparse", "hard", "constant", "visual"])
def test_weights_sum_to_one(router):
    torch.manual_seed(0)
    m = ConnectorMoE(12, 8, n_tasks=5, n_experts=3, router=router, top_k=2)
    task = torch.tensor([0, 1, 2, 3, 4, 0])
    out = m(_vis(), task)
    assert out.shape == (6, 4, 8)
    w = m.last_weights
    assert torch.allclose(w.sum(-1), torch.ones(6, 4), atol=1e-6) and (w >= 0).all()
    if router == "sparse":
        assert ((w > 0).sum(-1) == 2).all()
    if router == "hard":
        assert (w.argmax(-1)[:, 0] == task % 3).all()


def test_output_is_the_weighted_sum_of_experts():
    torch.manual_seed(0)
    m = ConnectorMoE(12, 8, n_tasks=5, n_experts=3)
    v, task = _vis(), torch.tensor([0, 1, 2, 3, 4, 0])
    out = m(v, task)
    w = m.last_weights
    ref = sum(w[..., e:e + 1] * m.experts[e](v) for e in range(3))
    assert torch.allclose(out, ref, atol=1e-6)


def test_router_sees_the_task_and_visual_router_does_not():
    torch.manual_seed(0)
    v = _vis(B=2)
    v[1] = v[0]
    for router, differs in [("soft", True), ("visual", False), ("constant", False)]:
        m = ConnectorMoE(12, 8, n_tasks=5, router=router)
        m(v, torch.tensor([0, 3]))
        d = (m.last_weights[0] - m.last_weights[1]).abs().max()
        assert (d > 1e-4) == differs, router


def test_single_expert_is_a_linear_connector():
    torch.manual_seed(0)
    m = ConnectorMoE(12, 8, n_tasks=5, n_experts=1)
    lin = LinearConnector(12, 8)
    lin.proj.load_state_dict(m.experts[0].state_dict())
    v, task = _vis(), torch.zeros(6, dtype=torch.long)
    assert torch.allclose(m(v, task), lin(v), atol=1e-6)


def test_wide_linear_is_linear_and_matched():
    torch.manual_seed(0)
    target = n_params(ConnectorMoE(128, 64, 5))
    h = matched_width(128, 64, target)
    w = WideLinearConnector(128, 64, h)
    assert abs(n_params(w) - target) <= 128 + 64 + 1
    a, b = _vis(d=128, seed=1), _vis(d=128, seed=2)
    # affine: f(a) + f(b) - f(0) = f(a + b)
    z = torch.zeros_like(a)
    assert torch.allclose(w(a) + w(b) - w(z), w(a + b), atol=1e-4)
    mlp = WideLinearConnector(128, 64, h, activation="gelu")
    assert not torch.allclose(mlp(a) + mlp(b) - mlp(z), mlp(a + b), atol=1e-3)


def test_bad_input():
    with pytest.raises(ValueError, match="router"):
        ConnectorMoE(4, 4, 2, router="magic")
    m = ConnectorMoE(12, 8, n_tasks=2)
    with pytest.raises(ValueError, match="visual tokens"):
        m(torch.zeros(2, 12), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="task indices"):
        m(_vis(B=2), torch.tensor([0, 5]))
    with pytest.raises(ValueError, match="rate"):
        FrozenPatchEncoder(rate=3)


def test_routing_js():
    w = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.5, 0.5]])
    # task 2 routes (0.5, 0.5): its JS to a one-hot task is log 2 - (3/4) log(4/3) ... computed here
    half = 0.5 * (1.0 * np.log(1 / 0.75)) + 0.5 * (0.5 * np.log(0.5 / 0.75) + 0.5 * np.log(0.5 / 0.25))
    assert routing_js(w, np.array([0, 1, 2, 2]), 3) == pytest.approx((np.log(2) + 2 * half) / 3)
    assert routing_js(w[2:], np.array([0, 1]), 2) == 0.0
    assert routing_js(w[:2], np.array([0, 1]), 2) == pytest.approx(np.log(2))


def _model(connector_kind="cmoe", d=16):
    torch.manual_seed(0)
    enc = FrozenPatchEncoder(8, 4, seed=0)
    con = (ConnectorMoE(enc.d_out, d, 5, router_hidden=8) if connector_kind == "cmoe"
           else LinearConnector(enc.d_out, d))
    llm = TinyTransformer(len(VOCAB), d_model=d, n_layers=1, n_heads=2, max_len=8)
    return DigitMLLM(enc, con, llm, TOKEN["<img>"])


def _batch(n=40):
    g = np.random.default_rng(0)
    px, lab = g.integers(0, 17, (n, 64)).astype(float), g.integers(0, 10, n)
    return make_examples(px, lab, np.arange(n) % 5, np.random.default_rng(1))


def test_encoder_is_frozen_and_precomputed_tokens_agree():
    m, b = _model(), _batch(10)
    pix = torch.as_tensor(b.pixels, dtype=torch.float32)
    tok, task = torch.as_tensor(b.tokens), torch.as_tensor(b.task)
    assert torch.allclose(m(pix, tok, task), m(m.visual_tokens(pix), tok, task))
    assert all(not p.requires_grad for p in m.encoder.parameters())
    loss = answer_loss(m, *batch_tensors(m, b))
    loss.backward()
    assert m.connector.experts[0].weight.grad is not None


def test_training_lowers_the_loss_and_is_seeded():
    b = _batch(60)
    m1, m2 = _model(), _model()
    l1 = train_mllm(m1, b, steps=30, batch_size=16, lr=1e-2, seed=3)
    l2 = train_mllm(m2, b, steps=30, batch_size=16, lr=1e-2, seed=3)
    assert l1 == l2
    assert np.mean(l1[-5:]) < np.mean(l1[:5])
    ev = evaluate_mllm(m1, b)
    assert ev["correct"].shape == (60,) and ev["weights"].shape == (60, 4, 3)
    assert evaluate_mllm(_model("linear"), b)["weights"] is None
