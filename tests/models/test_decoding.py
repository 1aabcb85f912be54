"""Greedy and speculative decoding: exactness, and acceptance replayed from agreement."""
import pytest
import torch

from reprobook.models.decoding import (SpeculativeStats, acceptance_from_agreement,
                                       expected_acceptance, greedy_agreement, greedy_decode,
                                       speculative_greedy)
from reprobook.models.tiny_transformer import TinyTransformer


def model(seed, d=16):
    torch.manual_seed(seed)
    return TinyTransformer(12, d_model=d, n_layers=1, n_heads=2, max_len=40, init_std=0.5).double()


@pytest.mark.parametrize("k", [1, 3, 4])
def test_speculative_greedy_is_exact_and_agreement_replays_it(k):
    target, draft = model(0), model(1)
    # make the draft agree sometimes: share the target's embeddings and head
    draft.embed.weight.data.copy_(target.embed.weight.data)
    draft.head.weight.data.copy_(target.head.weight.data)
    prompt = torch.randint(0, 12, (5, 6), generator=torch.Generator().manual_seed(0))
    n_new = 17
    want = greedy_decode(target, prompt, n_new)
    got, stats = speculative_greedy(draft, target, prompt, n_new, k=k)
    assert torch.equal(got, want)
    replay = acceptance_from_agreement(greedy_agreement(draft, want, prompt.shape[1]), k=k)
    assert replay == stats
    assert stats.generated == 5 * n_new
    assert 0 < stats.accepted < stats.proposed                 # neither always nor never agreeing


def test_a_draft_equal_to_the_target_is_always_accepted():
    target = model(0)
    prompt = torch.randint(0, 12, (2, 3), generator=torch.Generator().manual_seed(1))
    _, stats = speculative_greedy(target, target, prompt, 10, k=4)
    assert stats.acceptance_rate == 1.0
    assert stats.rounds == 2 * 2                                # 5 + 5 tokens per row
    assert stats.tokens_per_call == 5.0


def test_acceptance_from_agreement_by_hand():
    st = acceptance_from_agreement(torch.tensor([[1, 1, 0, 1, 1, 1, 1, 1, 0]]), k=3)
    # rounds: accept 2 (+1) -> t=3; accept 3 (+1) -> t=7; accept 1 (+1) -> t=9
    assert st == SpeculativeStats(proposed=3 + 3 + 2, accepted=2 + 3 + 1, rounds=3, generated=9)


def test_expected_acceptance():
    a = torch.randn(4, 7)
    assert expected_acceptance(a, a) == pytest.approx(1.0)
    p = torch.tensor([[50.0, -50.0]])
    assert expected_acceptance(p, -p) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError):
        expected_acceptance(a, a[:2])


def test_bad_arguments():
    m = model(0)
    with pytest.raises(ValueError):
        greedy_decode(m, torch.zeros(3, dtype=torch.long), 2)
    with pytest.raises(ValueError):
        speculative_greedy(m, m, torch.zeros(1, 2, dtype=torch.long), 2, k=0)
    with pytest.raises(ValueError):
        greedy_agreement(m, torch.zeros(1, 4, dtype=torch.long), 4)
