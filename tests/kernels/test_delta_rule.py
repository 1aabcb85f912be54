"""The delta rule: chunkwise torch form and Triton kernels against the recurrence (ground truth)."""
import warnings

import pytest
import torch

from reprobook.kernels import delta_rule as dr
from reprobook.kernels.delta_rule import (chunk_delta_rule, fused_recurrent_delta_rule, l2norm,
                                          wy_representation)


def make_inputs(B, T, H, K, V, dtype=torch.float64, seed=0, h0=True):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, H, K, generator=g, dtype=dtype)
    k = l2norm(torch.randn(B, T, H, K, generator=g, dtype=dtype))
    v = torch.randn(B, T, H, V, generator=g, dtype=dtype)
    beta = torch.rand(B, T, H, generator=g, dtype=dtype).sigmoid()
    s0 = torch.randn(B, H, K, V, generator=g, dtype=dtype) if h0 else None
    return q, k, v, beta, s0


def rel_err(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


# ------------------------------------------------------------------------------- torch chunkwise
@pytest.mark.parametrize("T,C", [(64, 16), (100, 32), (1, 64), (37, 8), (130, 64), (5, 1)])
@pytest.mark.parametrize("K,V", [(16, 16), (20, 12)])
def test_chunk_forward_matches_recurrence_float64(T, C, K, V):
    q, k, v, beta, s0 = make_inputs(2, T, 1, K, V)
    o_r, s_r = fused_recurrent_delta_rule(q, k, v, beta, initial_state=s0, output_final_state=True)
    o_c, s_c = chunk_delta_rule(q, k, v, beta, initial_state=s0, output_final_state=True, chunk_size=C)
    assert rel_err(o_c, o_r) <= 1e-10
    assert rel_err(s_c, s_r) <= 1e-10
    assert o_c.dtype == torch.float64 and s_c.dtype == torch.float64


def test_chunk_forward_float32_and_float16():
    q, k, v, beta, s0 = make_inputs(1, 70, 2, 24, 24)
    o_ref, s_ref = fused_recurrent_delta_rule(q, k, v, beta, initial_state=s0, output_final_state=True)
    args32 = [x.float() for x in (q, k, v, beta)]
    o32, s32 = chunk_delta_rule(*args32, initial_state=s0.float(), output_final_state=True, chunk_size=32)
    assert o32.dtype == torch.float32 and s32.dtype == torch.float32
    assert rel_err(o32.double(), o_ref) <= 1e-4 and rel_err(s32.double(), s_ref) <= 1e-4
    args16 = [x.half() for x in (q, k, v, beta)]
    o16, s16 = chunk_delta_rule(*args16, initial_state=s0, output_final_state=True, chunk_size=32)
    assert o16.dtype == torch.float16 and s16.dtype == torch.float32  # state accumulates in fp32
    assert rel_err(o16.double(), o_ref) <= 1e-2


@pytest.mark.parametrize("T,C", [(50, 16), (33, 64)])
def test_chunk_gradients_match_recurrence(T, C):
    q, k, v, beta, s0 = make_inputs(2, T, 2, 12, 10)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, beta, s0)]
    g = torch.Generator().manual_seed(1)
    do = torch.randn(2, T, 2, 10, generator=g, dtype=torch.float64)
    dht = torch.randn(2, 2, 12, 10, generator=g, dtype=torch.float64)
    grads = []
    for fn in (lambda *a, **kw: fused_recurrent_delta_rule(*a, **kw),
               lambda *a, **kw: chunk_delta_rule(*a, chunk_size=C, **kw)):
        o, ht = fn(*leaves[:4], initial_state=leaves[4], output_final_state=True)
        grads.append(torch.autograd.grad((o * do).sum() + (ht * dht).sum(), leaves))
    for name, a, b in zip(("dq", "dk", "dv", "dbeta", "dh0"), *grads):
        assert rel_err(b, a) <= 1e-10, name


def test_chunk_size_one_is_the_recurrence():
    q, k, v, beta, _ = make_inputs(1, 9, 1, 4, 3, h0=False)
    o_r, _ = chunk_delta_rule(q, k, v, beta, impl="reference")
    o_1, _ = chunk_delta_rule(q, k, v, beta, chunk_size=1)
    assert rel_err(o_1, o_r) <= 1e-12


def test_defaults_scale_and_beta_none():
    q, k, v, beta, _ = make_inputs(1, 12, 2, 16, 8, h0=False)
    o_a, _ = fused_recurrent_delta_rule(q, k, v, None)
    o_b, _ = fused_recurrent_delta_rule(q * 0.25, k, v, torch.ones_like(beta), scale=1.0)
    assert rel_err(o_a, o_b) <= 1e-12          # default scale = K**-0.5 = 0.25, beta None = ones
    o_n, ht = chunk_delta_rule(q, k, v, beta)
    assert ht is None and o_n.shape == (1, 12, 2, 8)


def test_l2norm_in_kernel_flag():
    q, k, v, beta, _ = make_inputs(1, 20, 1, 8, 8, h0=False)
    k_raw = k * 3.0
    o_a, _ = chunk_delta_rule(q, k_raw, v, beta, use_qk_l2norm_in_kernel=True, chunk_size=8)
    o_b, _ = fused_recurrent_delta_rule(l2norm(q), l2norm(k_raw), v, beta)
    assert rel_err(o_a, o_b) <= 1e-12


def test_state_carries_across_calls():
    """Splitting a sequence and passing the final state on equals one call (the RNN view)."""
    q, k, v, beta, s0 = make_inputs(1, 40, 2, 8, 8)
    o, s = chunk_delta_rule(q, k, v, beta, initial_state=s0, output_final_state=True, chunk_size=16)
    o1, s1 = chunk_delta_rule(q[:, :17], k[:, :17], v[:, :17], beta[:, :17], initial_state=s0,
                              output_final_state=True, chunk_size=16)
    o2, s2 = chunk_delta_rule(q[:, 17:], k[:, 17:], v[:, 17:], beta[:, 17:], initial_state=s1,
                              output_final_state=True, chunk_size=16)
    assert rel_err(torch.cat([o1, o2], 1), o) <= 1e-10 and rel_err(s2, s) <= 1e-10


def test_cu_seqlens_equals_separate_sequences():
    q, k, v, beta, _ = make_inputs(1, 30, 1, 8, 4, h0=False)
    s0 = torch.randn(3, 1, 8, 4, dtype=torch.float64)
    cu = torch.tensor([0, 7, 8, 30])
    o, ht = chunk_delta_rule(q, k, v, beta, initial_state=s0, output_final_state=True,
                             cu_seqlens=cu, chunk_size=4)
    for n, (a, b) in enumerate([(0, 7), (7, 8), (8, 30)]):
        o_n, h_n = fused_recurrent_delta_rule(q[:, a:b], k[:, a:b], v[:, a:b], beta[:, a:b],
                                              initial_state=s0[n:n + 1], output_final_state=True)
        assert rel_err(o[:, a:b], o_n) <= 1e-10 and rel_err(ht[n:n + 1], h_n) <= 1e-10


def test_wy_identity():
    """prod_i (I - beta_i k_i k_i^T), rightmost factor first, equals I - K^T W."""
    _, k, _, beta, _ = make_inputs(1, 16, 1, 8, 8, h0=False)
    k, beta = k[0, :, 0], beta[0, :, 0]
    W = wy_representation(k, beta)
    P = torch.eye(8, dtype=torch.float64)
    for i in range(16):
        P = (torch.eye(8, dtype=torch.float64) - beta[i] * torch.outer(k[i], k[i])) @ P
    assert (P - (torch.eye(8, dtype=torch.float64) - k.T @ W)).abs().max() <= 1e-12


def test_planted_mask_bug_is_caught(monkeypatch):
    """An off-by-one in the intra-chunk mask (diagonal excluded) must break exactness."""
    q, k, v, beta, _ = make_inputs(1, 32, 1, 8, 8, h0=False)
    o_r, _ = chunk_delta_rule(q, k, v, beta, impl="reference")
    monkeypatch.setattr(dr, "_intra_chunk_mask",
                        lambda c, device: torch.ones(c, c, dtype=torch.bool, device=device).tril(-1))
    o_bad, _ = chunk_delta_rule(q, k, v, beta, chunk_size=8)
    assert rel_err(o_bad, o_r) > 1e-2


# ------------------------------------------------------------------------------- input checking
def test_bad_inputs_name_the_argument():
    q, k, v, beta, s0 = make_inputs(1, 8, 2, 4, 4)
    with pytest.raises(ValueError, match="impl"):
        chunk_delta_rule(q, k, v, beta, impl="cuda")
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_delta_rule(q, k, v, beta, chunk_size=12)
    with pytest.raises(ValueError, match="k must have shape"):
        chunk_delta_rule(q, k[:, :5], v, beta)
    with pytest.raises(ValueError, match="beta"):
        chunk_delta_rule(q, k, v, beta[..., None])
    with pytest.raises(TypeError, match="v must have the dtype"):
        chunk_delta_rule(q, k, v.float(), beta)
    with pytest.raises(ValueError, match="initial_state"):
        chunk_delta_rule(q, k, v, beta, initial_state=s0[:, :1])
    with pytest.raises(ValueError, match="q must have 4"):
        chunk_delta_rule(q[0], k, v, beta)
    with pytest.raises(ValueError, match="beta is required"):
        chunk_delta_rule(q, k, v, None)
    with pytest.raises(ValueError, match="cu_seqlens"):
        chunk_delta_rule(q, k, v, beta, cu_seqlens=torch.tensor([0, 3, 9]))   # must end at T
    q2, k2, v2, beta2, _ = make_inputs(2, 8, 2, 4, 4)
    with pytest.raises(ValueError, match="cu_seqlens"):
        chunk_delta_rule(q2, k2, v2, beta2, cu_seqlens=torch.tensor([0, 3, 8]))   # B = 1 required
    with pytest.raises(ValueError, match="impl"):
        fused_recurrent_delta_rule(q, k, v, beta, impl="torch")


# ------------------------------------------------------------------------ Triton (interpreter)
@pytest.mark.parametrize("T,K,V", [(40, 16, 16), (19, 20, 12), (1, 16, 40)])
def test_triton_chunk_matches_reference(T, K, V):
    q, k, v, beta, s0 = make_inputs(1, T, 2, K, V)
    o_r, s_r = fused_recurrent_delta_rule(q, k, v, beta, initial_state=s0, output_final_state=True)
    o_t, s_t = chunk_delta_rule(q, k, v, beta, initial_state=s0, output_final_state=True,
                                chunk_size=16, impl="triton")
    assert rel_err(o_t, o_r) <= 1e-10 and rel_err(s_t, s_r) <= 1e-10
    o_f, s_f = chunk_delta_rule(*(x.float() for x in (q, k, v, beta)), output_final_state=True,
                                chunk_size=16, impl="triton")
    o_rf, s_rf = fused_recurrent_delta_rule(q, k, v, beta, output_final_state=True)
    assert rel_err(o_f.double(), o_rf) <= 1e-4 and rel_err(s_f.double(), s_rf) <= 1e-4


def test_triton_chunk_float16_inputs():
    q, k, v, beta, _ = make_inputs(1, 20, 1, 16, 16, h0=False)
    o_r, _ = fused_recurrent_delta_rule(q, k, v, beta)
    o_h, _ = chunk_delta_rule(*(x.half() for x in (q, k, v, beta)), chunk_size=16, impl="triton")
    assert o_h.dtype == torch.float16 and rel_err(o_h.double(), o_r) <= 1e-2


@pytest.mark.parametrize("T,K,V", [(12, 16, 16), (7, 10, 36)])
def test_triton_recurrent_matches_reference(T, K, V):
    q, k, v, beta, s0 = make_inputs(1, T, 2, K, V)
    o_r, s_r = fused_recurrent_delta_rule(q, k, v, beta, initial_state=s0, output_final_state=True)
    o_t, s_t = fused_recurrent_delta_rule(q, k, v, beta, initial_state=s0, output_final_state=True,
                                          impl="triton")
    assert rel_err(o_t, o_r) <= 1e-10 and rel_err(s_t, s_r) <= 1e-10


def test_triton_refuses_what_it_cannot_do():
    q, k, v, beta, _ = make_inputs(1, 8, 1, 16, 16, h0=False)
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_delta_rule(q, k, v, beta, chunk_size=8, impl="triton")
    with pytest.raises(ValueError, match="requires grad"):
        chunk_delta_rule(q.requires_grad_(), k, v, beta, chunk_size=16, impl="triton")


# ----------------------------------------------------------------------------------- fla anchor
@pytest.mark.anchor
def test_against_fla_naive():
    pytest.importorskip("einops")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        naive = pytest.importorskip("fla.ops.delta_rule.naive")
    q, k, v, beta, s0 = make_inputs(1, 32, 2, 16, 24, dtype=torch.float32)
    heads_first = [x.transpose(1, 2).contiguous() for x in (q, k, v, beta)]   # fla naive: [B, H, T, D]
    o_fr, s_fr = naive.delta_rule_recurrence(*heads_first, initial_state=s0, output_final_state=True)
    o, s = chunk_delta_rule(q, k, v, beta, initial_state=s0, output_final_state=True, chunk_size=16)
    assert rel_err(o, o_fr.transpose(1, 2)) <= 1e-5 and rel_err(s, s_fr) <= 1e-5
    o_fc, s_fc = naive.delta_rule_chunkwise(*heads_first, chunk_size=16)
    o0, s0_ = chunk_delta_rule(q, k, v, beta, output_final_state=True, chunk_size=16)
    assert rel_err(o0, o_fc.transpose(1, 2)) <= 1e-5 and rel_err(s0_, s_fc) <= 1e-5


@pytest.mark.parametrize("beta_value", [0.999, 1.0])
def test_beta_near_one_with_nearly_parallel_keys(beta_value):
    """beta -> 1 makes every factor a projection and nearly parallel keys fill tril(K_beta K^T) with
    entries near 1: the UT solve at its worst. Outputs, state and gradients must still match."""
    g = torch.Generator().manual_seed(3)
    base = torch.randn(1, 1, 1, 16, generator=g, dtype=torch.float64)
    k = l2norm(0.99 * base + 0.01 * torch.randn(1, 96, 2, 16, generator=g, dtype=torch.float64))
    q, v = (torch.randn(1, 96, 2, 16, generator=g, dtype=torch.float64) for _ in range(2))
    beta = torch.full((1, 96, 2), beta_value, dtype=torch.float64)
    outs = []
    for fn in (fused_recurrent_delta_rule, lambda *a, **kw: chunk_delta_rule(*a, chunk_size=32, **kw)):
        leaves = [x.clone().requires_grad_() for x in (q, k, v, beta)]
        o, s = fn(*leaves, output_final_state=True)
        outs.append((o, s, *torch.autograd.grad(o.sum() + s.square().sum(), leaves)))
    for a, b in zip(outs[1], outs[0]):
        assert rel_err(a, b) < 1e-10
    o32, s32 = chunk_delta_rule(q.float(), k.float(), v.float(), beta.float(), output_final_state=True,
                                chunk_size=32)
    assert max(rel_err(o32.double(), outs[0][0]), rel_err(s32.double(), outs[0][1])) < 1e-4
