import math

import pytest
import torch

from reprobook.bench.flops import count_flops
from reprobook.models.softs import SOFTS, STAR, ci_mlp


def _star(pool="stochastic", d=8, dc=4):
    torch.manual_seed(0)
    return STAR(d, dc, pool).double()


def test_eval_core_is_softmax_weighted_average():
    s = _star()
    s.eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    cand = s.candidates(x)
    w = torch.softmax(cand, 1)
    expected = (w * cand).sum(1, keepdim=True).expand_as(cand)
    torch.testing.assert_close(s.core(cand), expected)


def test_single_channel_core_is_its_own_candidate():
    """With C = 1 the weighted average over one channel is that channel's candidate."""
    for training in (False, True):
        s = _star()
        s.train(training)
        x = torch.randn(3, 1, 8, dtype=torch.float64)
        cand = s.candidates(x)
        torch.testing.assert_close(s.core(cand), cand, atol=1e-12, rtol=0)


def test_stochastic_pooling_frequencies_match_softmax():
    """Training-mode pooling takes exactly one channel's value per core dimension, with channel
    frequencies equal to softmax over channels (within 4 sigma over 10^4 draws)."""
    s = _star()
    s.train()
    torch.manual_seed(1)
    cand = torch.randn(1, 4, 3, dtype=torch.float64)
    p = torch.softmax(cand, 1)[0]                               # [C, dc]
    n = 10_000
    core = s.core(cand.expand(n, 4, 3).contiguous())[:, 0]       # [n, dc]
    hits = (core[:, None, :] == cand[0][None]).double()          # [n, C, dc]
    assert torch.all(hits.sum(1) == 1)                           # one channel per dimension
    freq = hits.mean(0)
    sigma = torch.sqrt(p * (1 - p) / n)
    assert torch.all((freq - p).abs() <= 4 * sigma)


@pytest.mark.parametrize("pool", ["stochastic", "mean", "self"])
def test_permutation_equivariance(pool):
    torch.manual_seed(0)
    m = SOFTS(24, 6, d_model=16, d_core=8, d_ff=16, pool=pool).double().eval()
    x = torch.randn(2, 24, 7, dtype=torch.float64)
    perm = torch.randperm(7)
    torch.testing.assert_close(m(x[..., perm]), m(x)[..., perm], atol=1e-12, rtol=0)


def test_first_pool_breaks_equivariance():
    torch.manual_seed(0)
    m = SOFTS(24, 6, d_model=16, d_core=8, d_ff=16, pool="first").double().eval()
    x = torch.randn(2, 24, 7, dtype=torch.float64)
    perm = torch.arange(7).roll(1)
    assert (m(x[..., perm]) - m(x)[..., perm]).abs().max() > 1e-6


def test_self_pool_has_no_cross_channel_path_and_ci_neither():
    for m in (SOFTS(24, 6, d_model=16, d_core=8, d_ff=16, pool="self", revin=False),
              ci_mlp(24, 6, d_model=16, d_ff=16, revin=False)):
        m.eval()
        x = torch.randn(1, 24, 5)
        x2 = x.clone()
        x2[..., 1:] += torch.randn(1, 24, 4)
        torch.testing.assert_close(m(x)[..., 0], m(x2)[..., 0])
    m = SOFTS(24, 6, d_model=16, d_core=8, d_ff=16, revin=False).eval()
    assert (m(x)[..., 0] - m(x2)[..., 0]).abs().max() > 1e-6


def test_flops_linear_in_channels():
    m = SOFTS(24, 6, d_model=16, d_core=8, d_ff=16).eval()
    f = [count_flops(m, torch.randn(1, 24, c)) for c in (16, 64)]
    assert f[1] == 4 * f[0]
    L, H, d, dc, dff = 24, 6, 16, 8, 16
    per_channel = 2 * (L * d + 2 * (d * d + d * dc + (d + dc) * d + d * d + 2 * d * dff) + d * H)
    assert f[0] == 16 * per_channel


def test_loss_decreases_and_shapes():
    torch.manual_seed(0)
    m = SOFTS(24, 6, d_model=8, d_core=4, d_ff=8, n_blocks=1, dropout=0.0)
    t = torch.arange(30.0)
    x = torch.sin(t[:24, None] / 3 + torch.arange(4.0)).expand(8, 24, 4) + 0.1 * torch.randn(8, 24, 4)
    y = torch.sin(t[24:, None] / 3 + torch.arange(4.0)).expand(8, 6, 4)
    opt = torch.optim.Adam(m.parameters(), lr=2e-2)
    losses = []
    for _ in range(15):
        loss = torch.nn.functional.mse_loss(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert m(x).shape == (8, 6, 4)


def test_errors():
    with pytest.raises(ValueError, match="unknown pool"):
        SOFTS(24, 6, pool="max")
    with pytest.raises(ValueError, match="expected input"):
        SOFTS(24, 6, d_model=8, d_core=4, d_ff=8)(torch.randn(1, 20, 3))
    with pytest.raises(ValueError, match="STAR expects"):
        STAR(8, 4)(torch.randn(3, 8))
