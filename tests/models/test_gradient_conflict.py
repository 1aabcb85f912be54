import numpy as np
import pytest
import torch

from reprobook.models.gradient_conflict import conflict_summary, grouped_cosine, per_task_gradients


def test_single_group_is_the_plain_cosine():
    a, b = np.array([1.0, 0.0]), np.array([-1.0, 1.0])
    c = grouped_cosine([[a], [b]])
    assert c[0, 1] == pytest.approx(-1 / np.sqrt(2)) and c[0, 0] == pytest.approx(1.0)
    s = conflict_summary(c)
    assert s["share_conflicting"] == 1.0 and s["conflict"] == pytest.approx(1 / np.sqrt(2))


def test_tasks_on_separate_experts_do_not_conflict():
    # task 0 uses only group 0, task 1 only group 1: no shared weights, cosine 0
    g0 = [np.array([1.0, 2.0]), np.zeros(2)]
    g1 = [np.zeros(2), np.array([-3.0, 1.0])]
    assert grouped_cosine([g0, g1])[0, 1] == 0.0
    # opposite gradients in a shared group conflict fully
    h0 = [np.array([1.0, 2.0]), np.zeros(2)]
    h1 = [np.array([-1.0, -2.0]), np.zeros(2)]
    assert grouped_cosine([h0, h1])[0, 1] == pytest.approx(-1.0)


def test_per_task_gradients_of_a_linear_model():
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(3))
    xs = [torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 2.0, 0.0])]
    grads = per_task_gradients(lambda x: (w * x).sum(), xs, [[w]])
    assert np.allclose(grads[0][0], [1, 0, 0]) and np.allclose(grads[1][0], [0, 2, 0])
    assert grouped_cosine(grads)[0, 1] == 0.0


def test_bad_input():
    with pytest.raises(ValueError, match="at least two"):
        grouped_cosine([[np.ones(2)]])
    with pytest.raises(ValueError, match="square"):
        conflict_summary(np.ones((2, 3)))
    with pytest.raises(ValueError, match="groups"):
        per_task_gradients(lambda x: x, [1, 2], [])
