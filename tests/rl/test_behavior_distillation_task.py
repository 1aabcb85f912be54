"""The point-mass testbed of the behaviour-distillation chapter."""
import numpy as np
import pytest
import torch

from reprobook.rl.behavior_distillation import init_policy
from reprobook.rl.behavior_distillation_task import (expert_policy, expert_q, make_offline,
                                                     mean_returns, normalized, reference_returns,
                                                     shifted_reward)
from reprobook.rl.point_mass import PointMass


def test_shifted_reward_is_monotone_and_in_unit_interval():
    task = PointMass()
    r = np.linspace(-10, 0, 50)
    s = shifted_reward(task, r)
    assert (s >= 0).all() and (s <= 1).all() and (np.diff(s) >= 0).all()
    assert s[-1] == 1.0


def test_expert_q_is_the_discounted_sum_along_the_expert_rollout():
    task = PointMass()
    s0 = np.array([[0.0, 0.0], [1.5, 0.2]])
    q = expert_q(task, s0, 0.9, tail=1e-8)
    pos, ref = s0.copy(), np.zeros(2)
    pi = expert_policy(task)
    for t in range(400):
        pos, r = task.step_batch(pos, pi(pos, np.random.default_rng(0)))
        ref += 0.9 ** t * shifted_reward(task, r)
    np.testing.assert_allclose(q, ref, atol=1e-7)
    assert q[1] > q[0]          # closer to the goal is worth more
    with pytest.raises(ValueError, match="states"):
        expert_q(task, np.zeros(3), 0.9)


def test_offline_data_and_scores():
    task = PointMass()
    d = make_offline(task, 3, 2, 0.5, 0.9, [np.random.default_rng(0), np.random.default_rng(1)])
    N = 5 * task.horizon
    assert d["obs"].shape == (2, N, 2) and d["q"].shape == (2, N, 1) and (d["q"] >= 0).all()
    assert not torch.equal(d["obs"][0], d["obs"][1])
    # member 1's values are those of its own states
    np.testing.assert_allclose(d["q"][1, :7, 0].numpy(), expert_q(task, d["obs"][1, :7].double()
                                                                  .numpy(), 0.9), rtol=1e-5)
    assert d["expert_actions"].abs().max() <= 1
    jr, je = reference_returns(task, 20, np.random.default_rng(1))
    assert je > jr
    np.testing.assert_allclose(normalized([jr, je], jr, je), [0, 1])
    p = init_policy(3, 2, 2, 8, 1, torch.Generator().manual_seed(0))
    assert mean_returns(task, p, 4, np.random.default_rng(2)).shape == (3,)
    with pytest.raises(ValueError, match="exceed"):
        normalized([0.0], 1.0, 0.0)
