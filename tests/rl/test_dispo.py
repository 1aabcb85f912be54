import numpy as np
import pytest
import torch

from reprobook import rng
from reprobook.rl import zero_shot as zs
from reprobook.rl.dispo import DiSPOConfig, nstep_targets, plan, train_dispo
from reprobook.rl.gridworld import gridworld
from reprobook.threads import single_threaded_torch

CORRIDOR = ("######", "#S...#", "######")


def _loop_targets(states, Phi, gamma, n):
    out = []
    T = states.shape[1] - 1
    for i in range(states.shape[0]):
        for t in range(T):
            m = min(n, T - t)
            out.append((sum(gamma ** k * Phi[states[i, t + k]] for k in range(m)),
                        states[i, t + m], gamma ** m))
    return out


@pytest.mark.parametrize("n", [1, 3, 50])
def test_nstep_targets_match_a_loop(n):
    states = rng(0).integers(0, 4, size=(3, 7))
    actions = rng(1).integers(0, 5, size=(3, 6))
    Phi = rng(2).standard_normal((4, 2))
    d = nstep_targets(states, actions, Phi, 0.9, n)
    ref = _loop_targets(states, Phi, 0.9, n)
    assert np.allclose(d["partial"], [r[0] for r in ref])
    assert np.array_equal(d["boot"], [r[1] for r in ref])
    assert np.allclose(d["discount"], [r[2] for r in ref])
    assert np.array_equal(d["s"], states[:, :-1].ravel()) and np.array_equal(d["a"], actions.ravel())
    with pytest.raises(ValueError, match="n_step"):
        nstep_targets(states, actions, Phi, 0.9, 0)
    with pytest.raises(ValueError, match="states must be"):
        nstep_targets(states, actions[:, :-1], Phi, 0.9, 1)


def test_plan_takes_the_best_sampled_outcome():
    psi = np.array([[[1.0, 0.0], [0.0, 2.0]], [[3.0, 0.0], [0.0, 1.0]]])
    k, v = plan(psi, np.array([1.0, 1.0]))
    assert np.array_equal(k, [1, 0]) and np.allclose(v, [2.0, 3.0])
    with pytest.raises(ValueError, match="outcomes must be"):
        plan(psi[0], np.ones(2))


def test_config_is_validated():
    with pytest.raises(ValueError, match="steps"):
        DiSPOConfig(steps=0)
    with pytest.raises(ValueError, match="sample_steps"):
        DiSPOConfig(sample_steps=30, diffusion_steps=20)
    assert DiSPOConfig().but(n_step=4).n_step == 4


def test_outcome_mean_matches_behaviour_sf_and_readout_reaches_the_goal():
    # a 4-cell corridor under a random walk, short horizon: the outcome model's mean must approach
    # the exact successor features of the data's behaviour, and planning must reach the goal
    w = gridworld(CORRIDOR, 0.6)
    S, A = w.n_states, 5
    s, a = zs.random_walk_data(w.mdp, 60, 20, rng(0, 0))
    cfg = DiSPOConfig(hidden=64, layers=2, emb=8, readout_hidden=32, readout_layers=1, steps=300,
                      batch=128, refresh=30, bank=16, n_step=2, sample_steps=5,
                      diffusion_steps=10, lr=3e-3)
    g = torch.Generator().manual_seed(0)
    with single_threaded_torch():        # small ops: a second thread only costs
        agent = train_dispo(s, a, np.eye(S), 0.6, cfg, g, n_actions=A)
        psi = agent.sample_outcomes(np.arange(S), 256, g)
    P, n = zs.empirical_model(s, a, S, A)
    ref = zs.behaviour_successor_features(P, zs.behaviour_policy(s, a, S, A), np.eye(S), 0.6)
    err = np.abs(psi.mean(1) - ref).sum(1) / np.abs(ref).sum(1)
    assert err.mean() < 0.25, err
    r = np.zeros(S)
    r[-1] = 1.0
    k, v = plan(psi, r)
    act = agent.readout_actions(np.arange(S), psi[np.arange(S), k])
    assert act[0] == 2                    # East, from the far end, towards the goal
