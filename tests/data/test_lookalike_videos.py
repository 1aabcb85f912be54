import numpy as np
import pytest

from reprobook.data.lookalike_videos import make_video, walk


def test_video_shapes_crossing_and_lookalikes():
    v = make_video(np.random.default_rng(0), n_frames=12, substeps=4, n_distractors=2)
    T, n = 12, 3
    assert v.frames.shape == (T, 64, 64) and v.events.shape == (T - 1, 4, 2, 64, 64)
    assert v.centers.shape == (T, n, 2) and v.template.shape == (v.box_size, v.box_size)
    assert 0 <= v.frames.min() and v.frames.max() <= 1
    # distractor 1 passes within ~1.5 px of the target at the crossing frame
    assert np.linalg.norm(v.centers[v.t_cross, 0] - v.centers[v.t_cross, 1]) <= 1.5
    assert v.events.sum() > 0 and v.boxes(0).shape == (T, 4)


def test_deterministic_given_the_generator():
    a = make_video(np.random.default_rng(3), n_frames=8)
    b = make_video(np.random.default_rng(3), n_frames=8)
    assert np.array_equal(a.frames, b.frames) and np.array_equal(a.events, b.events)


def test_walk_stays_inside_and_keeps_speed():
    p = walk([10.0, 10.0], 0.3, 3.0, 20, 5, 1.5, 0.5, 6.0, 57.0, np.random.default_rng(1))
    assert p.shape == (96, 2) and p.min() >= 6.0 and p.max() <= 57.0
    steps = np.linalg.norm(np.diff(p, axis=0), axis=1)
    assert steps.max() <= 3.0 / 5 + 1e-9


def test_bad_input():
    with pytest.raises(ValueError, match="n_distractors"):
        make_video(np.random.default_rng(0), n_distractors=0)
    with pytest.raises(ValueError, match="lookalike"):
        make_video(np.random.default_rng(0), lookalike=1.5)
