import numpy as np
import pytest
import torch

from reprobook.data.digits import load_digits_arrays
from reprobook.learning.continual import (ContinualConfig, average_accuracy, continual_loss,
                                          forgetting, split_by_class, train_continual)
from reprobook.learning.reservoir import ReservoirBuffer


@pytest.fixture(scope="module")
def digit_tasks():
    x, y = load_digits_arrays()
    p = np.random.default_rng(0).permutation(len(x))
    x, y = x[p] / 16, y[p]
    return split_by_class(x[:1400], y[:1400], x[1400:], y[1400:], 2)


def test_split_gives_disjoint_class_groups(digit_tasks):
    assert [t.classes for t in digit_tasks] == [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)]
    for t in digit_tasks:
        assert set(t.y_train.tolist()) == set(t.classes) == set(t.y_test.tolist())
    assert sum(len(t.x_train) for t in digit_tasks) == 1400


def test_metrics_on_a_known_matrix():
    R = [[0.9, 0.1, 0.0], [0.5, 0.8, 0.1], [0.3, 0.6, 0.7]]
    assert average_accuracy(R) == pytest.approx((0.3 + 0.6 + 0.7) / 3)
    assert forgetting(R) == pytest.approx(((0.9 - 0.3) + (0.8 - 0.6)) / 2)


def test_rehearsal_remembers_what_finetuning_forgets(digit_tasks):
    """Split digits, five class-incremental tasks, the same budget: finetuning forgets almost all of
    every old task; ER and DER++ keep a clear share of them."""
    torch.set_num_threads(1)
    cfg = ContinualConfig(epochs=2, lr=0.1, buffer=200, replay_batch=64)
    out = {}
    for m in ("finetune", "er", "derpp"):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
        out[m] = train_continual(net, digit_tasks, m, cfg, seed=0)
    assert out["finetune"].forgetting > 0.9 and out["finetune"].average_accuracy < 0.25
    for m in ("er", "derpp"):
        assert out[m].average_accuracy > out["finetune"].average_accuracy + 0.15
        assert out[m].forgetting < out["finetune"].forgetting - 0.2
        assert out[m].steps == out["finetune"].steps          # same budget
    assert len(out["derpp"].buffer) == 200 and out["derpp"].buffer.logits is not None


def test_adam_steps_only_trainable_parameters(digit_tasks):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    net[0].weight.requires_grad_(False)
    frozen = net[0].weight.clone()
    head = net[2].weight.clone()
    r = train_continual(net, digit_tasks[:2], "er", ContinualConfig(epochs=1, lr=1e-2), seed=0,
                        optimizer="adam")
    assert torch.equal(net[0].weight, frozen) and not torch.equal(net[2].weight, head)
    assert r.R[0, 0] > 0.6                     # well above the 0.1 of an untrained 10-way head


def test_derpp_matches_its_definition():
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 4)
    buf = ReservoirBuffer(8, seed=1)
    bx = torch.randn(8, 3)
    buf.add(bx, torch.randint(0, 4, (8,)), logits=torch.randn(8, 4))
    cfg = ContinualConfig(replay_batch=8, alpha=0.7, beta=0.2)
    x, y = torch.randn(5, 3), torch.randint(0, 4, (5,))
    loss, _ = continual_loss("derpp", net, x, y, buf, cfg)
    # the replay batch is the whole buffer, so both draws are the buffer (in some order)
    F = torch.nn.functional
    want = F.cross_entropy(net(x), y) + 0.7 * F.mse_loss(net(buf.x), buf.logits) \
        + 0.2 * F.cross_entropy(net(buf.x), buf.y)
    torch.testing.assert_close(loss, want)


def test_bad_input_is_named(digit_tasks):
    with pytest.raises(ValueError, match="unknown continual method 'ewc'"):
        train_continual(torch.nn.Linear(64, 10), digit_tasks, "ewc", ContinualConfig(), seed=0)
    with pytest.raises(ValueError, match="unknown optimizer 'rmsprop'"):
        train_continual(torch.nn.Linear(64, 10), digit_tasks, "er", ContinualConfig(), seed=0,
                        optimizer="rmsprop")
    with pytest.raises(ValueError, match="must divide the 10 labels"):
        split_by_class(np.zeros((10, 2)), np.arange(10), np.zeros((10, 2)), np.arange(10), 3)
    with pytest.raises(ValueError, match="buffer must be a positive int"):
        ContinualConfig(buffer=0)
    with pytest.raises(ValueError, match="at least two tasks"):
        forgetting([[1.0]])
