import copy

import numpy as np
import pytest
import torch

from reprobook.prefs.reward_sft import (FitConfig, irl_gradient_gap, train_irft, train_rft,
                                        train_sft)
from reprobook.prefs.toy_lm import make_task


@pytest.fixture(scope="module")
def setup():
    torch.set_num_threads(1)
    task = make_task(0, n_prompts=4, vocab=4, length=3, width=16)
    x, y = task.sample(task.expert_logp, 400, np.random.default_rng(0))
    return task, x, y


def fresh(task):
    m = copy.deepcopy(task.reference)
    for p in m.parameters():
        p.requires_grad_(True)
    return m


def test_ml_irl_gradient_is_the_feature_gap(setup):
    """For a reward linear in phi, d/dw E_D log pi_w = (E_D phi - E_{pi_w} phi) / beta: checked by
    central finite differences of the exact log-likelihood."""
    task, x, y = setup
    w = torch.randn(task.features.shape[-1], dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    feats, ref = task.features.double(), task.ref_logp.double()

    def loglik(w):
        lp = torch.log_softmax(ref + feats @ w / task.beta, 1)
        return lp[x, y].mean()

    logp = torch.log_softmax(ref + feats @ w / task.beta, 1)
    grad = irl_gradient_gap(feats, x, y, logp) / task.beta
    eps = 1e-5
    fd = torch.stack([(loglik(w + eps * e) - loglik(w - eps * e)) / (2 * eps)
                      for e in torch.eye(len(w), dtype=torch.float64)])
    torch.testing.assert_close(grad, fd, atol=1e-6, rtol=0)


def test_each_method_moves_toward_the_expert_and_its_control_does_not(setup):
    task, x, y = setup
    cfg = FitConfig(steps=120, lr=0.01, spin_beta=2.0, sync_every=10)
    kl0 = task.kl_from_expert(task.ref_logp)
    sft = train_sft(fresh(task), x, y, cfg, seed=0)
    assert task.kl_from_expert(sft.logp) < 0.6 * kl0
    irft = train_irft(fresh(task), x, y, cfg, seed=0)
    broken = train_irft(fresh(task), x, y, cfg, seed=0, negatives="demos")
    assert task.kl_from_expert(irft.logp) < 0.6 * kl0 < task.kl_from_expert(broken.logp)


def test_rft_reaches_a_stationary_point_only_when_the_policy_moves(setup):
    task, x, y = setup
    cfg = FitConfig(steps=150, lr=0.02, policy_steps=3, reward_lr=0.05)
    moving = train_rft(fresh(task), task, x, y, cfg, seed=0, reward="linear")
    frozen = train_rft(fresh(task), task, x, y, cfg, seed=0, reward="linear", update_policy=False)
    g0 = moving.history["gap"][0]
    assert moving.history["gap"][-1] < 0.3 * g0
    assert frozen.history["gap"][-1] == pytest.approx(g0)     # the policy never moved
    assert task.kl_from_expert(moving.logp) < task.kl_from_expert(task.ref_logp)
    wrong = train_rft(fresh(task), task, x, y, cfg, seed=0, reward="linear", planted_bug="wrong-sign")
    assert wrong.history["gap"][-1] > g0
    net = train_rft(fresh(task), task, x, y, FitConfig(steps=30), seed=0)
    assert net.reward.shape == task.ref_logp.shape


def test_bad_input_is_named(setup):
    task, x, y = setup
    with pytest.raises(ValueError, match="negatives must be 'model' or 'demos'"):
        train_irft(fresh(task), x, y, FitConfig(steps=1), seed=0, negatives="ref")
    with pytest.raises(ValueError, match="equal-length 1-D arrays"):
        train_sft(fresh(task), x, y[:3], FitConfig(steps=1), seed=0)
    with pytest.raises(ValueError, match="out of range"):
        train_sft(fresh(task), x + 10, y, FitConfig(steps=1), seed=0)
    with pytest.raises(ValueError, match="reward must be 'network' or 'linear'"):
        train_rft(fresh(task), task, x, y, FitConfig(steps=1), seed=0, reward="mlp")
    with pytest.raises(ValueError, match="planted_bug must be None or 'wrong-sign'"):
        train_rft(fresh(task), task, x, y, FitConfig(steps=1), seed=0, planted_bug="typo")
    with pytest.raises(ValueError, match="steps must be a positive int"):
        FitConfig(steps=0)
