import itertools
import math

import numpy as np
import pytest
import torch

from reprobook.timeseries.signatures import (evaluate_path, multiview_signatures, observed_path,
                                             path_signature, signature_combine, signature_length)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def brute_signature(points: np.ndarray, depth: int) -> np.ndarray:
    """Iterated integrals of a piecewise-linear path by enumeration, written without Chen's recursion:
    level k, word (j_1..j_k) = sum over non-decreasing segment tuples i_1 <= ... <= i_k of
    prod_m D[i_m, j_m] / prod(multiplicity of each segment)! -- the integral over the simplex
    splits into the segments the ordered times fall in, and r equal segments give 1/r!."""
    D = np.diff(points, axis=0)
    n, d = D.shape
    out = []
    for k in range(1, depth + 1):
        level = np.zeros([d] * k)
        for segs in itertools.combinations_with_replacement(range(n), k):
            weight = 1.0 / np.prod([math.factorial(segs.count(s)) for s in set(segs)])
            term = D[segs[0]]
            for s in segs[1:]:
                term = np.multiply.outer(term, D[s])
            level += weight * term
        out.append(level.ravel())
    return np.concatenate(out)


@pytest.mark.parametrize("d,depth,n", [(2, 3, 6), (3, 3, 5), (2, 4, 4)])
def test_signature_matches_brute_force(d, depth, n):
    pts = np.random.default_rng(d * 10 + n).standard_normal((n, d))
    got = path_signature(torch.from_numpy(pts), depth).numpy()
    assert got.shape == (signature_length(d, depth),)
    np.testing.assert_allclose(got, brute_signature(pts, depth), atol=1e-10, rtol=0)


def test_levy_area_is_shoelace():
    rng = np.random.default_rng(1)
    pts = rng.standard_normal((9, 2))
    s = path_signature(torch.from_numpy(pts), 2).numpy()
    level2 = s[2:].reshape(2, 2)
    levy = 0.5 * (level2[0, 1] - level2[1, 0])
    # signed area enclosed by the path closed with the chord back to its start (shoelace)
    q = pts - pts[0]
    shoelace = 0.5 * np.sum(q[:-1, 0] * q[1:, 1] - q[1:, 0] * q[:-1, 1])
    assert abs(levy - shoelace) < 1e-12
    # the symmetric part is fixed by the increment (shuffle identity)
    inc = pts[-1] - pts[0]
    np.testing.assert_allclose(0.5 * (level2 + level2.T), np.outer(inc, inc) / 2, atol=1e-12)


def test_chen_combine_matches_concatenation_and_brute_force():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 5, 3))
    b = rng.standard_normal((3, 4, 3))
    b[:, 0] = a[:, -1]
    sa, sb = path_signature(a, 3), path_signature(b, 3)
    joined = np.concatenate([a, b[:, 1:]], axis=1)
    got = signature_combine(sa, sb, 3, 3)
    np.testing.assert_allclose(got.numpy(), path_signature(joined, 3).numpy(), atol=1e-12)
    np.testing.assert_allclose(got[0].numpy(), brute_signature(joined[0], 3), atol=1e-10)
    with pytest.raises(ValueError, match="do not match"):
        signature_combine(sa, sb[..., :-1], 3, 3)


def _sample(seed, B=3, L=40, C=1):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 1, (B, L)), axis=1)
    v = np.cumsum(rng.standard_normal((B, L, C)), axis=1) / np.sqrt(L)
    return t, v, rng


def test_refinement_invariance_and_masking():
    """Points on the linear interpolant change no token; a dropped point is the same as one never
    observed."""
    t, v, rng = _sample(3)
    base = multiview_signatures(t, v, 8, 3)
    # insert 25 extra points per series on the interpolant
    extra = np.sort(rng.uniform(t[:, :1], t[:, -1:], (3, 25)), axis=1)
    ev = evaluate_path(t, v, np.zeros(1))  # shape check only
    assert ev.shape == (3, 1, 2)
    tv = np.stack([np.interp(extra[b], t[b], v[b, :, 0]) for b in range(3)])[..., None]
    t2 = np.concatenate([t, extra], 1)
    v2 = np.concatenate([v, tv], 1)
    order = np.argsort(t2, axis=1, kind="stable")
    t2 = np.take_along_axis(t2, order, 1)
    v2 = np.take_along_axis(v2, order[..., None], 1)
    assert (multiview_signatures(t2, v2, 8, 3) - base).abs().max() < 1e-10
    # masking the inserted points gives the same tokens again
    keep = np.take_along_axis(np.concatenate([np.ones_like(t, bool), np.zeros_like(extra, bool)], 1), order, 1)
    wild = v2.copy()
    wild[~keep] = 99.0   # values of dropped points must not matter
    assert (multiview_signatures(t2, wild, 8, 3, mask=keep) - base).abs().max() < 1e-10


def test_global_tokens_are_prefix_signatures_and_views_split():
    t, v, _ = _sample(4, B=2, L=30, C=2)
    z = multiview_signatures(t, v, 5, 3)
    F = signature_length(3, 3)
    assert z.shape == (2, 5, 2 * F)
    glob, loc = z[..., :F], z[..., F:]
    assert torch.equal(multiview_signatures(t, v, 5, 3, view="local"), loc)
    assert (multiview_signatures(t, v, 5, 3, view="global") - glob).abs().max() < 1e-12
    for b in range(2):
        for k, u in enumerate([0.2, 0.4, 0.6, 0.8, 1.0]):
            grid = np.concatenate([[0.0], t[b][t[b] < u], [u]])
            pts = evaluate_path(t[b:b + 1], v[b:b + 1], grid)[0].numpy()
            np.testing.assert_allclose(glob[b, k].numpy(), brute_signature(pts, 3), atol=1e-10)
    # Chen consistency: the last global token is the product of all local ones
    acc = loc[:, 0]
    for k in range(1, 5):
        acc = signature_combine(acc, loc[:, k], 3, 3)
    assert (acc - glob[:, -1]).abs().max() < 1e-10


def test_index_windows_depend_on_the_sampling_and_time_windows_do_not():
    t, v, rng = _sample(5, B=2, L=60)
    keep = np.ones_like(t, bool)
    keep[:, :30] = rng.uniform(size=(2, 30)) < 0.3      # drop most points of the first half
    # resample the same path: the values at kept points lie on the full interpolant
    z_full = multiview_signatures(t, v, 6, 2, windows="index")
    z_drop = multiview_signatures(t, v, 6, 2, windows="index", mask=keep)
    assert (z_full - z_drop).abs().max() > 1e-3
    assert multiview_signatures(t, v, 6, 2, windows="index").shape == (2, 6, 2 * signature_length(2, 2))


def test_observed_path_pads_with_zero_increments():
    t = np.array([[0.1, 0.2, 0.3, 0.4]])
    v = np.array([[1.0, 2.0, 3.0, 4.0]])
    m = np.array([[True, False, True, False]])
    p, n = observed_path(t, v, m)
    assert n.tolist() == [2]
    np.testing.assert_allclose(p[0].numpy(), [[0.1, 1.0], [0.3, 3.0]])
    p2, _ = observed_path(np.vstack([t, t]), np.vstack([v, v]), np.vstack([m, np.ones(4, bool)]))
    np.testing.assert_allclose(p2[0, 2:].numpy(), [[0.3, 3.0], [0.3, 3.0]])   # repeats of the last point


def test_bad_inputs():
    t, v, _ = _sample(6, B=2, L=10)
    with pytest.raises(ValueError, match="unknown view"):
        multiview_signatures(t, v, 4, 2, view="both")
    with pytest.raises(ValueError, match="unknown windows"):
        multiview_signatures(t, v, 4, 2, windows="count")
    with pytest.raises(ValueError, match="n_windows"):
        multiview_signatures(t, v, 0, 2)
    with pytest.raises(ValueError, match="sorted"):
        multiview_signatures(t[:, ::-1], v, 4, 2)
    with pytest.raises(ValueError, match="span"):
        multiview_signatures(t + 1.0, v, 4, 2)
    with pytest.raises(ValueError, match="values must be"):
        multiview_signatures(t, v[:, :5], 4, 2)
    with pytest.raises(ValueError, match="at least one observed"):
        multiview_signatures(t, v, 4, 2, mask=np.zeros_like(t, bool))
    with pytest.raises(ValueError, match="depth"):
        path_signature(np.zeros((3, 2)), 0)
