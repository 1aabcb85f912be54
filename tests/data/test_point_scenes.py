"""Generated rooms and the motorcycle 2.5-D cloud."""
import numpy as np
import pytest

from reprobook.data.point_scenes import CLASSES, indoor_scene, indoor_scenes, motorcycle_cloud, subsample


def test_room_labels_match_their_surfaces():
    x, y = indoor_scene(2000, np.random.default_rng(0), noise=0.0)
    assert x.shape == (2000, 3) and y.shape == (2000,)
    assert set(np.unique(y)) <= set(range(len(CLASSES)))
    assert (y == 0).sum() == 500 and (y == 1).sum() == 500
    assert np.abs(x[y == 0, 2]).max() < 1e-6                  # floor at z = 0
    assert x[y == 1, 2].max() <= 2.5 + 1e-6
    assert len(np.unique(y[y >= 2])) >= 3                     # at least three object kinds
    assert x[y >= 2, 2].min() > -1e-6                         # objects stand on the floor


def test_rooms_are_seeded_and_differ():
    a = indoor_scenes(2, 300, np.random.default_rng(1))
    b = indoor_scenes(2, 300, np.random.default_rng(1))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.allclose(a[0][0], a[0][1])
    with pytest.raises(ValueError, match="n must"):
        indoor_scene(10, np.random.default_rng(0))


def test_motorcycle_cloud_is_metric_and_finite():
    p = motorcycle_cloud()
    assert p.shape[1] == 3 and len(p) > 100_000
    assert np.isfinite(p).all()
    depth = -p[:, 2]
    assert 1.0 < np.median(depth) < 5.0                       # a motorcycle a few metres away
    s = subsample(p, 1000, np.random.default_rng(0))
    assert s.shape == (1000, 3)
    with pytest.raises(ValueError, match="n must"):
        subsample(p, 0, np.random.default_rng(0))
