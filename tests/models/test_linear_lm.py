"""LinearLM with pluggable mixers, and the MQAR training loop."""
import math
from dataclasses import replace

import pytest
import torch
import torch.nn as nn

from reprobook import seed_everything
from reprobook.data.mqar import make_mqar
from reprobook.models.linear_lm import (MIXERS, LinearLM, QKVMixer, ShortConv, linear_attention,
                                        register_mixer)
from reprobook.models.train import (MQARTask, TrainConfig, evaluate, held_out_set, lookup_accuracy,
                                    lr_at, run_mqar, train_mqar)


@pytest.mark.parametrize("mixer", ["deltanet", "linear", "softmax"])
def test_shapes_and_causality(mixer):
    torch.manual_seed(0)
    model = LinearLM(50, d_model=32, n_layers=2, n_heads=2, mixer=mixer).double()
    x = torch.randint(0, 50, (2, 20))
    y = model(x)
    assert y.shape == (2, 20, 50)
    x2 = x.clone()
    x2[:, 12:] = (x2[:, 12:] + 7) % 50                  # change the future only
    assert torch.allclose(model(x2)[:, :12], y[:, :12], atol=1e-12)
    assert not torch.allclose(model(x2)[:, 12:], y[:, 12:])


def test_deltanet_and_linear_have_the_same_size():
    a = LinearLM(64, d_model=32, mixer="deltanet").num_parameters()
    b = LinearLM(64, d_model=32, mixer="linear").num_parameters()
    assert a == b


def test_linear_attention_parallel_form_equals_its_recurrence():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 9, 3, 4, generator=g), torch.randn(2, 9, 3, 4, generator=g)
    v, beta = torch.randn(2, 9, 3, 5, generator=g), torch.rand(2, 9, 3, generator=g)
    o = linear_attention(q, k, v, beta, 0.5)
    S = torch.zeros(2, 3, 4, 5)
    for t in range(9):
        S = S + beta[:, t, :, None, None] * k[:, t, :, :, None] * v[:, t, :, None, :]
        assert torch.allclose(o[:, t], torch.einsum("bhkv,bhk->bhv", S, 0.5 * q[:, t]), atol=1e-5)


def test_deltanet_mixer_chunk_size_does_not_change_output():
    torch.manual_seed(0)
    m = LinearLM(40, d_model=16, mixer="deltanet", mixer_options={"chunk_size": 4}).double()
    x = torch.randint(0, 40, (2, 13))
    y4 = m(x)
    for blk in m.blocks:
        blk.mixer.options["chunk_size"] = 64
    assert torch.allclose(m(x), y4, atol=1e-10)


def test_short_conv_is_a_causal_depthwise_conv():
    torch.manual_seed(0)
    sc = ShortConv(6, 3).double()
    x = torch.randn(2, 7, 6, dtype=torch.float64)
    conv = nn.Conv1d(6, 6, 3, groups=6, padding=2, bias=False).double()
    with torch.no_grad():
        conv.weight.copy_(sc.weight.flip(0).T[:, None, :])
    ref = conv(x.transpose(1, 2))[..., :7].transpose(1, 2)
    assert torch.allclose(sc(x), ref, atol=1e-12)


def test_register_a_new_mixer():
    @register_mixer("test-identity-v")
    class VMixer(QKVMixer):
        def mix(self, q, k, v, beta, x):
            return v

    try:
        m = LinearLM(30, d_model=16, mixer="test-identity-v")
        assert m(torch.randint(0, 30, (1, 5))).shape == (1, 5, 30)
        with pytest.raises(ValueError, match="already registered"):
            register_mixer("test-identity-v")(type("Other", (QKVMixer,), {}))
    finally:
        MIXERS.pop("test-identity-v")


def test_bad_arguments():
    with pytest.raises(ValueError, match="mixer"):
        LinearLM(10, mixer="mamba")
    with pytest.raises(ValueError, match="d_model"):
        LinearLM(10, d_model=0)
    with pytest.raises(ValueError, match="n_heads"):
        LinearLM(10, d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="tokens"):
        LinearLM(10)(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="seq_len"):
        MQARTask(seq_len=8, num_kv_pairs=4)
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)


def test_lr_schedule():
    cfg = TrainConfig(steps=100, warmup=10, lr=1.0)
    assert lr_at(0, cfg) == pytest.approx(0.1) and lr_at(9, cfg) == pytest.approx(1.0)
    assert lr_at(10, cfg) == pytest.approx(1.0) and lr_at(99, cfg) < 0.01
    assert all(lr_at(s, cfg) >= lr_at(s + 1, cfg) for s in range(10, 99))
    assert not math.isnan(lr_at(0, TrainConfig(steps=5, warmup=0, lr=1.0)))


def test_training_learns_and_is_deterministic():
    task = MQARTask(seq_len=16, num_kv_pairs=2, vocab_size=16)
    cfg = TrainConfig(steps=40, batch_size=16, lr=5e-3, warmup=4, eval_examples=64, eval_every=20)
    kw = dict(d_model=16, n_layers=1)
    a = run_mqar("deltanet", task, cfg, seed=0, model_kwargs=kw)
    b = run_mqar("deltanet", task, cfg, seed=0, model_kwargs=kw)
    assert a.accuracy == b.accuracy and a.history == b.history
    assert a.history[-1]["loss"] < a.history[0]["loss"]
    assert 0.0 <= a.accuracy <= 1.0 and "accuracy" in a.history[19]
    assert a.to_dict()["mixer"] == "deltanet"


def test_evaluate_matches_batch_accuracy():
    torch.manual_seed(0)
    model = LinearLM(32, d_model=16, n_layers=1, mixer="linear")
    batch = make_mqar(10, 16, 2, 32, seed=1)
    with torch.no_grad():
        expected = batch.accuracy(model(batch.inputs))
    assert evaluate(model, batch, batch_size=3) == pytest.approx(expected)
    assert model.training


def test_train_mqar_with_a_given_model():
    torch.manual_seed(0)
    model = LinearLM(16, d_model=16, n_layers=1, mixer="softmax", mlp_ratio=0)
    res = train_mqar(model, MQARTask(16, 2, 16), TrainConfig(steps=3, batch_size=4, eval_examples=8),
                     seed=3, mixer="softmax")
    assert res.num_parameters == model.num_parameters() and len(res.history) == 3


def test_eval_at_start_scores_the_untrained_model_without_changing_training():
    task = MQARTask(seq_len=16, num_kv_pairs=2, vocab_size=16)
    kw = dict(d_model=16, n_layers=1, mlp_ratio=0)
    cfg = TrainConfig(steps=5, batch_size=8, eval_examples=32)
    plain = run_mqar("linear", task, cfg, seed=2, model_kwargs=kw)
    with_start = run_mqar("linear", task, replace(cfg, eval_at_start=True), seed=2, model_kwargs=kw)
    assert plain.initial_accuracy is None
    assert with_start.history == plain.history and with_start.accuracy == plain.accuracy
    # the untrained model of the same seed, scored on the same held-out set
    seed_everything(2)
    fresh = LinearLM(16, mixer="linear", **kw)
    held_out = held_out_set(task, cfg, 2)
    assert with_start.initial_accuracy == evaluate(fresh, held_out)


def test_lookup_oracle_answers_every_query_and_is_not_fooled_by_fillers():
    task = MQARTask(seq_len=32, num_kv_pairs=4, vocab_size=16, random_non_queries=True)
    cfg = TrainConfig(eval_examples=64)
    batch = held_out_set(task, cfg, seed=3)
    assert lookup_accuracy(batch) == 1.0
    # the held-out set is the one training scores on
    assert torch.equal(batch.inputs, held_out_set(task, cfg, seed=3).inputs)
    # a lookup that reads the wrong neighbour is wrong: shift the answers by one value
    broken = replace(batch, targets=torch.where(batch.targets >= 0, batch.targets + 1, batch.targets))
    assert lookup_accuracy(broken) < 0.2
