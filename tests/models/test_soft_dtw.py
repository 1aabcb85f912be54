import itertools

import numpy as np
import pytest
import torch

from reprobook.models.soft_dtw import cosine_cost, dtw, dtw_reference, soft_dtw


def _paths(T, M):
    """Every monotone alignment path from (0, 0) to (T-1, M-1), by brute-force enumeration."""
    def rec(i, j):
        if (i, j) == (T - 1, M - 1):
            yield [(i, j)]
            return
        for di, dj in ((1, 0), (1, 1), (0, 1)):
            a, b = i + di, j + dj
            if a < T and b < M:
                for p in rec(a, b):
                    yield [(i, j)] + p
    return list(rec(0, 0))


def test_hard_dtw_is_cheapest_path_by_enumeration():
    g = torch.Generator().manual_seed(0)
    D = torch.rand(3, 5, 4, generator=g, dtype=torch.float64)
    got = dtw(D)
    for b in range(3):
        best = min(sum(float(D[b, i, j]) for i, j in p) for p in _paths(5, 4))
        assert got[b].item() == pytest.approx(best, abs=1e-12)


def test_soft_dtw_is_logsumexp_over_all_paths():
    # soft-DTW = -gamma log sum_paths exp(-cost/gamma): check against the enumeration
    g = torch.Generator().manual_seed(1)
    D = torch.rand(1, 4, 3, generator=g, dtype=torch.float64)
    gamma = 0.3
    costs = torch.tensor([sum(float(D[0, i, j]) for i, j in p) for p in _paths(4, 3)],
                         dtype=torch.float64)
    want = -gamma * torch.logsumexp(-costs / gamma, 0)
    assert soft_dtw(D, gamma).item() == pytest.approx(want.item(), abs=1e-10)


@pytest.mark.parametrize("gamma", [0.0, 0.05, 1.0])
def test_batched_matches_cell_by_cell_dp_with_lengths(gamma):
    g = torch.Generator().manual_seed(2)
    D = torch.rand(5, 11, 6, generator=g, dtype=torch.float64)
    lx, ly = [11, 4, 7, 1, 9], [6, 2, 5, 3, 1]
    got = soft_dtw(D, gamma, lx, ly)
    for b in range(5):
        assert got[b].item() == pytest.approx(dtw_reference(D[b, :lx[b], :ly[b]], gamma), abs=1e-9)


def test_soft_dtw_tends_to_dtw_as_gamma_to_zero():
    g = torch.Generator().manual_seed(3)
    D = torch.rand(4, 20, 6, generator=g, dtype=torch.float64)
    hard = dtw(D)
    gaps = [float((hard - soft_dtw(D, gm)).abs().max()) for gm in (1.0, 0.1, 0.01, 1e-4)]
    assert all(a > b for a, b in zip(gaps, gaps[1:]))       # monotone approach
    assert gaps[-1] < 1e-3                                  # the notes' smoke assert
    # the lower bound DTW - gamma log(#paths) <= soft-DTW <= DTW
    assert (soft_dtw(D, 0.1) <= hard + 1e-12).all()


def test_gradient_is_finite_and_matches_finite_differences():
    g = torch.Generator().manual_seed(4)
    D = torch.rand(2, 6, 3, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: soft_dtw(x, 0.2, [6, 4], [3, 2]), (D,))
    # gradient of soft-DTW wrt D is an expected alignment: nonnegative, mass >= path length
    D2 = D.detach().clone().requires_grad_(True)
    soft_dtw(D2, 0.2).sum().backward()
    G = D2.grad
    assert (G >= -1e-12).all() and (G.sum((1, 2)) >= 6 - 1e-9).all()
    assert torch.isfinite(G).all()


def test_aligned_pair_beats_its_reverse():
    # a video whose clips follow the step order exactly: DTW(V, T) < DTW(flip(V), T)
    g = torch.Generator().manual_seed(5)
    Tx = torch.nn.functional.normalize(torch.randn(1, 5, 16, generator=g), dim=-1)
    V = Tx.repeat_interleave(4, dim=1) + 0.05 * torch.randn(1, 20, 16, generator=g)
    fwd = dtw(cosine_cost(V, Tx))
    rev = dtw(cosine_cost(V.flip(1), Tx))
    assert fwd.item() < rev.item()


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="B, T, M"):
        soft_dtw(torch.rand(3, 4))
    with pytest.raises(ValueError, match="gamma"):
        soft_dtw(torch.rand(1, 3, 4), -1.0)
    with pytest.raises(ValueError, match="len_x"):
        soft_dtw(torch.rand(2, 3, 4), 0.1, [3, 5])
    with pytest.raises(ValueError, match="Tx"):
        cosine_cost(torch.rand(1, 3, 4), torch.rand(1, 3, 5))
