import numpy as np
import pytest

from reprobook.data.lookalike_videos import sprite
from reprobook.vision import distractor_tracking as dt
from reprobook.vision.event_sim import simulate_events


def _disc_frame(centers, size=48, radius=4.0, bg=0.2):
    yy, xx = np.mgrid[:size, :size].astype(float)
    img = np.full((size, size), bg)
    for c in centers:
        val, a = sprite(xx - c[0], yy - c[1], radius, 0.9)
        img = (1 - a) * img + a * val
    return img


def test_candidates_find_the_sprites_to_subpixel():
    f = _disc_frame([(12.0, 15.0), (33.4, 30.0)])
    tmpl = _disc_frame([(24.0, 24.0)])[19:30, 19:30]
    c, s = dt.detect_candidates(f, tmpl, k=2)
    c = c[np.argsort(c[:, 0])]
    assert np.allclose(c, [[12, 15], [33.4, 30]], atol=0.3) and (s > 0.8).all()


def test_events_follow_a_curved_path():
    # a disc moving on a quarter circle; the event chain ends where the disc ends, the
    # constant-velocity guess (straight line) does not
    ang = np.linspace(0, np.pi / 2, 13)
    path = np.stack([24 + 10 * np.cos(ang), 24 + 10 * np.sin(ang)], 1)
    ev = simulate_events(np.stack([_disc_frame([p]) for p in path]))
    end = dt.propagate_with_events(path[0], ev, reach=7.0)
    assert np.linalg.norm(end - path[-1]) < 1.0
    assert np.linalg.norm(dt.propagate_with_events(path[0], np.zeros_like(ev)) - path[0]) == 0


def test_metrics_by_hand():
    gt = np.array([[10.0, 10.0], [12.0, 10.0], [14.0, 10.0]])
    assert np.isclose(dt.success_auc(gt, gt, 10), 20 / 21)    # OTB: IoU > 1 never holds
    far = gt + 100
    assert dt.success_auc(far, gt, 10) == 0.0
    # shifted by half a box: IoU = 5*10 / (2*100 - 50) = 1/3 -> success at thresholds 0..0.3 (7 of 21)
    half = gt + [5.0, 0.0]
    assert np.allclose(dt.frame_ious(half, gt, 10), 1 / 3)
    assert np.isclose(dt.success_auc(half, gt, 10), 7 / 21)
    allgt = np.stack([gt, gt + 30], axis=1)           # object 1 far away
    jump = np.array([gt[0], *(gt[1:] + 30)])
    assert dt.identity_switches(jump, allgt, 10, persist=2) == 1
    assert dt.identity_switches(jump, allgt, 10, persist=3) == 0
    assert dt.identity_switches(gt, allgt, 10) == 0


def _crossing_world():
    """Two identical discs cross on an X; candidates from the shared appearance model."""
    T, K = 16, 4
    s = np.linspace(0, 1, (T - 1) * K + 1)
    a = np.stack([8 + 32 * s, 8 + 32 * s], 1)
    b = np.stack([40 - 32 * s, 8 + 32 * s], 1)
    renders = np.stack([_disc_frame([p, q]) for p, q in zip(a, b)])
    ev = simulate_events(renders).reshape(T - 1, K, 2, 48, 48)
    frames = renders[::K]
    tmpl = _disc_frame([(24.0, 24.0)])[19:30, 19:30]
    cands = [dt.detect_candidates(f, tmpl, k=3) for f in frames]
    return frames, ev, cands, tmpl, np.stack([a[::K], b[::K]], 1)


def test_trackers_keep_the_target_through_a_straight_crossing():
    frames, ev, cands, tmpl, gt = _crossing_world()
    init = gt[0, 0]
    for motion in dt.MOTIONS[:2]:
        out = dt.track_distractor_aware(cands, frames, ev, init, tmpl, motion=motion)
        assert dt.identity_switches(out, gt, 9) == 0 and dt.success_auc(out, gt[:, 0], 9) > 0.6
    out = dt.track_kalman_hungarian(cands, init, 9)
    assert dt.identity_switches(out, gt, 9) == 0
    assert dt.track_greedy(cands, init).shape == (16, 2)


def test_bad_input_is_named():
    frames, ev, cands, tmpl, gt = _crossing_world()
    with pytest.raises(ValueError, match="unknown motion"):
        dt.track_distractor_aware(cands, frames, ev, gt[0, 0], tmpl, motion="optical-flow")
    with pytest.raises(ValueError, match="events must be"):
        dt.track_distractor_aware(cands, frames, ev[:3], gt[0, 0], tmpl)
    with pytest.raises(ValueError, match="odd"):
        dt.detect_candidates(frames[0], tmpl[:10, :10])
    with pytest.raises(ValueError, match=r"\[T, 2\]"):
        dt.success_auc(gt[:, 0], gt, 9)
