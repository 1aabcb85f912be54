import pytest
import torch

from reprobook.rl.point_blob import PointBlob, region_of
from reprobook.rl.tadpole_policy import (GaussianPolicies, ReinforceConfig, random_rollout,
                                         rollout, train_policies)


def test_rollout_shapes_and_determinism():
    env = PointBlob(horizon=6)
    pol = GaussianPolicies(3, torch.Generator().manual_seed(0))
    p, e, lp = rollout(env, pol, 5, torch.Generator().manual_seed(1))
    assert p.shape == (3, 5, 6, 2) and e.shape == (3, 5, 6) and lp.shape == (3, 5, 6)
    q = rollout(env, pol, 5, torch.Generator().manual_seed(1))[0]
    assert torch.equal(p, q)
    p, e, lp = rollout(env, pol, 5, torch.Generator().manual_seed(1), deterministic=True)
    assert torch.all(lp == 0)
    pr, er = random_rollout(env, (2, 7), torch.Generator().manual_seed(2))
    assert pr.shape == (2, 7, 6, 2) and er.shape == (2, 7, 6)


def test_reinforce_learns_a_region_reward(one_torch_thread):
    env = PointBlob(horizon=10, step_size=0.2)
    target = torch.tensor([0, 3])          # top-left for policy 0, bottom-right for policy 1

    def reward(p, e, g):
        return (region_of(p) == target[:, None, None]).float()

    g = torch.Generator().manual_seed(3)
    pol, hist = train_policies(env, reward, 2, ReinforceConfig(iterations=25, rollouts=32), g)
    p, _, _ = rollout(env, pol, 64, g, deterministic=True)
    success = (region_of(p[:, :, -1]) == target[:, None]).float().mean(1)
    assert torch.all(success > 0.9)
    assert torch.all(hist[-5:].mean(0) > hist[:5].mean(0))


def test_a_reward_that_ignores_the_agent_teaches_nothing(one_torch_thread):
    env = PointBlob(horizon=10, step_size=0.2)
    g = torch.Generator().manual_seed(4)
    pol, _ = train_policies(env, lambda p, e, g: torch.ones(e.shape), 4,
                            ReinforceConfig(iterations=10, rollouts=16), g)
    # with a constant reward every advantage is 0, so the policy stays where it started
    assert torch.all(pol.b == 0)


def test_bad_input_is_named():
    env = PointBlob(horizon=3)
    with pytest.raises(ValueError, match="reward_fn must return"):
        train_policies(env, lambda p, e, g: torch.ones(2), 1, ReinforceConfig(iterations=1,
                                                                                rollouts=2),
                       torch.Generator())
    with pytest.raises(ValueError, match="iterations"):
        ReinforceConfig(iterations=0)
    with pytest.raises(ValueError, match="n must be"):
        GaussianPolicies(0, torch.Generator())


def test_final_outcomes():
    from reprobook.rl.tadpole_policy import final_outcomes
    p = torch.tensor([[[[0.0, 0.0], [-0.5, 0.5]], [[0.0, 0.0], [0.5, 0.5]]]])   # (1, 2, 2, 2)
    e = torch.tensor([[[0.0, -0.4], [0.0, 0.2]]])
    s, a = final_outcomes(p, e, torch.tensor([0]))
    assert s.tolist() == [0.5] and a.tolist() == [pytest.approx(0.3)]
