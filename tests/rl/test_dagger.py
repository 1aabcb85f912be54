"""DAgger at a fixed label budget, on the context chain."""
import numpy as np
import pytest

from reprobook.rl.context_chain import context_chain
from reprobook.rl.behavior_cloning import log_linear_policy
from reprobook.rl.dagger import dagger


def _env():
    return context_chain(40, 2, 3, 3, np.random.default_rng(0))


def test_spends_exactly_the_budget_and_learns():
    env = _env()
    H, labels = 8, 8 * 16
    theta, used = dagger(env.P, env.d1, env.features, env.expert_actions, H, labels, 4,
                         np.random.default_rng(1), unlabelable=[env.fail], l2=1e-6)
    assert used == labels
    pi = log_linear_policy(theta, env.features)
    sparse, _ = env.regrets(pi, H)
    uniform = env.regrets(np.full((env.n_states, 2), 0.5), H)[0]
    assert sparse < 0.5 * uniform


def test_seeded():
    env = _env()
    a = dagger(env.P, env.d1, env.features, env.expert_actions, 4, 64, 2, np.random.default_rng(3),
               unlabelable=[env.fail])
    b = dagger(env.P, env.d1, env.features, env.expert_actions, 4, 64, 2, np.random.default_rng(3),
               unlabelable=[env.fail])
    np.testing.assert_array_equal(a[0], b[0])


def test_bad_arguments():
    env = _env()
    with pytest.raises(ValueError, match="must cover at least one trajectory"):
        dagger(env.P, env.d1, env.features, env.expert_actions, 10, 30, 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="expert_actions must have shape"):
        dagger(env.P, env.d1, env.features, env.expert_actions[:-1], 4, 64, 2,
               np.random.default_rng(0))
    with pytest.raises(ValueError, match="rounds must be an int"):
        dagger(env.P, env.d1, env.features, env.expert_actions, 4, 64, 0, np.random.default_rng(0))
