"""Generated voxel scenes: classes in place, thin structures thin, determinism, the two noisy cues."""
import numpy as np
import pytest

from reprobook.data.voxel_scenes import (BUILDING, EMPTY, GROUND, N_CLASSES, POLE, THIN, WIRE,
                                         bev_cue, check_labels, generate_scene, generate_scenes,
                                         lifted_features)


def test_scene_layout_and_thin_classes():
    s = generate_scenes(6, (16, 16, 8), seed=0)
    assert s.shape == (6, 16, 16, 8) and s.dtype == np.int64
    assert np.all(s[..., :2] == GROUND) and not np.any(s[..., 2:] == GROUND)
    for k in range(1, N_CLASSES):
        assert np.any(s == k), f"class {k} never generated"
    for scene in s:
        # a pole is one voxel wide: its footprint has no 2x2 block of pole columns
        col = np.any(scene == POLE, axis=-1)
        assert not np.any(col[1:, 1:] & col[:-1, 1:] & col[1:, :-1] & col[:-1, :-1])
        # a wire is one voxel thick: never two wire voxels stacked
        w = scene == WIRE
        assert not np.any(w[..., 1:] & w[..., :-1])
        # thin things stand on or hang above free space, never inside buildings: every pole
        # voxel's column below it is pole or ground
        xs, ys, zs = np.nonzero(scene == POLE)
        for x, y, z in zip(xs, ys, zs):
            assert np.all(np.isin(scene[x, y, 2:z], [POLE]))


def test_deterministic_and_nested():
    a = generate_scenes(3, (16, 16, 8), seed=4)
    b = generate_scenes(5, (16, 16, 8), seed=4)
    assert np.array_equal(a, b[:3])
    assert not np.array_equal(a, generate_scenes(3, (16, 16, 8), seed=5))
    assert not np.array_equal(a, generate_scenes(3, (16, 16, 8), seed=4, stream=1))


def test_lifted_features_are_noisy_one_hot():
    s = generate_scenes(2, (16, 16, 8), seed=1)
    f0 = lifted_features(s, 0.0, np.random.default_rng(0))
    assert f0.shape == (2, N_CLASSES, 16, 16, 8) and f0.dtype == np.float32
    assert np.array_equal(f0.argmax(1), s) and np.allclose(f0.sum(1), 1)
    f = lifted_features(s, 0.5, np.random.default_rng(0))
    assert abs(float((f - f0).std()) - 0.5) < 0.02


def test_bev_cue_sees_the_top_and_is_noisy():
    s = generate_scenes(4, (16, 16, 8), seed=2)
    clean = bev_cue(s, np.random.default_rng(0), flip=0.0)
    z = np.arange(8)
    top = np.where(s != EMPTY, z, -1).max(-1)
    assert np.array_equal(clean, np.take_along_axis(s, top[..., None], -1)[..., 0])
    assert np.any(np.isin(clean, THIN)) and np.any(clean == BUILDING)
    noisy = bev_cue(s, np.random.default_rng(0), flip=0.3)
    changed = np.mean(noisy != clean)
    assert 0.3 * (1 - 1 / N_CLASSES) - 0.05 < changed < 0.3 + 0.05
    missed = bev_cue(s, np.random.default_rng(0), flip=0.0, miss=1.0)
    assert not np.any(np.isin(missed, THIN))
    assert np.array_equal(missed[~np.isin(clean, THIN)], clean[~np.isin(clean, THIN)])


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="shape"):
        generate_scene((16, 16), np.random.default_rng(0))
    with pytest.raises(ValueError, match="too small"):
        generate_scene((4, 16, 8), np.random.default_rng(0))
    with pytest.raises(ValueError, match="lie in"):
        check_labels(np.full((4, 4, 4), 9))
    with pytest.raises(ValueError, match="flip"):
        bev_cue(np.zeros((8, 8, 4), int), np.random.default_rng(0), flip=1.5)
    with pytest.raises(ValueError, match="sigma"):
        lifted_features(np.zeros((8, 8, 4), int), -1.0, np.random.default_rng(0))
