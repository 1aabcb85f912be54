"""Hand-built SSMs: exact against the reference recognisers, and the controls fail."""

import pytest
import torch

from reprobook.data.formal_languages import (IGNORE, dyck_accepts, dyck_next_allowed, dyck_sample,
                                             dyck_test_set, flip_flop, parity)
from reprobook.models.ssm_constructions import (DyckSSM, dyck_ssm, flip_flop_ssm,
                                                parity_signed_ssm, state_bits)


def gen(s=0):
    return torch.Generator().manual_seed(s)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_flip_flop_exact_and_leak_fails(dtype):
    tok, tgt = flip_flop(16, 300, p_write=0.02, p_read=0.2, generator=gen())
    m = tgt != IGNORE
    y = flip_flop_ssm(tok, dtype=dtype)
    assert set(y.unique().tolist()) <= {0.0, 1.0}            # the state only ever holds a bit
    assert torch.equal((y[m] > 0.5).long(), tgt[m])
    assert torch.equal(flip_flop_ssm(tok, impl="reference"), flip_flop_ssm(tok))
    leaky = flip_flop_ssm(tok, leak=0.05)
    assert ((leaky[m] > 0.5).long() != tgt[m]).sum() > 0


@pytest.mark.parametrize("K,h", [(2, 3), (3, 4), (4, 2)])
def test_dyck_ssm_agrees_with_stack(K, h):
    x, lab = dyck_test_set(400, 24, K, h, generator=gen(K + h))
    run = DyckSSM(K, h).run(x)
    assert torch.equal(run["accept"], lab)
    assert state_bits(run["storage"], 2) == h * max(1, (K - 1).bit_length())
    valid = dyck_sample(50, 24, K, h, generator=gen(9))
    assert torch.equal(DyckSSM(K, h).run(valid)["next_allowed"], dyck_next_allowed(valid, K, h))
    assert torch.equal(dyck_ssm(x, K, h, impl="reference"), lab)


def test_dyck_memory_controls():
    x, lab = dyck_test_set(800, 24, 3, 3, generator=gen(1))
    assert (DyckSSM(3, 3, bits_per_level=1).run(x)["accept"] != lab).any()
    assert (DyckSSM(3, 3, levels=2).run(x)["accept"] != lab).any()
    one_hot = DyckSSM(3, 3, encoding="one-hot").run(x)
    assert torch.equal(one_hot["accept"], lab)
    assert state_bits(one_hot["storage"], 2) == 9
    with pytest.raises(ValueError, match="encoding"):
        DyckSSM(3, 3, encoding="gray")
    with pytest.raises(ValueError, match="tokens must lie"):
        DyckSSM(2, 3).run(torch.tensor([[0, 5]]))


def test_parity_signed_and_state_bits():
    bits, tgt = parity(10, 300, generator=gen())
    assert torch.equal(parity_signed_ssm(bits), tgt)
    assert state_bits(torch.tensor([[[0.0, 1.0, 1.0]], [[2.0, 0.0, 0.0]]])) == pytest.approx(1.585, abs=1e-3)
