"""GLA, GSA and ABC token mixers plugged into the small LM."""

import pytest
import torch

from reprobook.models.linear_lm import MIXERS, LinearLM
from reprobook.models.slot_mixers import ABCMixer, GLAMixer, GSAMixer, recurrent_state_size


def test_registered():
    assert MIXERS["gla"] is GLAMixer and MIXERS["gsa"] is GSAMixer and MIXERS["abc"] is ABCMixer


@pytest.mark.parametrize("name,opts", [("gla", {}), ("gsa", {"n_slots": 8}), ("abc", {"n_slots": 8})])
def test_lm_forward_backward_and_causality(name, opts):
    torch.manual_seed(0)
    model = LinearLM(40, d_model=16, n_layers=2, mixer=name, mixer_options=dict(opts, chunk_size=8))
    x = torch.randint(0, 40, (2, 21))
    logits = model(x)
    assert logits.shape == (2, 21, 40) and torch.isfinite(logits).all()
    logits.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    # causal: changing the last tokens leaves earlier positions unchanged
    y = x.clone()
    y[:, 15:] = (y[:, 15:] + 1) % 40
    with torch.no_grad():
        assert torch.allclose(model(x)[:, :15], model(y)[:, :15], atol=1e-5)


@pytest.mark.parametrize("cls,opts", [(GLAMixer, {}), (GSAMixer, {"n_slots": 6}), (ABCMixer, {"n_slots": 6})])
def test_chunked_mixer_equals_recurrent_mixer(cls, opts):
    torch.manual_seed(1)
    fast = cls(12, 2, chunk_size=8, **opts).double()
    slow = cls(12, 2, impl="reference", **opts).double()
    slow.load_state_dict(fast.state_dict())
    x = torch.randn(2, 19, 12, dtype=torch.float64)
    assert torch.allclose(fast(x), slow(x), atol=1e-10)


def test_state_sizes():
    assert GLAMixer(32, 1).state_size() == 32 * 32
    assert GSAMixer(32, 1, n_slots=16).state_size() == 2 * 16 * 32 == GLAMixer(32, 1).state_size()
    assert ABCMixer(32, 2, n_slots=4).state_size() == 2 * 4 * (16 + 16)
    model = LinearLM(20, d_model=8, mixer="softmax")
    with pytest.raises(ValueError, match="seq_len"):
        recurrent_state_size(model.blocks[0].mixer)
    assert recurrent_state_size(model.blocks[0].mixer, seq_len=10) == 10 * 16


def test_bad_options_name_the_argument():
    with pytest.raises(ValueError, match="n_slots"):
        GSAMixer(16, 1, n_slots=0)
    with pytest.raises(ValueError, match="gate_normalizer"):
        GLAMixer(16, 1, gate_normalizer=-1)
    with pytest.raises(ValueError, match="gate_rank"):
        GLAMixer(16, 1, gate_rank=1.5)


def test_gsa_with_half_as_many_slots_keeps_as_many_numbers_as_gla():
    """Equal state at m = d/2 (2 m d = d^2), counted from the final states the kernels return, and
    the mixers' own accounting agrees (this was the gated-slot-attention chapter's `equal-state`,
    true by construction, so a unit test rather than a claim)."""
    from reprobook.kernels.gla import chunk_gla
    from reprobook.kernels.gsa import chunk_gsa

    for d in (16, 32):
        probe = torch.zeros(1, 3, 1, d)
        slots = torch.zeros(1, 3, 1, d // 2)
        _, gla_state = chunk_gla(probe, probe, probe, probe, output_final_state=True)
        _, (hk, hv) = chunk_gsa(probe, probe, probe, slots, slots, output_final_state=True)
        assert hk.numel() + hv.numel() == gla_state.numel() == d * d
        assert GSAMixer(d, 1, n_slots=d // 2).state_size() == hk.numel() + hv.numel()
        assert GLAMixer(d, 1).state_size() == gla_state.numel()
        # and twice the slots is twice the state
        _, big = chunk_gsa(probe, probe, probe, probe, probe, output_final_state=True)
        assert sum(x.numel() for x in big) == 2 * d * d


def test_gate_bias_starts_gates_near_one_and_is_trained():
    torch.manual_seed(0)
    m = GSAMixer(16, n_slots=4, gate_bias=3.0)
    assert torch.equal(m.f_proj.bias, torch.full((4,), 3.0)) and m.f_proj.bias.requires_grad
    x = torch.zeros(1, 5, 16)                        # zero input: the gate logits are the bias alone
    alpha = torch.exp(torch.nn.functional.logsigmoid(m.f_proj(x)) / m.gate_normalizer)
    assert torch.allclose(alpha, torch.tensor(0.9940), atol=1e-4)
    assert GSAMixer(16, n_slots=4).f_proj.bias is None  # default: fla's layer, no bias
    lm = LinearLM(11, d_model=16, n_layers=1, mixer="gsa", mlp_ratio=0.0,
                  mixer_options={"n_slots": 4, "gate_bias": 3.0})
    assert torch.equal(lm.blocks[0].mixer.f_proj.bias, torch.full((4,), 3.0))  # LM init leaves the bias


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "3", True])
def test_gate_bias_bad_values(bad):
    with pytest.raises(ValueError, match="gate_bias"):
        GSAMixer(16, n_slots=4, gate_bias=bad)


def test_abc_refuses_gate_bias():
    with pytest.raises(ValueError, match="ABC"):
        ABCMixer(16, n_slots=4, gate_bias=3.0)
