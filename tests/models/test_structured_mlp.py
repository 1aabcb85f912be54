"""Structured students, stream training with measured FLOPs, and the compute frontier."""
import numpy as np
import pytest
import torch

from reprobook.data.teacher_mlp import TeacherMLP
from reprobook.models.structured_mlp import StructuredStudent, frontier, train_stream


def test_student_shapes_and_structure():
    torch.manual_seed(0)
    m = StructuredStudent(8, 16, 3, "btt")
    assert m(torch.randn(5, 8)).shape == (5, 3)
    assert m.hidden[0].sizes.c == 4


def test_train_stream_learns_and_counts_flops():
    t = TeacherMLP(8, 16, 1, 3, seed=0)
    ev = t.sample(256, torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    m = StructuredStudent(8, 16, 3, "dense")
    r = train_stream(m, t, steps=60, batch_size=32, lr=1e-2, seed=2, checkpoints=[0, 30, 60], eval_set=ev)
    assert r["steps"] == [0, 30, 60]
    assert r["loss"][-1] < r["loss"][0] - 0.1
    # forward 2*32*(8*16 + 16*16 + 16*3); backward adds the weight gradients of every layer and the
    # input gradients of all but the first
    fwd = 2 * 32 * (8 * 16 + 16 * 16 + 16 * 3)
    assert r["step_flops"] == fwd + 2 * 32 * (8 * 16 + 16 * 16 + 16 * 3) + 2 * 32 * (16 * 16 + 16 * 3)
    assert r["flops"] == [0, 30 * r["step_flops"], 60 * r["step_flops"]]
    with pytest.raises(ValueError, match="checkpoints"):
        train_stream(m, t, steps=5, batch_size=4, lr=1e-3, seed=0, checkpoints=[9], eval_set=ev)


def test_frontier_is_lower_envelope_and_monotone():
    a = {"flops": [0, 10, 100], "loss": [3.0, 2.0, 1.0]}
    b = {"flops": [0, 50, 1000], "loss": [3.0, 1.5, 0.5]}
    f = frontier([a, b], [5, 10, 100, 500, 1000, 5000])
    assert np.isinf(f[0])
    assert f[1] == pytest.approx(2.0)
    assert f[2] == pytest.approx(1.0)                 # a's end beats b's interpolation (~1.2)
    assert f[3] < 1.0 and f[5] == pytest.approx(0.5)  # b beyond its end keeps its best loss
    assert np.all(np.diff(f[1:]) <= 1e-12)
