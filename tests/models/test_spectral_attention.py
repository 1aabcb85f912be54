import copy

import pytest
import torch

from reprobook.models.itransformer import itransformer
from reprobook.models.softs import SOFTS
from reprobook.models.spectral_attention import (SpectralAttention, SpectralForecaster, decay_matrix,
                                                 ema_batched, ema_sequential)

ALPHAS = torch.tensor([0.5, 0.9, 0.999], dtype=torch.float64)


def test_decay_matrix_entries():
    lam, carry = decay_matrix(ALPHAS, 4)
    a = ALPHAS[1]
    assert lam.shape == (3, 4, 4) and carry.shape == (3, 4)
    assert torch.isclose(lam[1, 3, 1], (1 - a) * a ** 2)
    assert lam[1, 1, 3] == 0                                    # strictly upper triangle is zero
    assert torch.isclose(carry[1, 2], a ** 3)
    # each row of [Lam | carry] sums to 1: an EMA is a convex combination
    torch.testing.assert_close(lam.sum(-1) + carry, torch.ones(3, 4, dtype=torch.float64))


def test_batched_equals_recursion_over_consecutive_batches():
    """The notes' P1: three consecutive batches, state carried, float64, to 1e-10."""
    g = torch.Generator().manual_seed(0)
    F = torch.randn(3 * 8, 5, 6, generator=g, dtype=torch.float64)
    ref, _ = ema_sequential(F, ALPHAS)
    state, outs = None, []
    for b in range(3):
        M, state = ema_batched(F[8 * b:8 * b + 8], ALPHAS, state if b else None)
        outs.append(M)
    assert (torch.cat(outs) - ref).abs().max() < 1e-10
    # without the carried state the second batch differs
    M2, _ = ema_batched(F[8:16], ALPHAS, None)
    assert (M2 - ref[8:16]).abs().max() > 1e-3


def test_identity_at_initialisation():
    """The notes' P2: with its symmetric initial logits SA returns its input exactly."""
    sa = SpectralAttention((4, 6)).double()
    x = torch.randn(10, 4, 6, dtype=torch.float64)
    assert (sa(x) - x).abs().max() < 1e-12
    base = itransformer(24, 6, d_model=16, d_ff=16, n_blocks=1).double().eval()
    for place in ("input", "encoded"):
        m = SpectralForecaster(copy.deepcopy(base), 3, place=place).double().eval()
        x = torch.randn(12, 24, 3, dtype=torch.float64)
        assert (m(x) - base(x)).abs().max() < 1e-10


def test_moved_weights_change_output_and_mass_sums_to_one():
    sa = SpectralAttention((2, 3), alphas=(0.9, 0.99)).double()
    with torch.no_grad():
        sa.logits[-1] += 3.0                                    # towards the slowest low-pass
    x = torch.randn(6, 2, 3, dtype=torch.float64) + torch.arange(6.0, dtype=torch.float64)[:, None, None]
    assert (sa(x) - x).abs().max() > 1e-2
    m = sa.mass()
    total = m["identity"] + m["low"].sum() + m["high"].sum()
    assert torch.isclose(total, torch.tensor(1.0, dtype=total.dtype))
    assert m["low"][-1] > m["high"][-1]


def test_gradient_flows_between_windows_of_a_batch_only_with_bptt():
    for bptt, expect in ((True, True), (False, False)):
        sa = SpectralAttention((1, 2), alphas=(0.9,), bptt=bptt).double()
        with torch.no_grad():
            sa.logits[-1] += 2.0
        F = torch.randn(5, 1, 2, dtype=torch.float64, requires_grad=True)
        sa(F)[-1].sum().backward()                              # loss of the last window only
        assert (F.grad[:-1].abs().sum() > 0) == expect


def test_state_carries_unless_disabled():
    x = torch.randn(8, 1, 2, dtype=torch.float64)
    for carry in (True, False):
        sa = SpectralAttention((1, 2), alphas=(0.9,), carry=carry).double()
        with torch.no_grad():
            sa.logits[-1] += 2.0
        whole = sa(x)
        sa.reset()
        halves = torch.cat([sa(x[:4]), sa(x[4:])])
        assert torch.allclose(whole, halves) == carry


def test_softs_base_and_learnable_alpha_gets_gradient():
    base = SOFTS(16, 4, d_model=8, d_core=4, d_ff=8, n_blocks=1)
    m = SpectralForecaster(base, 2, place="encoded")
    with torch.no_grad():
        m.sa.logits[-1] += 1.0
    m(torch.randn(6, 16, 2)).square().mean().backward()
    assert m.sa.alpha_logit.grad is not None and m.sa.alpha_logit.grad.abs().sum() > 0


def test_bad_input_errors():
    with pytest.raises(ValueError, match="smoothing rates"):
        SpectralAttention((2,), alphas=(0.5, 1.0))
    with pytest.raises(ValueError, match="expects"):
        SpectralAttention((2, 3))(torch.randn(4, 3, 2))
    with pytest.raises(ValueError, match="unknown place"):
        SpectralForecaster(itransformer(8, 2, d_model=8, d_ff=8), 2, place="middle")
    with pytest.raises(TypeError, match="InvertedForecaster"):
        SpectralForecaster(torch.nn.Linear(3, 3), 2)
    with pytest.raises(ValueError, match="state"):
        ema_batched(torch.randn(4, 3), (0.9,), torch.zeros(2, 3))
