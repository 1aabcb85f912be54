import numpy as np
import pytest

from reprobook import rng
from reprobook.timeseries.segments import (boundary_mask, macro_f1, make_groups, mvd_series,
                                           scores, scramble_groups, shift_boundaries,
                                           transitions_per_group, window_labels)


def test_mvd_series_segments_and_markov_chain():
    s = mvd_series(6000, duration_range=(96, 480), rng=rng(0))
    assert s.values.shape == (6000, 3) and s.labels.shape == (6000,)
    assert np.all(s.classes[1:] != s.classes[:-1])              # never the same class twice
    d = np.diff(np.append(s.starts, 6000))
    assert d[:-1].min() >= 96 and d.max() <= 480                 # the last one may be cut short
    for a, c in zip(s.starts, s.classes):
        assert s.labels[a] == c


def test_mvd_series_is_reproducible_and_classes_are_fixed():
    a, b = mvd_series(2000, rng=rng(3)), mvd_series(2000, rng=rng(3))
    assert np.array_equal(a.values, b.values)
    c = mvd_series(2000, rng=rng(4))
    assert not np.array_equal(a.values, c.values)


def test_classes_1_and_2_differ_only_in_amplitude():
    # without noise, a segment of class 2 has (1 + confusion) times the spectrum of class 1
    s = mvd_series(40000, noise=0.0, crossfade=0, confusion=0.5, rng=rng(1))
    def power(k):
        return np.mean([s.values[a + 20:a + 84].var(0).sum() for a, c in zip(s.starts, s.classes)
                        if c == k and a + 84 < 40000])
    assert power(2) / power(1) == pytest.approx(1.5 ** 2, rel=0.35)


def test_crossfade_weights_sum_to_one():
    # noise-free, one class everywhere would be a pure sum of sines; with crossfades the signal
    # stays bounded by the largest amplitude sum
    s = mvd_series(5000, noise=0.0, rng=rng(2))
    assert np.abs(s.values).max() < 2 * 1.4 * 1.15 * 1.0001


def test_window_labels_majority():
    y = np.array([0] * 5 + [1] * 3 + [2] * 8)
    assert window_labels(y, 4).tolist() == [0, 1, 2, 2]
    with pytest.raises(ValueError, match="no window"):
        window_labels(y[:3], 4)


def test_shift_boundaries_moves_each_boundary_by_at_most_k():
    y = np.repeat([0, 1, 2, 3, 0, 2], 10)
    for s in range(20):
        z = shift_boundaries(y, 2, rng=rng(s))
        assert z.shape == y.shape and np.array_equal(np.unique(z), np.unique(y))
        bz = np.flatnonzero(z[1:] != z[:-1]) + 1
        by = np.flatnonzero(y[1:] != y[:-1]) + 1
        assert len(bz) == len(by) and np.abs(bz - by).max() <= 2
    assert np.array_equal(shift_boundaries(y, 0, rng=rng(0)), y)
    # large shifts never erase a segment
    z = shift_boundaries(np.repeat([0, 1, 0], [5, 1, 5]), 4, rng=rng(0))
    assert (z == 1).sum() >= 1


def test_boundary_mask_radius():
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    assert boundary_mask(y, 1).tolist() == [0, 0, 0, 1, 1, 0, 0, 0]
    assert boundary_mask(y, 2).tolist() == [0, 0, 1, 1, 1, 1, 0, 0]


def test_make_groups_shapes_noise_and_scramble():
    s = mvd_series(32 * 10 * 12 + 50, rng=rng(0))
    g = make_groups(s, 32, 10, k=2, rng=rng(1))
    assert g.x.shape == (12, 10, 3, 32) and g.y.shape == (12, 10)
    assert np.array_equal(g.clean.ravel(), window_labels(s.labels, 32)[:120])
    assert 0 < (g.y != g.clean).mean() < 0.4
    assert np.allclose(g.x.mean((0, 1, 3)), 0, atol=0.15)     # z-scored with its own statistics
    h = scramble_groups(g, rng=rng(2))
    assert sorted(map(tuple, h.x.reshape(120, -1)[:3])) != sorted(map(tuple, g.x.reshape(120, -1)[:3]))
    # every window keeps its label
    key = {g.x.reshape(120, -1)[i].tobytes(): g.clean.ravel()[i] for i in range(120)}
    assert all(key[h.x.reshape(120, -1)[i].tobytes()] == h.clean.ravel()[i] for i in range(120))
    # context destroyed: scrambled groups change class far more often than consecutive windows
    assert transitions_per_group(h.clean).sum() > 3 * transitions_per_group(g.clean).sum()


def test_scores_and_macro_f1():
    t = np.array([0, 0, 1, 1, 2, 2])
    assert macro_f1(t, t, 3) == 1.0
    p = np.array([0, 1, 1, 1, 2, 0])
    # class 0: tp 1, fp 1, fn 1 -> 0.5; class 1: tp 2 fp 1 -> 0.8; class 2: tp 1 fn 1 -> 2/3
    assert macro_f1(p, t, 3) == pytest.approx((0.5 + 0.8 + 2 / 3) / 3)
    s = mvd_series(32 * 10 * 3, rng=rng(0))
    g = make_groups(s, 32, 10)
    sc = scores(g.clean, g, 4)
    assert sc["acc"] == 100 and sc["f1"] == 100
    with pytest.raises(ValueError, match="do not match"):
        scores(g.clean[:1], g, 4)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="crossfade"):
        mvd_series(1000, crossfade=200, duration_range=(100, 200), rng=rng(0))
    with pytest.raises(TypeError, match="Generator"):
        mvd_series(1000, rng=0)
    with pytest.raises(ValueError, match="integer"):
        shift_boundaries(np.zeros(5), 1, rng=rng(0))
