import math

import pytest
import torch

from reprobook.models.sft import (answer_loss, frozen_copy, greedy_answers, kl_to_reference,
                                  pack_pairs, sequence_logprob)
from reprobook.models.tiny_transformer import TinyTransformer

EOS, PAD = 1, 0


def test_packing_masks_exactly_the_answer_and_end_tokens():
    p = pack_pairs([[5, 6], [7]], [[8, 9], []], eos_id=EOS, pad_id=PAD)
    assert p.inputs.tolist() == [[5, 6, 8, 9], [7, PAD, PAD, PAD]]
    assert p.targets.tolist() == [[6, 8, 9, EOS], [EOS, PAD, PAD, PAD]]
    assert p.mask.tolist() == [[0, 1, 1, 1], [1, 0, 0, 0]]
    assert p.prompt_lengths.tolist() == [2, 1] and len(p.subset([1])) == 1


def test_losses_match_their_definitions():
    torch.manual_seed(0)
    logits, ref = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    targets = torch.tensor([[1, 2, 3], [0, 0, 1]])
    mask = torch.tensor([[0., 1, 1], [1, 0, 0]])
    lp = logits.log_softmax(-1)
    picked = [lp[0, 1, 2], lp[0, 2, 3], lp[1, 0, 0]]
    assert math.isclose(answer_loss(logits, targets, mask).item(), -sum(picked).item() / 3,
                        rel_tol=1e-6)
    torch.testing.assert_close(sequence_logprob(logits, targets, mask),
                               torch.stack([picked[0] + picked[1], picked[2]]))
    lq = ref.log_softmax(-1)
    kl = (lp.exp() * (lp - lq)).sum(-1)
    assert math.isclose(kl_to_reference(logits, ref, mask).item(),
                        ((kl[0, 1] + kl[0, 2] + kl[1, 0]) / 3).item(), rel_tol=1e-6)
    assert kl_to_reference(logits, logits.clone(), mask).item() == pytest.approx(0, abs=1e-7)


def test_answer_only_training_learns_answers_and_the_reference_stays_put():
    torch.manual_seed(0)
    m = TinyTransformer(vocab_size=12, d_model=16, n_layers=1, n_heads=2, max_len=8)
    ref = frozen_copy(m)
    prompts = [[2 + i, 10] for i in range(4)]
    answers = [[2 + (i + 1) % 4, 2 + (i + 2) % 4] for i in range(4)]
    data = pack_pairs(prompts, answers, eos_id=EOS, pad_id=PAD)
    opt = torch.optim.Adam(m.parameters(), lr=5e-2)
    for _ in range(60):
        opt.zero_grad()
        answer_loss(m(data.inputs), data.targets, data.mask).backward()
        opt.step()
    assert greedy_answers(m, torch.tensor(prompts), max_new=4, eos_id=EOS) == answers
    assert all(not p.requires_grad for p in ref.parameters()) and not ref.training
    assert greedy_answers(ref, torch.tensor(prompts), max_new=4, eos_id=EOS) != answers


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="2 prompts but 1 answers"):
        pack_pairs([[2], [3]], [[4]], eos_id=EOS, pad_id=PAD)
    with pytest.raises(ValueError, match=r"prompts\[0\] is empty"):
        pack_pairs([[]], [[4]], eos_id=EOS, pad_id=PAD)
    with pytest.raises(ValueError, match=r"answers\[0\] must be a sequence of non-negative int"):
        pack_pairs([[2]], [[-1]], eos_id=EOS, pad_id=PAD)
    with pytest.raises(ValueError, match=r"must both be \[N, T\]"):
        answer_loss(torch.zeros(2, 3, 4), torch.zeros(2, 2, dtype=torch.long), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="equal-length prompts"):
        greedy_answers(torch.nn.Identity(), torch.zeros(3, dtype=torch.long), 2, EOS)
