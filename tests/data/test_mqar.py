"""MQAR generator: layout, ground truth, determinism and argument checks."""
import pytest
import torch

from reprobook.data.mqar import IGNORE_INDEX, MQARBatch, make_mqar


@pytest.mark.parametrize("power_a", [None, 0.01])
@pytest.mark.parametrize("random_non_queries", [True, False])
def test_layout_and_ground_truth(power_a, random_non_queries):
    N, L, P, vocab = 32, 48, 6, 64
    b = make_mqar(N, L, P, vocab, power_a=power_a, random_non_queries=random_non_queries, seed=3)
    assert isinstance(b, MQARBatch)
    assert b.inputs.shape == b.targets.shape == (N, L) and b.inputs.dtype == torch.long
    assert b.keys.shape == b.values.shape == b.query_positions.shape == (N, P)
    half = vocab // 2
    assert ((b.keys >= 1) & (b.keys < half)).all() and ((b.values >= half) & (b.values < vocab)).all()
    assert (b.inputs >= 0).all() and (b.inputs < vocab).all()
    for n in range(N):
        ks, vs = b.keys[n].tolist(), b.values[n].tolist()
        assert len(set(ks)) == P and len(set(vs)) == P               # one answer per key
        assert b.inputs[n, 0:2 * P:2].tolist() == ks and b.inputs[n, 1:2 * P:2].tolist() == vs
        answer = dict(zip(ks, vs))
        pos = b.query_positions[n].tolist()
        assert pos == sorted(pos) and len(set(pos)) == P
        assert all(p >= 2 * P and p + 1 < L and (p - 2 * P) % 2 == 0 for p in pos)
        asked = [b.inputs[n, p].item() for p in pos]
        assert sorted(asked) == sorted(ks)                            # every key asked once
        for p in pos:
            key = b.inputs[n, p].item()
            assert b.targets[n, p].item() == answer[key] == b.inputs[n, p + 1].item()
        scored = (b.targets[n] != IGNORE_INDEX).nonzero().flatten().tolist()
        assert scored == pos
        if not random_non_queries:
            used = set(range(2 * P)) | set(pos) | {p + 1 for p in pos}
            assert all(b.inputs[n, i].item() == 0 for i in range(L) if i not in used)
    assert b.query_mask.sum().item() == b.num_queries == N * P


def test_same_seed_same_batch_and_generator_stream():
    a = make_mqar(8, 32, 4, 64, seed=1)
    b = make_mqar(8, 32, 4, 64, seed=1)
    c = make_mqar(8, 32, 4, 64, seed=2)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.inputs, c.inputs)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    x1, x2 = make_mqar(4, 32, 4, 64, generator=g1), make_mqar(4, 32, 4, 64, generator=g1)
    y1 = make_mqar(4, 32, 4, 64, generator=g2)
    assert torch.equal(x1.inputs, y1.inputs) and not torch.equal(x1.inputs, x2.inputs)


def test_power_law_puts_queries_early():
    uni = make_mqar(256, 128, 4, 256, seed=0)
    pw = make_mqar(256, 128, 4, 256, power_a=0.01, seed=0)
    assert pw.query_positions.float().mean() < uni.query_positions.float().mean() - 10


def test_accuracy_of_perfect_and_wrong_logits():
    b = make_mqar(4, 32, 4, 64, seed=0)
    perfect = torch.nn.functional.one_hot(b.targets.clamp_min(0), 64).float()
    assert b.accuracy(perfect) == 1.0
    wrong = torch.roll(perfect, 1, dims=-1)
    assert b.accuracy(wrong) == 0.0
    with pytest.raises(ValueError, match="logits"):
        b.accuracy(perfect[:, :-1])
    assert b.to("cpu").inputs.device.type == "cpu"


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="seq_len"):
        make_mqar(2, 15, 4, 64)
    with pytest.raises(ValueError, match="vocab_size"):
        make_mqar(2, 64, 8, 16)
    with pytest.raises(ValueError, match="num_kv_pairs"):
        make_mqar(2, 64, 0, 64)
    with pytest.raises(ValueError, match="num_examples"):
        make_mqar(0, 64, 4, 64)
    with pytest.raises(ValueError, match="power_a"):
        make_mqar(2, 64, 4, 64, power_a=2.0)
    with pytest.raises(ValueError, match="seed or generator"):
        make_mqar(2, 64, 4, 64, seed=0, generator=torch.Generator())
    with pytest.raises(TypeError, match="generator"):
        make_mqar(2, 64, 4, 64, generator=0)
