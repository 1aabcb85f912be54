"""Softmax attention: tiled torch and Triton (interpreter) forms against the naive reference."""

import math

import pytest
import torch

from reprobook.kernels.attention import (
    PLANTED_BUGS,
    attention_flops,
    causal_mask,
    flash_attn_func,
    planted_bug,
    tiled_attention_forward,
)


def make_qkv(B, Sq, Sk, H, Hkv, D, Dv=None, dtype=torch.float64, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    Dv = D if Dv is None else Dv
    q = torch.randn(B, Sq, H, D, generator=g, dtype=dtype)
    k = torch.randn(B, Sk, Hkv, D, generator=g, dtype=dtype)
    v = torch.randn(B, Sk, Hkv, Dv, generator=g, dtype=dtype)
    if grad:
        for t in (q, k, v):
            t.requires_grad_(True)
    return q, k, v


def finite_lse_close(lse_a, lse_b, tol):
    """LSE agrees where finite, and both forms mark the same rows empty (+inf)."""
    assert torch.equal(torch.isposinf(lse_a), torch.isposinf(lse_b))
    fin = torch.isfinite(lse_a)
    if fin.any():
        assert (lse_a[fin] - lse_b[fin]).abs().max().item() <= tol


# (B, Sq, Sk, H, Hkv, D, Dv): Sq != Sk both ways, lengths off the block grid, D not a power of
# two, GQA (H_kv | H) and MQA, Dv != D, and the one-token case.
SHAPES = [
    (2, 37, 53, 4, 2, 20, 20),
    (1, 53, 37, 3, 1, 33, 24),
    (1, 64, 64, 2, 2, 16, 16),
    (1, 1, 1, 1, 1, 8, 8),
    (1, 1, 45, 2, 1, 12, 12),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_torch_forward_matches_reference_float64(shape, causal):
    B, Sq, Sk, H, Hkv, D, Dv = shape
    q, k, v = make_qkv(B, Sq, Sk, H, Hkv, D, Dv)
    o_ref, lse_ref = flash_attn_func(q, k, v, causal=causal, return_attn_probs=True, impl="reference")
    o, lse = flash_attn_func(q, k, v, causal=causal, return_attn_probs=True, impl="torch",
                             block_q=16, block_k=16)
    assert o.shape == (B, Sq, H, Dv) and lse.shape == (B, H, Sq)
    assert (o - o_ref).abs().max().item() <= 1e-12
    finite_lse_close(lse, lse_ref, 1e-12)


def test_reference_against_explicit_softmax_with_gqa():
    q, k, v = make_qkv(1, 5, 7, 4, 2, 6)
    out = flash_attn_func(q, k, v, impl="reference")
    for h in range(4):
        kh, vh = k[0, :, h // 2], v[0, :, h // 2]  # query head h reads kv head h // (H/H_kv)
        p = torch.softmax(q[0, :, h] @ kh.T / math.sqrt(6), dim=-1)
        assert torch.allclose(out[0, :, h], p @ vh, atol=1e-14)


def test_causal_is_bottom_right_aligned():
    mask = causal_mask(2, 5)
    # last query row sees all keys; the first sees keys j <= 0 + 5 - 2 = 3
    assert mask.tolist() == [[True, True, True, True, False], [True] * 5]
    q, k, v = make_qkv(1, 2, 5, 1, 1, 4)
    out = flash_attn_func(q, k, v, causal=True, impl="torch", block_q=16, block_k=2)
    full = flash_attn_func(q[:, 1:], k, v, causal=False, impl="reference")
    assert torch.allclose(out[:, 1:], full, atol=1e-14)


def test_rows_without_keys_give_zero_and_infinite_lse():
    q, k, v = make_qkv(1, 6, 2, 1, 1, 4)  # Sq > Sk: rows 0..3 see no key when causal
    for impl in ("reference", "torch"):
        o, lse = flash_attn_func(q, k, v, causal=True, return_attn_probs=True, impl=impl, block_q=4, block_k=4)
        assert torch.all(o[:, :4] == 0) and torch.all(torch.isposinf(lse[..., :4]))
        assert torch.all(torch.isfinite(lse[..., 4:]))


def test_lse_is_logsumexp_of_scores():
    q, k, v = make_qkv(1, 9, 11, 2, 2, 5)
    _, lse = flash_attn_func(q, k, v, softmax_scale=0.3, return_attn_probs=True, impl="torch", block_q=4, block_k=4)
    s = 0.3 * torch.einsum("bqhd,bkhd->bhqk", q, k)
    assert torch.allclose(lse, torch.logsumexp(s, dim=-1), atol=1e-13)


@pytest.mark.parametrize("shape,causal", [((1, 37, 53, 4, 2, 20, 24), True), ((1, 29, 19, 2, 1, 12, 12), True),
                                          ((1, 21, 21, 2, 2, 10, 10), False)])
def test_torch_gradients_match_reference_float64(shape, causal):
    B, Sq, Sk, H, Hkv, D, Dv = shape
    q, k, v = make_qkv(B, Sq, Sk, H, Hkv, D, Dv, grad=True)
    do = torch.randn(B, Sq, H, Dv, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    grads = {}
    for impl in ("reference", "torch"):
        out = flash_attn_func(q, k, v, causal=causal, impl=impl, block_q=8, block_k=8)
        grads[impl] = torch.autograd.grad(out, (q, k, v), do)
    for a, b in zip(grads["torch"], grads["reference"]):
        assert torch.isfinite(a).all()
        assert (a - b).abs().max().item() <= 1e-10


def test_torch_gradcheck_tiny():
    q, k, v = make_qkv(1, 5, 7, 2, 1, 3, grad=True)
    fn = lambda q, k, v: flash_attn_func(q, k, v, causal=True, impl="torch", block_q=2, block_k=3)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k, v))


def test_torch_float32_close_to_reference():
    q, k, v = make_qkv(2, 70, 45, 4, 4, 24, dtype=torch.float32)
    o_ref = flash_attn_func(q.double(), k.double(), v.double(), causal=True, impl="reference")
    o = flash_attn_func(q, k, v, causal=True, impl="torch", block_q=32, block_k=16)
    assert o.dtype == torch.float32
    assert ((o.double() - o_ref).abs().max() / o_ref.abs().max()).item() <= 1e-5


# FA3's intra-warpgroup pipelining only reorders independent operations; the two schedules run
# the same per-row arithmetic, so they must agree bit for bit (this used to be a "claim" of the
# flashattention3 chapter, but it is true by construction of the code, so it is tested here).
@pytest.mark.parametrize("sq, sk, causal, block", [(40, 70, True, 16), (45, 70, True, 32),
                                                    (70, 45, False, 32), (64, 64, False, 16)])
def test_pipelined_schedule_is_bit_identical(sq, sk, causal, block):
    q, k, v = make_qkv(1, sq, sk, 2, 2, 24, dtype=torch.float32)
    q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    a = tiled_attention_forward(q, k, v, 0.25, causal=causal, block_q=block, block_k=block)
    b = tiled_attention_forward(q, k, v, 0.25, causal=causal, block_q=block, block_k=block,
                                schedule="pipelined")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_planted_bugs_break_the_tiled_forms_only_inside_the_block():
    q, k, v = make_qkv(1, 45, 70, 2, 1, 24)
    do = torch.randn(1, 45, 2, 24, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    ref = flash_attn_func(q, k, v, causal=True, impl="reference")

    def grads(impl):
        qq, kk, vv = (t.clone().requires_grad_(True) for t in (q, k, v))
        out = flash_attn_func(qq, kk, vv, causal=True, impl=impl, block_q=32, block_k=32)
        return out.detach(), torch.autograd.grad(out, (qq, kk, vv), do)

    ref_grads = grads("reference")[1]
    with planted_bug("no-rescale"):
        assert torch.equal(flash_attn_func(q, k, v, causal=True, impl="reference"), ref)
        for impl in ("torch", "triton"):
            bad = flash_attn_func(q, k, v, causal=True, impl=impl, block_q=32, block_k=32)
            assert (bad - ref).abs().max().item() > 0.1
    with planted_bug("no-delta"):
        out, g = grads("torch")
        assert (out - ref).abs().max().item() <= 1e-12          # the forward is untouched
        assert max((a - b).abs().max().item() for a, b in zip(g, ref_grads)) > 0.1
    # outside the block everything is exact again
    out, g = grads("torch")
    assert (out - ref).abs().max().item() <= 1e-12
    assert max((a - b).abs().max().item() for a, b in zip(g, ref_grads)) <= 1e-10
    tri = flash_attn_func(q, k, v, causal=True, impl="triton", block_q=32, block_k=32)
    assert (tri - ref).abs().max().item() <= 1e-10


def test_planted_bug_is_checked_and_restored_after_an_error():
    assert PLANTED_BUGS == ("no-rescale", "no-delta")
    with pytest.raises(ValueError, match="unknown bug"):
        with planted_bug("typo"):
            pass
    with pytest.raises(RuntimeError, match="inside"):
        with planted_bug("no-rescale"), planted_bug("no-delta"):
            pass
    with pytest.raises(KeyError):
        with planted_bug("no-rescale"):
            raise KeyError("boom")
    q, k, v = make_qkv(1, 20, 70, 1, 1, 8)
    ref = flash_attn_func(q, k, v, impl="reference")
    assert (flash_attn_func(q, k, v, block_q=16, block_k=16) - ref).abs().max().item() <= 1e-12


@pytest.mark.parametrize("shape", [(1, 37, 53, 4, 2, 20, 24), (1, 53, 37, 2, 1, 33, 33), (1, 1, 1, 1, 1, 8, 8)])
@pytest.mark.parametrize("causal", [False, True])
def test_triton_forward_matches_reference(shape, causal):
    B, Sq, Sk, H, Hkv, D, Dv = shape
    q, k, v = make_qkv(B, Sq, Sk, H, Hkv, D, Dv)
    o_ref, lse_ref = flash_attn_func(q, k, v, causal=causal, return_attn_probs=True, impl="reference")
    o, lse = flash_attn_func(q, k, v, causal=causal, return_attn_probs=True, impl="triton", block_q=32, block_k=16)
    assert (o - o_ref).abs().max().item() <= 1e-10
    finite_lse_close(lse, lse_ref, 1e-10)
    o32 = flash_attn_func(q.float(), k.float(), v.float(), causal=causal, impl="triton", block_q=32, block_k=32)
    assert o32.dtype == torch.float32
    assert ((o32.double() - o_ref).abs().max() / o_ref.abs().max()).item() <= 1e-4


def test_flops_formula():
    assert attention_flops(2, 3, 5, 7, 11) == 4 * 2 * 3 * 5 * 7 * 11
    assert attention_flops(2, 3, 5, 7, 11, causal=True) == 2 * 2 * 3 * 5 * 7 * 11


def test_bad_inputs_raise_clear_errors():
    q, k, v = make_qkv(1, 4, 4, 4, 2, 8)
    with pytest.raises(ValueError, match="impl"):
        flash_attn_func(q, k, v, impl="cuda")
    with pytest.raises(ValueError, match="q must have 4"):
        flash_attn_func(q[0], k, v)
    with pytest.raises(ValueError, match="multiple"):
        flash_attn_func(q[:, :, :3], k, v)
    with pytest.raises(ValueError, match="head dim"):
        flash_attn_func(q, k[..., :4], v)
    with pytest.raises(TypeError, match="share a dtype"):
        flash_attn_func(q, k.float(), v)
    with pytest.raises(ValueError, match="block_q"):
        flash_attn_func(q, k, v, block_q=0)
    with pytest.raises(ValueError, match="block_k"):
        flash_attn_func(q, k, v, impl="triton", block_k=8)
    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        flash_attn_func(q.numpy(), k, v)


@pytest.mark.anchor
def test_against_flash_attn_anchor():
    fa = pytest.importorskip("flash_attn_interface", reason="FA3 (flash_attn_interface) not installed")
    if not torch.cuda.is_available():
        pytest.skip("flash-attn needs a CUDA device")
    q, k, v = (t.to("cuda", torch.bfloat16) for t in make_qkv(2, 113, 203, 4, 2, 64))
    res = fa.flash_attn_func(q, k, v, causal=True)
    out_anchor = res[0] if isinstance(res, tuple) else res  # older FA3 builds return (out, lse)
    out = flash_attn_func(q.double(), k.double(), v.double(), causal=True, impl="reference")
    assert (out_anchor.double() - out).abs().max().item() < 2e-2
