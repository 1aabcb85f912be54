"""Tests of the synthetic fMRI generator: shapes, SNR, warps and ground truth."""
import numpy as np
import pytest

from reprobook.data.synthetic_fmri import (FMRIConfig, make_cohort, simulate_trials,
                                           stimulus_features, template_areas)


def _stimuli(n=120, seed=0):
    rng = np.random.default_rng(seed)
    pixels = rng.uniform(0, 16, (n, 64))
    labels = np.arange(n) % 10
    return stimulus_features(pixels, labels)


def test_features_shapes_and_standardised():
    f = _stimuli()
    assert f.low.shape == (120, 16) and f.high.shape == (120, 20) and f.all.shape == (120, 36)
    np.testing.assert_allclose(f.all.mean(0), 0, atol=1e-10)
    np.testing.assert_allclose(f.all.std(0), 1, atol=1e-10)
    # the first 10 high-level columns are the (standardised) one-hot class
    assert np.all(np.argmax(f.high[:, :10], axis=1) == f.labels)


def test_low_level_is_the_4x4_downsample():
    pixels = np.zeros((12, 64))
    pixels[:, 0] = np.arange(12)          # top-left pixel only -> top-left cell only
    f = stimulus_features(pixels + np.arange(64) * 1e-3 * np.arange(12)[:, None], np.arange(12) % 10)
    corr = [abs(np.corrcoef(f.low[:, c], np.arange(12))[0, 1]) for c in range(16)]
    assert np.argmax(corr) == 0


def test_areas_are_disjoint_and_inside_the_brain():
    mask, areas = template_areas(12)
    total = sum(a.astype(int) for a in areas.values())
    assert total.max() == 1 and np.all(mask[total > 0])
    assert all(a.sum() > 20 for a in areas.values())


def test_snr_is_the_configured_one_and_noise_is_unit():
    f = _stimuli(400)
    cfg = FMRIConfig(grid=8, snr=0.5)
    (s,) = make_cohort(cfg, f, 1, np.random.default_rng(1))
    sig = s.signal(f.all)
    visual = (s.areas["low"] | s.areas["mixed"] | s.areas["high"]).reshape(-1)
    assert sig[:, visual].var(0).mean() == pytest.approx(0.5, rel=1e-6)
    assert np.all(sig[:, ~s.mask.reshape(-1)] == 0)
    x = simulate_trials(s, f.all, np.random.default_rng(2))
    resid = x.reshape(len(x), -1)[:, s.mask.reshape(-1)] - sig[:, s.mask.reshape(-1)]
    assert resid.std() == pytest.approx(1.0, rel=0.02)


def test_subjects_differ_by_anatomy_and_identity_warp_gives_the_template():
    f = _stimuli()
    cfg0 = FMRIConfig(grid=8, rot_deg=0, scale=0, shift=0, tuning_jitter=0)
    a, b = make_cohort(cfg0, f, 2, np.random.default_rng(3))
    np.testing.assert_allclose(a.affine, np.eye(4), atol=1e-12)
    np.testing.assert_allclose(a.weights, b.weights, atol=1e-12)     # same template, no jitter
    assert all(np.array_equal(a.areas[k], b.areas[k]) for k in a.areas)
    c, d = make_cohort(FMRIConfig(grid=8), f, 2, np.random.default_rng(3))
    assert not np.allclose(c.affine, d.affine)
    assert not np.allclose(c.weights, d.weights)


def test_signal_depends_on_the_right_features_in_each_area():
    f = _stimuli()
    (s,) = make_cohort(FMRIConfig(grid=10, rot_deg=0, scale=0, shift=0), f, 1, np.random.default_rng(4))
    W = s.weights.reshape(10, 10, 10, -1)
    low_only = s.areas["low"] & ~s.areas["mixed"]
    assert np.abs(W[low_only][:, 16:]).max() == 0          # low area: no high-level tuning
    assert np.abs(W[s.areas["high"]][:, :16]).max() == 0   # high area: no pixel tuning
    assert np.abs(W[s.areas["high"]][:, 16:]).max() > 0


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="grid"):
        FMRIConfig(grid=3)
    with pytest.raises(ValueError, match="tuning_jitter"):
        FMRIConfig(tuning_jitter=2.0)
    with pytest.raises(ValueError, match="pixels"):
        stimulus_features(np.zeros((5, 10)), np.zeros(5, int))
    with pytest.raises(ValueError, match="n_subjects"):
        make_cohort(FMRIConfig(grid=8), _stimuli(), 0, np.random.default_rng(0))


def test_captions_split_each_class_at_its_median_ink():
    from reprobook.data.synthetic_fmri import digit_captions
    pixels = np.repeat(np.arange(4.0)[:, None], 64, axis=1)
    pixels = np.concatenate([pixels, pixels])
    labels = np.array([7, 7, 7, 7, 2, 2, 2, 2])
    caps, idx = digit_captions(pixels, labels)
    assert len(caps) == 20 and caps[15] == "a handwritten seven with thick strokes"
    assert list(idx) == [14, 14, 15, 15, 4, 4, 5, 5]
    with pytest.raises(ValueError, match="digits"):
        digit_captions(pixels, labels + 5)
