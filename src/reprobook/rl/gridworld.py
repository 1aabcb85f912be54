r"""Grid worlds (open rooms, mazes, four rooms) as tabular MDPs, with a gymnasium wrapper.

A layout is a list of equal-length strings: ``#`` is a wall, ``.`` a free cell and ``S`` the one
start cell (also free). Every free cell is a state, numbered in reading order (row by row). The
five actions are :data:`ACTIONS` = (N, S, E, W, stay). A move into a wall or off the map leaves the
agent where it is. With ``slip = p`` the intended move happens with probability :math:`1 - p` and
one of the five actions, uniformly, happens instead with probability :math:`p`, so ``slip = 0``
(the default) is deterministic. Rewards are zero: these worlds are for reward-free problems
(exploration, skill discovery); a task sets its own reward on :class:`~reprobook.rl.mdp.TabularMDP`.

:data:`LAYOUTS` holds the named maps used by the book: ``easy`` (an open 7x7 room), ``u`` (a 9x9
room split by a U-shaped wall, so the far side of the U is only reached around it), ``hard`` (an
11x11 corridor maze, every cell in a one-cell-wide corridor) and ``four-rooms`` (Sutton, Precup &
Singh's 11x11 four rooms joined by one-cell doorways). All start in a corner.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .mdp import TabularMDP

__all__ = ["ACTIONS", "LAYOUTS", "GridWorld", "gridworld", "maze", "GridWorldEnv"]

ACTIONS = ("N", "S", "E", "W", "stay")
_MOVES = np.array([(-1, 0), (1, 0), (0, 1), (0, -1), (0, 0)])

LAYOUTS: dict[str, tuple[str, ...]] = {
    "easy": (
        "#########",
        "#S......#",
        "#.......#",
        "#.......#",
        "#.......#",
        "#.......#",
        "#.......#",
        "#.......#",
        "#########",
    ),
    "u": (
        "###########",
        "#S........#",
        "#.........#",
        "#..#...#..#",
        "#..#...#..#",
        "#..#...#..#",
        "#..#...#..#",
        "#..#####..#",
        "#.........#",
        "#.........#",
        "###########",
    ),
    "hard": (
        "#############",
        "#S....#.....#",
        "#####.#.###.#",
        "#.....#...#.#",
        "#.#######.#.#",
        "#.#.......#.#",
        "#.#.#######.#",
        "#...#.......#",
        "###.#.#######",
        "#...#.......#",
        "#.#########.#",
        "#...........#",
        "#############",
    ),
    "four-rooms": (
        "#############",
        "#S....#.....#",
        "#.....#.....#",
        "#...........#",
        "#.....#.....#",
        "#.....#.....#",
        "##.####.....#",
        "#.....###.###",
        "#.....#.....#",
        "#.....#.....#",
        "#...........#",
        "#.....#.....#",
        "#############",
    ),
}


@dataclass(frozen=True, eq=False)
class GridWorld:
    """A parsed grid world: its layout, the (row, col) of every state, the start state, the MDP."""

    layout: tuple[str, ...]
    cells: np.ndarray          # (S, 2) int: row and column of each state
    start: int                 # the start state's index
    mdp: TabularMDP

    @property
    def n_states(self) -> int:
        return self.mdp.n_states

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.layout), len(self.layout[0])

    def state(self, row: int, col: int) -> int:
        """The index of the free cell at (row, col); a wall or an off-map cell is an error."""
        hit = np.flatnonzero((self.cells[:, 0] == row) & (self.cells[:, 1] == col))
        if hit.size == 0:
            raise ValueError(f"({row}, {col}) is not a free cell of this grid")
        return int(hit[0])

    def to_grid(self, values) -> np.ndarray:
        """A per-state vector laid out on the map (shape of the layout), NaN on walls: for heatmaps."""
        v = np.asarray(values, dtype=np.float64)
        if v.shape != (self.n_states,):
            raise ValueError(f"values must have shape (S,) = ({self.n_states},), got {v.shape}")
        out = np.full(self.shape, np.nan)
        out[self.cells[:, 0], self.cells[:, 1]] = v
        return out

    def reachable(self, start: int | None = None) -> np.ndarray:
        """Boolean mask of the states some action sequence reaches from ``start`` (default: the start)."""
        s0 = self.start if start is None else int(start)
        adj = self.mdp.P.max(axis=1) > 0
        seen = np.zeros(self.n_states, dtype=bool)
        seen[s0] = True
        frontier = [s0]
        while frontier:
            nxt = np.flatnonzero(adj[frontier].any(axis=0) & ~seen)
            seen[nxt] = True
            frontier = list(nxt)
        return seen


def _layout(layout) -> tuple[str, ...]:
    if isinstance(layout, str):
        rows = tuple(line for line in layout.strip("\n").split("\n"))
    else:
        rows = tuple(layout)
    if not rows or not all(isinstance(r, str) for r in rows):
        raise TypeError("layout must be a non-empty string or a sequence of strings")
    if len({len(r) for r in rows}) != 1:
        raise ValueError(f"every row of the layout must have the same length, got "
                         f"{sorted({len(r) for r in rows})}")
    bad = set("".join(rows)) - set("#.S")
    if bad:
        raise ValueError(f"layout may only hold '#', '.' and 'S'; found {sorted(bad)}")
    n_start = "".join(rows).count("S")
    if n_start != 1:
        raise ValueError(f"layout must have exactly one start cell 'S', found {n_start}")
    return rows


def gridworld(layout: str | Sequence[str], gamma: float = 0.95, slip: float = 0.0) -> GridWorld:
    """Build the tabular MDP of a layout (see the module docstring); rewards are zero."""
    rows = _layout(layout)
    if isinstance(slip, bool) or not isinstance(slip, (int, float)) or not 0.0 <= slip <= 1.0:
        raise ValueError(f"slip must be a probability in [0, 1], got {slip!r}")
    grid = np.array([list(r) for r in rows])
    cells = np.argwhere(grid != "#")
    index = -np.ones(grid.shape, dtype=int)
    index[cells[:, 0], cells[:, 1]] = np.arange(len(cells))
    S, A = len(cells), len(ACTIONS)
    target = np.empty((S, A), dtype=int)   # where each intended move lands
    for a, (dr, dc) in enumerate(_MOVES):
        r, c = cells[:, 0] + dr, cells[:, 1] + dc
        inside = (r >= 0) & (r < grid.shape[0]) & (c >= 0) & (c < grid.shape[1])
        land = np.where(inside, index[np.clip(r, 0, grid.shape[0] - 1),
                                      np.clip(c, 0, grid.shape[1] - 1)], -1)
        target[:, a] = np.where(land >= 0, land, np.arange(S))
    P = np.zeros((S, A, S))
    for a in range(A):
        P[np.arange(S), a, target[:, a]] += 1.0 - slip
        for b in range(A):          # the slip: a uniformly random action instead
            P[np.arange(S), a, target[:, b]] += slip / A
    start = int(index[tuple(np.argwhere(grid == "S")[0])])
    return GridWorld(rows, cells, start, TabularMDP(P, np.zeros((S, A)), gamma))


def maze(name: str, gamma: float = 0.95, slip: float = 0.0) -> GridWorld:
    """One of the named :data:`LAYOUTS` as a :class:`GridWorld`."""
    if name not in LAYOUTS:
        raise ValueError(f"unknown maze {name!r}; choose one of {sorted(LAYOUTS)}")
    return gridworld(LAYOUTS[name], gamma, slip)


try:   # the wrapper is optional: the tabular code does not need gymnasium
    import gymnasium as _gym
except ImportError:   # pragma: no cover
    _gym = None


if _gym is not None:
    class GridWorldEnv(_gym.Env):
        """A :class:`GridWorld` behind the gymnasium API: Discrete states and actions, reward 0.

        Episodes start at the grid's start state and are truncated after ``max_steps`` steps;
        there is no terminal state. Transitions are drawn from the MDP's ``P`` with the
        environment's own generator (seeded through ``reset(seed=...)``).
        """

        metadata = {"render_modes": []}

        def __init__(self, world: GridWorld, max_steps: int = 200):
            if not isinstance(world, GridWorld):
                raise TypeError(f"world must be a GridWorld, got {type(world).__name__}")
            if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
                raise ValueError(f"max_steps must be an int >= 1, got {max_steps!r}")
            self.world = world
            self.max_steps = max_steps
            self.observation_space = _gym.spaces.Discrete(world.n_states)
            self.action_space = _gym.spaces.Discrete(len(ACTIONS))
            self._cdf = np.cumsum(world.mdp.P, axis=2)
            self._s = world.start
            self._t = 0

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self._s, self._t = self.world.start, 0
            return self._s, {}

        def step(self, action):
            if not self.action_space.contains(int(action)):
                raise ValueError(f"action must be an int in [0, {len(ACTIONS)}), got {action!r}")
            row = self._cdf[self._s, int(action)]
            self._s = int(min(np.searchsorted(row, self.np_random.random(), side="right"),
                              len(row) - 1))
            self._t += 1
            return self._s, 0.0, False, self._t >= self.max_steps, {}
