import numpy as np
import pytest
import torch

from reprobook.learning.continual import Task
from reprobook.learning.online_stream import (OnlineLearner, colour_shortcut_tasks, head_weight,
                                              run_online, stream_batches)


def _rng(s=0):
    return np.random.default_rng(s)


def test_colour_stream_has_the_planted_shortcut():
    tasks, truth = colour_shortcut_tasks(_rng(), per_task=400, test_per_class=50)
    assert [t.classes for t in tasks] == [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)]
    col = truth["slices"]["colour"]
    for t in tasks:
        a, b = t.classes
        # within a task the two classes differ in colour ...
        assert truth["colour"][a] != truth["colour"][b]
        # ... and the colour dimension of each class carries ~2.5 on average
        for c in t.classes:
            m = t.x_train[t.y_train == c][:, col].mean(0).numpy()
            assert m[truth["colour"][c]] == pytest.approx(2.5, abs=0.3)
    # colours repeat across tasks (3 colours, 10 classes)
    assert len(set(truth["colour"].tolist())) == 3
    assert tasks[0].x_train.shape == (400, 32)


def test_colour_stream_rejects_bad_input():
    with pytest.raises(ValueError, match="share a colour"):
        colour_shortcut_tasks(_rng(), classes_per_task=4, n_colours=3)
    with pytest.raises(TypeError):
        colour_shortcut_tasks(0)
    with pytest.raises(ValueError):
        colour_shortcut_tasks(_rng(), per_task=0)


def test_stream_batches_keep_tasks_apart_and_cover_everything():
    tasks, _ = colour_shortcut_tasks(_rng(), n_tasks=2, per_task=25, test_per_class=2)
    b = stream_batches(tasks, 10, _rng(1))
    assert [len(x) for x, _, _ in b] == [10, 10, 5, 10, 10, 5]
    assert [t for _, _, t in b] == [0, 0, 0, 1, 1, 1]
    ys = torch.cat([y for _, y, _ in b])
    assert sorted(ys.tolist()) == sorted(torch.cat([t.y_train for t in tasks]).tolist())


class _Fixed(OnlineLearner):
    """A learner whose step costs a fixed number of sample passes and does nothing else."""

    def __init__(self, model, cost):
        super().__init__(model)
        self.cost = cost

    def step(self, x, y, task=0):
        self.seen_classes.update(int(c) for c in y.unique())
        return self.cost


def _one_task(n=1000):
    x = torch.zeros(n, 2)
    y = torch.arange(n) % 2
    return [Task(x, y, x[:4], y[:4], (0, 1))]


@pytest.mark.parametrize("cost,share", [(10, 1.0), (11.9, 1.0), (20, 0.6), (24, 0.5), (36, 1 / 3)])
def test_cost_model_share_is_capacity_over_cost(cost, share):
    """Capacity 12 per 10-sample batch: a step that costs c passes lasts c/12 time units, and a
    learner slower than the stream trains on about 12/c of it (at most all of it)."""
    r = run_online(_Fixed(torch.nn.Linear(2, 2), cost), _one_task(), batch=10, capacity=12.0,
                   rng=_rng())
    assert r.processed_share == pytest.approx(share, abs=0.01)
    assert len(r.costs) == r.taken.sum()


def test_a_slow_learner_takes_the_newest_batch():
    r = run_online(_Fixed(torch.nn.Linear(2, 2), 25.0), _one_task(60), batch=10, capacity=10.0,
                   rng=_rng())
    # steps last 2.5 units: free at 2.5 -> batch 2, at 5.0 -> batch 5
    assert np.flatnonzero(r.taken).tolist() == [0, 2, 5]


def test_er_keeps_old_classes_that_ce_forgets():
    torch.manual_seed(0)
    tasks, _ = colour_shortcut_tasks(_rng(3), per_task=200, test_per_class=50)
    out = {}
    for name, kw in (("ce", {}), ("er", dict(buffer=200, replay_every=1))):
        torch.manual_seed(0)
        L = OnlineLearner(torch.nn.Linear(32, 10), lr=0.1, seed=0, **kw)
        out[name] = run_online(L, tasks, batch=10, capacity=1e9, rng=_rng(4))
    # CE's accuracy on the first task collapses by the end; ER keeps a clear share of it
    assert out["ce"].R[-1, 0] < 0.2
    assert out["er"].R[-1, 0] > out["ce"].R[-1, 0] + 0.2
    assert out["er"].final_accuracy > out["ce"].final_accuracy + 0.05
    assert out["ce"].processed_share == 1.0
    assert out["ce"].heads.shape == (5, 10, 32) and out["ce"].seen[0] == [0, 1]
    # anytime curve: on task 1 only the first two classes are tested (chance 0.5, then near 1)
    assert out["ce"].curve_acc[0] > 0.6


def test_learner_rejects_bad_settings():
    m = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="needs a buffer"):
        OnlineLearner(m, replay_every=1)
    with pytest.raises(ValueError):
        OnlineLearner(m, lr=0.0)
    with pytest.raises(ValueError, match="capacity"):
        run_online(OnlineLearner(m), _one_task(20), batch=10, capacity=0.0, rng=_rng())
    with pytest.raises(ValueError, match="no nn.Linear"):
        head_weight(torch.nn.ReLU())
