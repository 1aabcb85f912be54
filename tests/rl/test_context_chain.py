"""The context chain: one wrong action is fatal, the expert earns the maximum."""
import numpy as np
import pytest

from reprobook.rl.context_chain import context_chain
from reprobook.rl.finite_horizon import finite_horizon_value


def _env(seed=0):
    return context_chain(30, 3, 4, 3, np.random.default_rng(seed))


def test_structure():
    env = _env()
    P = env.P
    assert P.shape == (31, 3, 31)
    np.testing.assert_allclose(P.sum(axis=2), 1.0, atol=1e-12)
    for s in range(30):
        for a in range(3):
            if a == env.expert_actions[s]:
                assert P[s, a, env.fail] == 0 and (P[s, a] > 0).sum() == 3
            else:
                assert P[s, a, env.fail] == 1.0
    assert np.all(P[env.fail, :, env.fail] == 1.0)
    assert env.d1[env.fail] == 0 and env.d1.sum() == pytest.approx(1.0)
    # the expert is the argmax of a linear score of the features
    assert np.all(env.features[env.fail] == 0)


@pytest.mark.parametrize("H", [1, 7])
def test_expert_earns_the_maximum_and_one_mistake_is_fatal(H):
    env = _env(1)
    P, d1 = env.P, env.d1
    assert finite_horizon_value(P, env.rewards("sparse", H), d1, env.expert_policy(), H) == \
        pytest.approx(1.0)
    assert finite_horizon_value(P, env.rewards("dense", H), d1, env.expert_policy(), H) == \
        pytest.approx(H)
    # a policy that errs with probability eps in every context survives (1 - eps)^H
    eps = 0.1
    pi = env.expert_policy() * (1 - eps) + (1 - env.expert_policy()) * eps / 2
    assert finite_horizon_value(P, env.rewards("sparse", H), d1, pi, H) == \
        pytest.approx((1 - eps) ** H)
    dense = finite_horizon_value(P, env.rewards("dense", H), d1, pi, H)
    assert dense == pytest.approx(sum((1 - eps) ** h for h in range(1, H + 1)))


def test_seeded_and_checked():
    a, b = _env(2), _env(2)
    np.testing.assert_array_equal(a.P, b.P)
    with pytest.raises(ValueError, match="branching"):
        context_chain(3, 2, 2, 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_actions must be an int >= 2"):
        context_chain(3, 1, 2, 1, np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng must be"):
        context_chain(3, 2, 2, 1, 0)
    with pytest.raises(ValueError, match="kind must be one of"):
        _env().rewards("medium", 3)


def test_regrets_match_the_general_dp():
    env = _env(3)
    g = np.random.default_rng(0)
    H = 6
    for pi in (g.dirichlet(np.ones(3), size=31), g.dirichlet(np.ones(3), size=(H, 31))):
        sparse, dense = env.regrets(pi, H)
        P, d1 = env.P, env.d1
        assert sparse == pytest.approx(1 - finite_horizon_value(P, env.rewards("sparse", H), d1, pi, H))
        assert dense == pytest.approx((H - finite_horizon_value(P, env.rewards("dense", H), d1, pi, H)) / H)
    assert env.regrets(env.expert_policy(), H) == (0.0, 0.0)
