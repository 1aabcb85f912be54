import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reprobook.prefs.toy_lm import ToyLM, enumerate_responses, make_task, n_features


def test_log_probs_are_the_chain_rule_of_the_next_token_model():
    torch.manual_seed(0)
    m = ToyLM(n_prompts=3, vocab=4, length=3, width=8, generator=torch.Generator().manual_seed(1))
    lp = m.log_probs()
    assert lp.shape == (3, 64)
    torch.testing.assert_close(lp.exp().sum(1), torch.ones(3))
    # independent path: feed each prefix through the embeddings and MLP one at a time
    for x in range(3):
        for r in (0, 17, 63):
            y = m.responses[r].tolist()
            total = 0.0
            for t in range(3):
                h = m.prompt.weight[x] + m.pos.weight[t]
                pre = y[:t] + [m.vocab] * (2 - t)
                for s in range(2):
                    h = h + m.slots[s].weight[pre[s]]
                total += F.log_softmax(m.mlp(h), -1)[y[t]]
            torch.testing.assert_close(lp[x, r], total)
    assert torch.equal(m.index_of(m.responses), torch.arange(64))


def test_task_expert_is_the_tilted_reference_and_features_count_what_they_say():
    task = make_task(0, n_prompts=4, vocab=4, length=3, width=8)
    assert task.features.shape == (4, 64, n_features(4)) and task.w_star.shape == (n_features(4),)
    tilted = task.ref_logp + task.reward / task.beta
    torch.testing.assert_close(task.expert_logp, tilted - tilted.logsumexp(1, keepdim=True))
    y = enumerate_responses(4, 3)
    r = int((y == torch.tensor([2, 2, 1])).all(1).nonzero())
    f = task.features[2, r]              # prompt 2's own token is 2
    assert f[:4].tolist() == [0, 1, 2, 0]                        # token counts
    assert f[16:].tolist() == [1, 0, 2, 0, 0, 0]                 # first/last match, count, distinct, y1=yL, rising
    assert task.expected_reward(task.expert_logp) > task.expected_reward(task.ref_logp)
    assert task.kl_from_expert(task.expert_logp) == pytest.approx(0, abs=1e-6)


def test_sampling_follows_the_table():
    task = make_task(1, n_prompts=2, vocab=4, length=2, width=8)
    x, y = task.sample(task.expert_logp, 20000, np.random.default_rng(0), prompts=np.zeros(20000, int))
    freq = np.bincount(y, minlength=16) / 20000
    np.testing.assert_allclose(freq, task.expert_logp[0].exp().numpy(), atol=0.015)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="too many to enumerate"):
        ToyLM(vocab=10, length=4)
    with pytest.raises(ValueError, match="width must be a positive int"):
        ToyLM(width=0)
    with pytest.raises(ValueError, match="responses must be"):
        ToyLM(n_prompts=2, vocab=4, length=2).index_of(torch.zeros(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="beta must be > 0"):
        make_task(0, beta=0)
