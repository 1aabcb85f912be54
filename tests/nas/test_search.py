import numpy as np
import pytest

from reprobook.models.supernet_gpt import GPTSpace
from reprobook.nas.search import hypervolume, hypervolume_trace, nsga2_search, random_search

SPACE = GPTSpace()


def _objective(archs):
    X = SPACE.features(archs)
    # size against a penalty for every layer that is not at the largest heads and ratio
    pen = np.array([sum(h != 8 for h in a.heads) + sum(r != 4 for r in a.ratios) for a in archs])
    return np.c_[-X[:, -2] / 1e4 + 3 * pen, X[:, -1] / 1e6]


def test_hypervolume_of_known_sets():
    assert hypervolume([[0.5, 0.5]], [0, 0], [1, 1], ref=1.0) == pytest.approx(0.25)
    assert hypervolume([[0.0, 1.0], [1.0, 0.0]], [0, 0], [1, 1], ref=2.0) == pytest.approx(3.0)
    assert hypervolume([[3.0, 3.0]], [0, 0], [1, 1]) == 0.0
    tr = hypervolume_trace([[0.8, 0.8], [0.2, 0.2]], [0, 0], [1, 1], at=[1, 2], ref=1.0)
    assert tr[0] == pytest.approx(0.04) and tr[1] == pytest.approx(0.64)
    with pytest.raises(ValueError, match="nadir"):
        hypervolume([[0.5, 0.5]], [0, 0], [0, 1])


def test_nsga2_uses_its_budget_and_beats_random_search_on_a_structured_problem():
    rng = np.random.default_rng(0)
    F0 = _objective([SPACE.sample(rng) for _ in range(500)])
    ideal, nadir = F0.min(0), F0.max(0)
    hv_n, hv_r = [], []
    for s in range(3):
        a, F = nsga2_search(_objective, SPACE, 300, pop_size=20, seed=s)
        assert len(a) == 300 and F.shape == (300, 2)
        hv_n.append(hypervolume(F, ideal, nadir))
        hv_r.append(hypervolume(random_search(_objective, SPACE, 300, seed=s)[1], ideal, nadir))
    assert np.mean(hv_n) > np.mean(hv_r)
    with pytest.raises(ValueError, match="n_evals"):
        random_search(_objective, SPACE, 0)
