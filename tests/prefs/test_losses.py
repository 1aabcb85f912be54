import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reprobook.prefs.losses import bt_pairs, pair_accuracy, spin_loss


def test_spin_loss_is_dpo_against_the_opponent():
    torch.manual_seed(0)
    a, b, c, d = (torch.randn(7) for _ in range(4))
    want = -F.logsigmoid(0.3 * ((a - c) - (b - d))).mean()
    torch.testing.assert_close(spin_loss(a, b, c, d, 0.3), want, atol=1e-7, rtol=0)
    # the opponent's terms cancel when it equals the model: the loss is then log 2
    assert spin_loss(a, b, a, b, 1.0).item() == pytest.approx(np.log(2))


def test_bradley_terry_labels_follow_the_reward_gap():
    reward = torch.tensor([[0.0, 1.0]])
    pairs = bt_pairs(reward, 4000, np.random.default_rng(0))
    share = (pairs[:, 1] == 1).mean()
    assert abs(share - 1 / (1 + np.exp(-1))) < 0.03
    assert pair_accuracy(reward, pairs) == pytest.approx(share)
    assert pair_accuracy(torch.zeros(1, 2), pairs) == 0.5      # ties count one half
    sign = bt_pairs(torch.tensor([[0.0, 1.0, 1.0, 3.0]]), 500, np.random.default_rng(1), labels="sign")
    assert pair_accuracy(torch.tensor([[0.0, 1.0, 1.0, 3.0]]), sign) == 1.0   # noise-free labels
    assert not ((sign[:, 1] == 1) & (sign[:, 2] == 2)).any()                   # equal rewards redrawn


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="share one shape"):
        spin_loss(torch.zeros(3), torch.zeros(2), torch.zeros(3), torch.zeros(3), 1.0)
    with pytest.raises(ValueError, match="beta must be > 0"):
        spin_loss(*(torch.zeros(2) for _ in range(4)), 0.0)
    with pytest.raises(ValueError, match=r"reward must be \[X, R\]"):
        bt_pairs(torch.zeros(3), 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="labels must be 'bt' or 'sign'"):
        bt_pairs(torch.zeros(1, 2), 2, np.random.default_rng(0), labels="hard")
