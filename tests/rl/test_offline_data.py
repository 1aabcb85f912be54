"""Mixed-quality offline data: the conflict bandit, collection from behaviour policies, scores."""
import numpy as np
import pytest
import torch

from reprobook.rl.offline_data import (bandit_optimal_action, bandit_reward, collect,
                                       conflict_bandit, normalized_score, stack)
from reprobook.rl.point_mass import PointMass, uniform_policy, waypoint_policy


def test_bandit_reward_is_maximal_at_the_optimal_action_only():
    s = np.random.default_rng(0).uniform(-1, 1, (200, 2))
    star = bandit_optimal_action(s)
    np.testing.assert_allclose(bandit_reward(s, star[:, None]), 1.0)
    assert (bandit_reward(s, -star[:, None]) < -4).all()          # the other mode: 1 - 1.6^2/0.5
    # broadcasting over a leading policy axis
    assert bandit_reward(s, np.zeros((3, 200, 1))).shape == (3, 200)
    with pytest.raises(ValueError, match="shape"):
        bandit_reward(s, np.zeros(200))


def test_conflict_bandit_has_two_opposite_modes_at_every_state():
    d = conflict_bandit(3000, np.random.default_rng(1))
    assert len(d) == 3000 and d.terminals.all()
    frac = np.bincount(d.source, minlength=3) / 3000
    np.testing.assert_allclose(frac, [0.4, 0.4, 0.2], atol=1e-3)
    plus, minus = d.actions[d.source == 0, 0], d.actions[d.source == 1, 0]
    assert abs(plus.mean() - 0.8) < 0.01 and abs(minus.mean() + 0.8) < 0.01
    # each mode is good on its half and bad on the other
    s0 = d.obs[d.source == 0, 0]
    assert d.rewards[d.source == 0][s0 > 0].mean() > 0.9
    assert d.rewards[d.source == 0][s0 < 0].mean() < -3.5
    # the plain action mean at a state is near 0: what BC would learn
    assert abs(d.actions[:, 0].mean()) < 0.05
    with pytest.raises(ValueError, match="mix"):
        conflict_bandit(10, np.random.default_rng(0), mix=(0.5, 0.5, 0.5))


def test_collect_labels_sources_and_keeps_returns():
    t = PointMass()
    beh = {"expert": (waypoint_policy(t, (1.0, 0.7)), 3), "random": (uniform_policy(), 2)}
    d = collect(t, beh, np.random.default_rng(0))
    assert len(d) == 5 * t.horizon and d.sources == ("expert", "random")
    assert (d.source == 0).sum() == 3 * t.horizon
    assert not d.terminals.any()
    # returns are the sums of the stored rewards, episode by episode
    np.testing.assert_allclose(d.episode_returns["expert"],
                               d.rewards[d.source == 0].reshape(3, t.horizon).sum(1))
    np.testing.assert_allclose(d.rewards, t.reward(d.next_obs))
    sub = d.subset(["random"])
    assert len(sub) == 2 * t.horizon and list(sub.episode_returns) == ["random"]
    with pytest.raises(ValueError, match="unknown"):
        d.subset(["medium"])
    with pytest.raises(ValueError, match="n_episodes"):
        collect(t, {"x": (uniform_policy(), -1)}, np.random.default_rng(0))


def test_normalized_score_and_stack():
    np.testing.assert_allclose(normalized_score([-80, -25, -52.5], -80, -25), [0, 100, 50])
    with pytest.raises(ValueError, match="distinct"):
        normalized_score([1.0], 2.0, 2.0)
    ds = [conflict_bandit(50, np.random.default_rng(i)) for i in range(3)]
    t = stack(ds)
    assert t["obs"].shape == (3, 50, 2) and t["rewards"].shape == (3, 50, 1)
    assert t["obs"].dtype == torch.float32 and float(t["not_done"].abs().sum()) == 0.0
    with pytest.raises(ValueError, match="equal sizes"):
        stack([ds[0], conflict_bandit(20, np.random.default_rng(0))])
