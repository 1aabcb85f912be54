"""Grid worlds: parsing, dynamics, named layouts and the gymnasium wrapper."""
import numpy as np
import pytest

from reprobook.rl.gridworld import ACTIONS, LAYOUTS, GridWorldEnv, gridworld, maze

ROOM = ("#####",
        "#S..#",
        "#.#.#",
        "#####")


def test_parse_counts_cells_in_reading_order():
    w = gridworld(ROOM)
    assert w.n_states == 5 and w.start == 0 and w.shape == (4, 5)
    assert w.state(1, 3) == 2 and w.state(2, 1) == 3 and w.state(2, 3) == 4
    with pytest.raises(ValueError, match="not a free cell"):
        w.state(2, 2)


def test_deterministic_moves_and_walls():
    w = gridworld(ROOM)
    P = w.mdp.P
    N, S, E, W, STAY = range(5)
    s0 = w.start
    assert P[s0, E, w.state(1, 2)] == 1.0     # east into a free cell
    assert P[s0, N, s0] == 1.0                # north into the border wall: stays
    assert P[s0, S, w.state(2, 1)] == 1.0
    assert P[w.state(1, 2), S, w.state(1, 2)] == 1.0   # the inner wall blocks
    assert np.all(P[np.arange(5), STAY, np.arange(5)] == 1.0)
    assert np.all(w.mdp.r == 0)


def test_slip_spreads_mass_and_keeps_rows_stochastic():
    w = gridworld(ROOM, slip=0.5)
    assert np.allclose(w.mdp.P.sum(axis=2), 1.0)
    s0 = w.start
    # E from the start: 0.5 intended + 0.1 from the slip's own E draw
    assert w.mdp.P[s0, 1 + 1, w.state(1, 2)] == pytest.approx(0.6)


@pytest.mark.parametrize("layout, match", [
    (("#S#", "#.##"), "same length"),
    (("#..#",), "exactly one start"),
    (("#SS#",), "exactly one start"),
    (("#Sx#",), "may only hold"),
    ((), "non-empty"),
])
def test_bad_layouts_are_named(layout, match):
    with pytest.raises((ValueError, TypeError), match=match):
        gridworld(layout)


def test_bad_slip_and_unknown_maze():
    with pytest.raises(ValueError, match="slip"):
        gridworld(ROOM, slip=1.5)
    with pytest.raises(ValueError, match="unknown maze"):
        maze("nope")


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_named_layouts_are_connected_and_start_in_a_corner(name):
    w = maze(name)
    assert w.reachable().all()
    assert tuple(w.cells[w.start]) == (1, 1)
    assert w.mdp.n_actions == len(ACTIONS)


def test_reachable_excludes_a_walled_off_cell():
    w = gridworld(("#####", "#S#.#", "#####"))
    assert w.reachable().tolist() == [True, False]


def test_to_grid_puts_nan_on_walls():
    w = gridworld(ROOM)
    g = w.to_grid(np.arange(5.0))
    assert np.isnan(g[0]).all() and g[2, 3] == 4.0
    with pytest.raises(ValueError, match="shape"):
        w.to_grid(np.zeros(3))


def test_gym_env_follows_the_transition_kernel():
    w = gridworld(ROOM, slip=0.3)
    env = GridWorldEnv(w, max_steps=3)
    s, _ = env.reset(seed=1)
    assert s == w.start and env.observation_space.n == 5 and env.action_space.n == 5
    counts = np.zeros(5)
    for _ in range(4000):
        env.reset()
        s, r, term, trunc, _ = env.step(2)
        counts[s] += 1
        assert r == 0.0 and not term and not trunc
    assert np.allclose(counts / counts.sum(), w.mdp.P[w.start, 2], atol=0.03)
    env.step(0), env.step(0)
    assert env.step(0)[3]      # truncated after max_steps
    with pytest.raises(ValueError, match="action"):
        env.step(7)
