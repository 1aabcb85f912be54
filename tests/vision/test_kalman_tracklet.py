import numpy as np
import pytest

from reprobook.vision.kalman_tracklet import KalmanTracklet


def test_one_step_matches_hand_computation():
    tr = KalmanTracklet([0.0, 0.0], q=1.0, r=1.0, p0_velocity=10.0)
    assert np.allclose(tr.predict(), [0, 0])
    # P after predict, per axis: [[1 + 10 + 1/4, 10 + 1/2], [10 + 1/2, 10 + 1]] = [[11.25, 10.5], [10.5, 11]]
    assert np.allclose(tr.P[0, [0, 2]], [11.25, 10.5])
    tr.update([2.0, -4.0])
    k_pos, k_vel = 11.25 / 12.25, 10.5 / 12.25
    assert np.allclose(tr.center, [2 * k_pos, -4 * k_pos])
    assert np.allclose(tr.velocity, [2 * k_vel, -4 * k_vel])
    assert tr.misses == 0 and tr.age == 1


def test_constant_velocity_is_learned():
    tr = KalmanTracklet([5.0, 5.0])
    for t in range(1, 30):
        tr.predict()
        tr.update([5.0 + 2 * t, 5.0 - t])
    assert np.allclose(tr.velocity, [2, -1], atol=1e-2)
    assert np.allclose(tr.predict(), [5 + 60, 5 - 30], atol=5e-2)


def test_move_to_keeps_velocity_and_bad_input():
    tr = KalmanTracklet([0.0, 0.0], velocity=(1.0, 2.0))
    tr.move_to([3.0, 4.0])
    assert np.allclose(tr.center, [3, 4]) and np.allclose(tr.velocity, [1, 2])
    with pytest.raises(ValueError, match="center"):
        KalmanTracklet([1.0])
    with pytest.raises(ValueError, match="positive"):
        KalmanTracklet([0, 0], q=0)
    with pytest.raises(ValueError, match="measurement"):
        tr.update([1, 2, 3])
