"""The path from I to a reflection: continuity from the block structure, truncations, the dilemma."""
import math

import numpy as np
import pytest

from reprobook.linalg.reflection_path import (SCHEMES, end_matrix, path_dilemma, path_distance,
                                              truncated_path)


def test_endpoints_and_orthogonality_of_complete_truncations():
    for n in (4, 6):
        np.testing.assert_allclose(truncated_path(0.0, n), np.eye(n), atol=1e-15)
        np.testing.assert_allclose(truncated_path(0.5, n), -np.eye(n), atol=1e-15)
    for n in (3, 5):   # odd n: stage 2 keeps whole pairs
        np.testing.assert_allclose(truncated_path(1.0, n), end_matrix(n), atol=1e-15)
    for t in np.linspace(0, 0.5, 7):      # stage 1, even n: complete pairs, orthogonal
        a = truncated_path(t, 6)
        np.testing.assert_allclose(a @ a.T, np.eye(6), atol=1e-14)
    for t in np.linspace(0.5, 1, 7):      # stage 2, odd n
        a = truncated_path(t, 7)
        np.testing.assert_allclose(a @ a.T, np.eye(7), atol=1e-14)


def test_distance_formula_matches_complete_truncations():
    # within a stage, ||A_t - A_s|| = 2 |sin(pi (t - s))|, seen on truncations that keep whole pairs
    for t, s in ((0.1, 0.13), (0.2, 0.45)):
        d = np.linalg.norm(truncated_path(t, 8) - truncated_path(s, 8), 2)
        assert d == pytest.approx(path_distance(t, s), rel=1e-12)
        assert path_distance(t, s) <= 2 * math.pi * abs(t - s) + 1e-15
    for t, s in ((0.6, 0.62), (0.7, 0.95)):
        d = np.linalg.norm(truncated_path(t, 9) - truncated_path(s, 9), 2)
        assert d == pytest.approx(path_distance(t, s), rel=1e-12)


def test_cut_pair_vanishes_at_a_quarter_turn():
    assert np.linalg.svd(truncated_path(0.25, 5), compute_uv=False)[-1] < 1e-15   # odd n, stage 1
    assert np.linalg.svd(truncated_path(0.75, 4), compute_uv=False)[-1] < 1e-15   # even n, stage 2
    assert np.linalg.svd(truncated_path(0.25, 4), compute_uv=False)[-1] == pytest.approx(1.0)


def test_every_scheme_fails_somehow_on_the_reflection_path_but_not_to_minus_identity():
    ts = np.linspace(0, 1, 201)
    for n in (3, 4):
        res = {name: path_dilemma(s, n, ts) for name, s in SCHEMES.items()}
        assert res["Galerkin"].singular() and not res["Galerkin"].discontinuous()
        assert res["Galerkin + 0.1 I"].singular()
        assert res["polar repair"].discontinuous() and not res["polar repair"].singular()
        assert res["polar repair"].jump >= 2 - 1e-9 and res["polar repair"].jump_width < 1e-12
        assert not any(r.escapes() for r in res.values())
    ok = path_dilemma(SCHEMES["Galerkin"], 4, ts, end="minus-identity")
    assert ok.escapes() and ok.sigma_min == pytest.approx(1.0)


def test_bad_input():
    with pytest.raises(ValueError, match="n must be"):
        truncated_path(0.1, 1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        truncated_path(1.5, 4)
    with pytest.raises(ValueError, match="end must be"):
        truncated_path(0.1, 4, end="rotation")
    with pytest.raises(ValueError, match="increasing grid"):
        path_dilemma(SCHEMES["Galerkin"], 4, [0.0, 0.5])
