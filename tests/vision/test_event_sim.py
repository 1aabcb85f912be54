import numpy as np
import pytest

from reprobook.vision.event_sim import event_frame_to_signed, simulate_events


def test_static_scene_fires_nothing():
    f = np.full((5, 8, 8), 0.4)
    f[:, 2:5, 3:6] = 0.9
    assert simulate_events(f).sum() == 0


def test_one_pixel_matches_hand_computation():
    # log(I + eps) with eps = 0.01; C = 0.15.  Hand-computed reference walk:
    # I: 0.09 -> 0.19 (dlog = log(0.2/0.1) = 0.693 -> 4 positive, ref += 0.6)
    #    0.19 -> 0.19 (d = 0.093 left over -> 0 events)
    #    0.19 -> 0.09 (d = 0.093 - 0.693 = -0.600 -> 4 negative (floor(0.600/0.15)=4), ref -= 0.6)
    #    0.09 -> 0.09 (d = 0 -> 0)
    I = np.array([0.09, 0.19, 0.19, 0.09, 0.09]).reshape(5, 1, 1)
    ev = simulate_events(I, threshold=0.15, eps=0.01)
    assert ev[:, 0, 0, 0].tolist() == [4, 0, 0, 0]
    assert ev[:, 1, 0, 0].tolist() == [0, 0, 4, 0]


def test_small_changes_accumulate_before_firing():
    # each step multiplies (I + eps) by exp(0.06): no event until the third step (0.18 >= 0.15)
    L = np.log(0.5) + 0.06 * np.arange(5)
    I = (np.exp(L) - 0.01).reshape(5, 1, 1)
    ev = simulate_events(I)
    assert ev[:, 0, 0, 0].tolist() == [0, 0, 1, 0]     # 0.18 fires once, ref at 0.15; 0.24 -> 0.09 left
    assert ev[:, 1].sum() == 0


def test_translating_square_fires_only_on_its_moving_edges_with_right_polarity():
    bg, fg = 0.2, 0.8
    a = np.full((12, 12), bg)
    a[4:8, 3:7] = fg
    b = np.full((12, 12), bg)
    b[4:8, 4:8] = fg                   # moved one pixel right
    ev = simulate_events(np.stack([a, b]))[0]
    n = int(np.floor(np.log((fg + 0.01) / (bg + 0.01)) / 0.15 + 1e-9))
    pos = np.zeros((12, 12), int)
    pos[4:8, 7] = n                    # leading edge brightens
    neg = np.zeros((12, 12), int)
    neg[4:8, 3] = n                    # trailing edge darkens
    assert np.array_equal(ev[0], pos) and np.array_equal(ev[1], neg)
    assert np.array_equal(event_frame_to_signed(ev), pos - neg)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="shape"):
        simulate_events(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="at least 2"):
        simulate_events(np.zeros((1, 4, 4)))
    with pytest.raises(ValueError, match="threshold"):
        simulate_events(np.zeros((2, 4, 4)), threshold=0)
    with pytest.raises(ValueError, match="non-negative"):
        simulate_events(-np.ones((2, 4, 4)))
