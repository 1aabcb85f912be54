"""Skill discovery by exact mirror ascent: the rewards are the objectives' gradients."""
import numpy as np
import pytest

from reprobook.rl.gridworld import maze
from reprobook.rl.skills import (initial_skills, leads_reward, mi_reward, skill_objective,
                                 skill_occupancies, train_skills)


@pytest.fixture
def world():
    return maze("easy", gamma=0.9)


def test_beta_zero_is_the_mi_reward():
    d = np.random.default_rng(0).dirichlet(np.ones(6), size=3)
    assert np.allclose(leads_reward(d, 0.0), mi_reward(d))
    assert np.allclose(leads_reward(d, 1.0), mi_reward(d) - np.log(d.mean(axis=0)))


@pytest.mark.parametrize("objective, beta", [("mi", 0.0), ("leads", 1.0), ("leads", 3.0)])
def test_reward_is_the_directional_derivative(objective, beta):
    # F(d_1 + eps v_1, d_2, ...) - F(d) ~ eps / n * <v_1, r_1> for v summing to 0
    g = np.random.default_rng(1)
    d = g.dirichlet(np.ones(7), size=3)
    v = g.standard_normal(7)
    v -= v.mean()
    eps = 1e-6
    up, down = d.copy(), d.copy()
    up[0] += eps * v
    down[0] -= eps * v
    fd = (skill_objective(up, objective, beta) - skill_objective(down, objective, beta)) / (2 * eps)
    assert fd == pytest.approx((v @ leads_reward(d, beta)[0]) / 3, rel=1e-6)


@pytest.mark.parametrize("objective", ["mi", "leads"])
def test_training_increases_its_objective(world, objective):
    lp0 = initial_skills(3, world.n_states, 5, np.random.default_rng(0))
    run = train_skills(world.mdp, world.start, lp0, 15, objective, beta=1.0, eta=0.5)
    h = run.history["objective"]
    assert len(h) == 16 and h[-1] > h[0] + 0.1
    d = skill_occupancies(world.mdp, run.log_pis, world.start)
    assert skill_objective(d, objective, 1.0) == pytest.approx(h[-1])
    assert np.allclose(run.policies.sum(axis=2), 1.0)


def test_leads_spreads_the_pooled_occupancy_more_than_mi(world):
    lp0 = initial_skills(3, world.n_states, 5, np.random.default_rng(2))
    mi = train_skills(world.mdp, world.start, lp0, 30, "mi", eta=0.3)
    le = train_skills(world.mdp, world.start, lp0, 30, "leads", beta=1.0, eta=0.3)
    assert le.history["entropy"][-1] > mi.history["entropy"][-1]


def test_initial_skills_are_log_policies():
    lp = initial_skills(4, 6, 5, np.random.default_rng(0))
    assert lp.shape == (4, 6, 5) and np.allclose(np.exp(lp).sum(axis=2), 1.0)


def test_bad_inputs_are_named(world):
    lp0 = initial_skills(2, world.n_states, 5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="unknown objective"):
        train_skills(world.mdp, world.start, lp0, 1, "diayn")
    with pytest.raises(ValueError, match="log_pis0"):
        train_skills(world.mdp, world.start, lp0[:, :3], 1)
    with pytest.raises(ValueError, match="n_iters"):
        train_skills(world.mdp, world.start, lp0, -1)
    with pytest.raises(ValueError, match="n_skills"):
        initial_skills(1, 3, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="beta"):
        leads_reward(np.full((2, 3), 1 / 3), float("nan"))
    with pytest.raises(ValueError, match="n_skills >= 2"):
        mi_reward(np.full((1, 3), 1 / 3))
