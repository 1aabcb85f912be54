import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reprobook.data.instruction_lang import InstructionLanguage
from reprobook.data.unlearning_sets import continuation_match, passage_set, well_formed
from reprobook.models.sft import answer_loss, kl_to_reference, pack_pairs
from reprobook.models.tiny_transformer import TinyTransformer
from reprobook.models.unlearning import (METHODS, ComputeMeter, UnlearnConfig, forget_loss,
                                         next_tokens, normal_cross_entropy, per_pair_answer_nll,
                                         random_mismatch_pairs, refusal_sft, unlearn)

EOS, PAD = 1, 0


def tiny(vocab=12, seed=0):
    torch.manual_seed(seed)
    return TinyTransformer(vocab, d_model=16, n_layers=1, n_heads=2, max_len=16)


def pairs():
    return pack_pairs([[5, 6, 2], [7, 2]], [[8, 9, 10], [11]], eos_id=EOS, pad_id=PAD)


def test_forget_gradient_is_minus_sft_gradient_for_equal_answer_lengths():
    # with one pair, the per-pair normalisation equals the token mean of answer_loss
    p = pack_pairs([[5, 6, 2]], [[8, 9, 10]], eos_id=EOS, pad_id=PAD)
    m = tiny()
    g_f = torch.autograd.grad(forget_loss(m(p.inputs), p.targets, p.mask), list(m.parameters()))
    g_s = torch.autograd.grad(answer_loss(m(p.inputs), p.targets, p.mask), list(m.parameters()))
    err = max(float((a + b).abs().max()) for a, b in zip(g_f, g_s))
    assert err < 1e-6


def test_prompt_and_padding_get_no_weight():
    p = pairs()
    m = tiny()
    logits = m(p.inputs).detach().requires_grad_(True)
    forget_loss(logits, p.targets, p.mask).backward()
    g = logits.grad.abs().sum(-1)
    assert torch.all(g[p.mask == 0] == 0)
    assert torch.all(g[p.mask == 1] > 0)
    # each pair weighs 1/B in total, however long its answer: per-pair means
    nll = per_pair_answer_nll(logits.detach(), p.targets, p.mask)
    ce = F.cross_entropy(logits.detach()[1].float(), p.targets[1], reduction="none")
    assert torch.allclose(nll[1], (ce * p.mask[1]).sum() / p.mask[1].sum())


def test_normal_term_is_kl_plus_entropy():
    torch.manual_seed(1)
    a, b = torch.randn(2, 4, 7), torch.randn(2, 4, 7)
    valid = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]]).float()
    ce = normal_cross_entropy(a, b, valid)
    kl = kl_to_reference(b, a, valid)       # KL(p_b || p_a): reference b first
    pb = F.softmax(b, -1)
    ent = -(pb * F.log_softmax(b, -1)).sum(-1)
    ent = (ent * valid).sum() / valid.sum()
    assert abs(float(ce - (kl + ent))) < 1e-5


def test_random_mismatch_pairs_shape_and_answers():
    g = torch.Generator().manual_seed(0)
    pool = [[4, 4], [5]]
    rb = random_mismatch_pairs([[7, 8, 2], [9, 2]], pool, 3, g, eos_id=EOS, pad_id=PAD)
    assert len(rb) == 6
    assert rb.prompt_lengths.tolist() == [3, 3, 3, 2, 2, 2]
    for i in range(6):
        pl = int(rb.prompt_lengths[i])
        ans = rb.inputs[i, pl:].tolist() + [int(rb.targets[i, -1])]
        assert ans[:2] == [4, 4] or ans[:1] == [5]
    with pytest.raises(ValueError, match="answer_pool"):
        random_mismatch_pairs([[7, 2]], [], 1, g, eos_id=EOS, pad_id=PAD)


def test_compute_meter_counts_real_tokens():
    m = ComputeMeter()
    m.train(torch.tensor([[1, 1, 0], [1, 0, 0]]))
    m.forward(torch.tensor([[1, 1, 1]]))
    assert m.token_passes == 3 * 3 + 3


def test_unlearn_raises_forget_loss_and_keeps_reference():
    torch.manual_seed(0)
    m = tiny()
    forget = pairs()
    normal = pack_pairs([[3, 4, 2]], [[4, 3]], eos_id=EOS, pad_id=PAD)
    before = float(per_pair_answer_nll(m(forget.inputs), forget.targets, forget.mask).mean().detach())
    orig = copy.deepcopy(m)
    out = unlearn(m, forget, normal, [[4, 3]], UnlearnConfig(20, 2, 1e-2), torch.Generator().manual_seed(0),
                  eos_id=EOS, pad_id=PAD)
    after = float(per_pair_answer_nll(m(forget.inputs), forget.targets, forget.mask).mean().detach())
    assert after > before + 0.5
    assert out["steps"] == 20 and out["meter"].token_passes > 0
    # the run does not touch a model it was not given
    assert any(not torch.equal(a, b) for a, b in zip(m.parameters(), orig.parameters()))


def test_ga_only_costs_less_per_step_than_full_loss():
    forget, normal = pairs(), pack_pairs([[3, 4, 2]], [[4, 3]], eos_id=EOS, pad_id=PAD)
    costs = {}
    for name in ("unlearn", "ga-only"):
        out = unlearn(tiny(), forget, normal, [[4, 3]], UnlearnConfig(2, 2, 1e-3, METHODS[name]),
                      torch.Generator().manual_seed(0), eos_id=EOS, pad_id=PAD)
        costs[name] = out["meter"].token_passes
    assert costs["ga-only"] < costs["unlearn"]


def test_stop_rules():
    forget, normal = pairs(), pack_pairs([[3, 4, 2]], [[4, 3]], eos_id=EOS, pad_id=PAD)
    out = unlearn(tiny(), forget, normal, [[4]], UnlearnConfig(50, 2, 1e-2, max_forget_loss=0.0),
                  torch.Generator().manual_seed(0), eos_id=EOS, pad_id=PAD)
    assert out["stopped"] == "max_forget_loss" and out["steps"] == 1
    out = unlearn(tiny(), forget, normal, [[4]], UnlearnConfig(50, 2, 1e-2),
                  torch.Generator().manual_seed(0), eos_id=EOS, pad_id=PAD,
                  callback=lambda step, meter: step >= 3)
    assert out["stopped"] == "callback" and out["steps"] == 3


def test_refusal_sft_learns_refusal():
    m = tiny()
    pos = pack_pairs([[5, 6, 2], [7, 2]], [[3], [3]], eos_id=EOS, pad_id=PAD)
    normal = pack_pairs([[3, 4, 2]], [[4, 3]], eos_id=EOS, pad_id=PAD)
    refusal_sft(m, pos, normal, UnlearnConfig(60, 2, 1e-2), torch.Generator().manual_seed(0))
    assert next_tokens(m, [[5, 6, 2], [7, 2]], pad_id=PAD) == [3, 3]


def test_next_tokens_matches_full_forward():
    m = tiny().eval()
    prompts = [[5, 6, 2], [7, 2]]
    got = next_tokens(m, prompts, pad_id=PAD)
    want = [int(m(torch.tensor([p]))[0, -1].argmax()) for p in prompts]
    assert got == want


def test_bad_config_is_named():
    with pytest.raises(ValueError, match="weights"):
        UnlearnConfig(1, 1, 1e-3, (0, 0, 0))
    with pytest.raises(ValueError, match="lr"):
        UnlearnConfig(1, 1, -1.0)
    with pytest.raises(ValueError, match="k_random"):
        UnlearnConfig(1, 1, 1e-3, k_random=0)


def test_well_formed_and_passages():
    lang = InstructionLanguage(max_digits=3)
    d = lang.digit
    assert well_formed(lang, [lang.refuse])
    assert well_formed(lang, [d(1), d(2)])
    assert well_formed(lang, [lang.topic_token(0), d(1)])
    assert not well_formed(lang, [])
    assert not well_formed(lang, [d(1)] * 4)
    assert not well_formed(lang, [lang.sep, d(1)])
    ps = passage_set(5, 4, 6, np.random.default_rng(0))
    assert len(ps) == 5 and all(len(p) == 4 and len(a) == 6 for p, a in zip(ps.prompts, ps.answers))
    assert ps.vocab[:2] == ["PAD", "EOS"] and len(set(map(tuple, ps.prompts))) == 5
    assert continuation_match(ps.answers[0], ps.answers[0]) == 1.0
    assert continuation_match([], ps.answers[0]) == 0.0
    with pytest.raises(ValueError, match="min_words"):
        passage_set(2, 30, 30, np.random.default_rng(0))
