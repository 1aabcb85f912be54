"""The point-mass task: dynamics, reward, batch/single agreement, gymnasium API and seeding."""
import numpy as np
import pytest

from reprobook.rl.point_mass import PointMass, PointMassEnv, rollout, uniform_policy, waypoint_policy


def test_step_is_a_clipped_euler_step_with_the_obstacle_penalty():
    t = PointMass()
    nxt, r = t.step_batch(np.array([[0.0, 0.0], [2.95, 0.0]]), np.array([[1.0, 0.5], [1.0, 0.0]]))
    np.testing.assert_allclose(nxt, [[0.1, 0.05], [3.0, 0.0]])     # the second is clipped at hi
    np.testing.assert_allclose(r, -np.linalg.norm(nxt - t.goal, axis=1))
    # inside the obstacle disc the penalty is added
    _, r_in = t.step_batch(np.array([[1.0, 0.0]]), np.zeros((1, 2)))
    assert r_in[0] == pytest.approx(-1.0 - t.obstacle_penalty)
    # actions beyond the box are clipped
    a, _ = t.step_batch(np.zeros((1, 2)), np.array([[5.0, -5.0]]))
    np.testing.assert_allclose(a, [[0.1, -0.1]])


def test_bad_input_is_named():
    t = PointMass()
    with pytest.raises(ValueError, match="shape"):
        t.step_batch(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="horizon"):
        PointMass(horizon=0)
    with pytest.raises(ValueError, match="lo"):
        PointMass(lo=(1.0, 1.0), hi=(0.0, 2.0))


def test_expert_goes_round_above_and_reaches_the_goal_medium_below_and_slower():
    t = PointMass()
    g = np.random.default_rng(0)
    ex = rollout(t, waypoint_policy(t, (1.0, 0.7), 1.0, 0.0), g, 8)
    md = rollout(t, waypoint_policy(t, (1.0, -0.7), 0.5, 0.0), g, 8)
    rd = rollout(t, uniform_policy(), g, 8)
    assert not t.in_obstacle(ex["next_obs"]).any()
    assert (ex["next_obs"][:, :, 1].max(1) > 0.5).all() and (md["next_obs"][:, :, 1].min(1) < -0.5).all()
    np.testing.assert_allclose(ex["next_obs"][:, -1], np.broadcast_to(t.goal, (8, 2)), atol=1e-9)
    assert ex["returns"].mean() > md["returns"].mean() > rd["returns"].mean()


def test_gymnasium_env_matches_the_batch_step_and_is_seeded():
    t = PointMass()
    env = PointMassEnv(t)
    o1, _ = env.reset(seed=3)
    o2, _ = PointMassEnv(t).reset(seed=3)
    np.testing.assert_array_equal(o1, o2)
    assert env.observation_space.contains(o1)
    pos = o1.astype(np.float64)
    for k in range(t.horizon):
        a = np.array([0.3, -0.2])
        o, r, term, trunc, _ = env.step(a)
        pos, rb = t.step_batch(pos, a)
        assert r == pytest.approx(float(rb)) and not term
        assert trunc == (k == t.horizon - 1)
    np.testing.assert_allclose(o, pos, atol=1e-6)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(3))


def test_rollout_batches_and_starts_do_not_depend_on_the_policy():
    t = PointMass()
    a = rollout(t, uniform_policy(), np.random.default_rng(1), 4, batch_shape=(3,))
    b = rollout(t, waypoint_policy(t, (1.0, 0.7)), np.random.default_rng(1), 4, batch_shape=(3,))
    assert a["obs"].shape == (3, 4, t.horizon, 2) and a["returns"].shape == (3, 4)
    np.testing.assert_array_equal(a["obs"][..., 0, :], b["obs"][..., 0, :])
    np.testing.assert_allclose(a["returns"], a["rewards"].sum(-1))
    np.testing.assert_array_equal(a["obs"][..., 1:, :], a["next_obs"][..., :-1, :])
