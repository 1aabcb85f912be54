import pytest
import torch
import torch.nn as nn

from reprobook.models.lora import LoRALinear, add_lora, lora_layers, lora_parameters, merge_lora
from reprobook.models.tiny_transformer import TinyTransformer


def model(seed=0):
    torch.manual_seed(seed)
    return TinyTransformer(vocab_size=11, d_model=16, n_layers=2, n_heads=2, max_len=8)


def test_adapted_model_starts_as_the_base_and_trains_only_the_factors():
    m = model()
    x = torch.randint(0, 11, (3, 8))
    before = m(x)
    add_lora(m, "attn", r=2, alpha=4)
    assert set(lora_layers(m)) == {f"blocks.{i}.attn.{p}" for i in range(2) for p in ("qkv", "proj")}
    assert torch.equal(m(x), before)            # B = 0: exactly the base model
    trainable = [n for n, p in m.named_parameters() if p.requires_grad]
    assert trainable and all(n.endswith(("lora_A", "lora_B")) for n in trainable)
    assert sum(p.numel() for p in lora_parameters(m)) == 2 * 2 * ((16 + 48) + (16 + 16))


def test_forward_is_the_low_rank_update_and_merging_keeps_the_function():
    torch.manual_seed(1)
    base = nn.Linear(6, 5)
    lo = LoRALinear(base, r=2, alpha=3.0)
    with torch.no_grad():
        lo.lora_B.normal_()
    x = torch.randn(4, 6)
    want = x @ (base.weight + 1.5 * lo.lora_B @ lo.lora_A).T + base.bias
    torch.testing.assert_close(lo(x), want)
    torch.testing.assert_close(lo.merged()(x), want)

    m = model()
    add_lora(m, ["head"], r=3, alpha=3)
    with torch.no_grad():
        m.head.lora_B.normal_()
    xs = torch.randint(0, 11, (2, 8))
    y = m(xs)
    merge_lora(m)
    assert not lora_layers(m) and isinstance(m.head, nn.Linear)
    torch.testing.assert_close(m(xs), y)


def test_a_training_step_moves_only_the_adapter():
    m = add_lora(model(), "attn", r=2, alpha=2)
    frozen = {n: p.clone() for n, p in m.named_parameters() if not p.requires_grad}
    opt = torch.optim.SGD(lora_parameters(m), lr=0.5)
    x = torch.randint(0, 11, (4, 8))
    for _ in range(2):
        opt.zero_grad()
        m(x).logsumexp(-1).mean().backward()
        opt.step()
    assert all(torch.equal(p, frozen[n]) for n, p in m.named_parameters() if n in frozen)
    assert any(l.lora_B.abs().sum() > 0 for l in lora_layers(m).values())


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="no nn.Linear matches targets 'atn'"):
        add_lora(model(), "atn", r=2, alpha=2)
    with pytest.raises(ValueError, match="exceeds the layer's smaller side"):
        LoRALinear(nn.Linear(4, 3), r=4, alpha=1)
    with pytest.raises(ValueError, match="rank r must be a positive int"):
        LoRALinear(nn.Linear(4, 3), r=0, alpha=1)
    with pytest.raises(TypeError, match="wraps an nn.Linear"):
        LoRALinear(nn.Conv1d(2, 2, 1), r=1, alpha=1)
    with pytest.raises(ValueError, match="call add_lora first"):
        lora_parameters(model())
