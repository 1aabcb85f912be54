"""The random-teacher classification stream."""
import pytest
import torch

from reprobook.data.teacher_mlp import TeacherMLP


def test_deterministic_and_fresh():
    t1, t2 = TeacherMLP(8, 32, 2, 4, seed=3), TeacherMLP(8, 32, 2, 4, seed=3)
    x1, y1 = t1.sample(50, torch.Generator().manual_seed(0))
    x2, y2 = t2.sample(50, torch.Generator().manual_seed(0))
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    g = torch.Generator().manual_seed(0)
    a, _ = t1.sample(10, g)
    b, _ = t1.sample(10, g)
    assert not torch.equal(a, b)
    assert y1.dtype == torch.int64 and y1.min() >= 0 and y1.max() < 4


def test_labels_are_argmax_and_use_several_classes():
    t = TeacherMLP(16, 64, 2, 8, seed=0)
    x, y = t.sample(2000, torch.Generator().manual_seed(1))
    assert torch.equal(y, t.logits(x).argmax(-1))
    assert len(torch.unique(y)) >= 6               # not collapsed on one class
    assert TeacherMLP(16, 64, 2, 8, seed=1).logits(x).argmax(-1).ne(y).any()


def test_bad_input():
    with pytest.raises(ValueError, match="n_classes"):
        TeacherMLP(4, 4, 1, 1)
    with pytest.raises(ValueError, match="x must be"):
        TeacherMLP(4, 4, 1, 2).logits(torch.randn(3, 5))
    with pytest.raises(TypeError, match="generator"):
        TeacherMLP(4, 4, 1, 2).sample(3, 0)
