"""FP8 e4m3 emulation: Hadamard rotation, e4m3 rounding, quantisation bounds, FP8 attention."""

import pytest
import torch

from reprobook.kernels.attention import flash_attn_func
from reprobook.kernels.fp8 import (
    E4M3_MAX,
    E5M2_MAX,
    fp16_attention,
    fp8_attention,
    fwht,
    hadamard,
    has_fp8_matmul,
    incoherent_rotation,
    outlier_normal,
    quantize_e4m3,
    quantize_fp8,
    random_signs,
    rmse,
    round_e4m3,
    signed_permutation,
)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def all_e4m3_values():
    """Every finite e4m3fn value, from the 256 bit patterns (0x7f/0xff are NaN)."""
    bits = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    vals = bits.view(torch.float8_e4m3fn).to(torch.float64)
    return torch.unique(vals[torch.isfinite(vals)])


@pytest.mark.parametrize("d", [1, 2, 8, 128])
def test_hadamard_is_orthogonal_and_symmetric(d):
    h = hadamard(d)
    assert torch.allclose(h @ h.T, torch.eye(d, dtype=torch.float64), atol=1e-14)
    assert torch.equal(h, h.T)
    assert torch.all(h.abs() == 1 / d**0.5)


def test_fwht_equals_matrix_product():
    x = torch.randn(3, 5, 64, generator=gen(), dtype=torch.float64)
    assert torch.allclose(fwht(x), x @ hadamard(64), atol=1e-13)


def test_rotation_preserves_qk_products_and_spreads_outliers():
    q = torch.randn(2, 40, 3, 128, generator=gen(1), dtype=torch.float64)
    k = torch.randn(2, 50, 3, 128, generator=gen(2), dtype=torch.float64)
    s = random_signs(128, seed=7, dtype=torch.float64)
    qr, kr = incoherent_rotation(q, s), incoherent_rotation(k, s)
    before = torch.einsum("bqhd,bkhd->bhqk", q, k)
    after = torch.einsum("bqhd,bkhd->bhqk", qr, kr)
    assert (before - after).abs().max().item() <= 1e-11
    spike = torch.zeros(128, dtype=torch.float64)
    spike[5] = 100.0
    assert torch.allclose(incoherent_rotation(spike, s).abs(), torch.full((128,), 100 / 128**0.5, dtype=torch.float64))


def test_random_signs_are_seeded_and_plus_minus_one():
    a, b = random_signs(64, seed=3), random_signs(64, seed=3)
    assert torch.equal(a, b) and set(a.tolist()) == {-1.0, 1.0}
    assert not torch.equal(a, random_signs(64, seed=4))


def test_e4m3_grid_facts():
    vals = all_e4m3_values()
    assert vals.max().item() == E4M3_MAX
    assert vals[vals > 0].min().item() == 2.0**-9          # smallest subnormal
    assert len(vals) == 253                                 # 254 finite patterns, +0 and -0 merge


def test_round_e4m3_matches_torch_cast_exactly():
    vals = all_e4m3_values()
    mids = (vals[1:] + vals[:-1]) / 2                       # exact ties: round half to even
    rnd = torch.exp2(torch.empty(20000, dtype=torch.float64).uniform_(-14, 9.5, generator=gen()))
    rnd = rnd * torch.where(torch.rand(20000, generator=gen(1)) < 0.5, -1.0, 1.0).double()
    for x in (vals, mids, mids + 1e-9, mids - 1e-9, rnd):
        x = x[x.abs() <= E4M3_MAX].float().double()         # values exactly representable in fp32
        torch_cast = x.float().to(torch.float8_e4m3fn).double()
        assert torch.equal(round_e4m3(x), torch_cast)
    assert torch.equal(round_e4m3(vals), vals)


def test_ties_go_to_even_mantissa():
    # 1 + 1/16 lies half-way between 1 and 1.125: the even mantissa (1.0) wins
    assert round_e4m3(torch.tensor([1.0625, 1.1875, 2.0**-10, 3 * 2.0**-10])).tolist() == [1.0, 1.25, 0.0, 2.0**-8]


@pytest.mark.parametrize("block", [None, 16, 7])
def test_quantize_dequantize_error_bound(block):
    x = outlier_normal((2, 45, 3, 32), outlier_prob=0.01, generator=gen(5)).float()
    qx = quantize_e4m3(x, block=block)
    assert qx.data.dtype == torch.float8_e4m3fn
    s = qx.row_scale()
    err = (qx.dequantize() - x).abs()
    # normal range: half a unit in the last place, 2^-4 relative; subnormal: half the 2^-9 step.
    bound = torch.maximum(2.0**-4 * x.abs(), s * 2.0**-10) * (1 + 1e-6)
    assert torch.all(err <= bound)
    # every scale maps its block's largest magnitude onto 448 exactly
    assert torch.allclose((qx.data.float().abs() * 1).amax(), torch.tensor(E4M3_MAX))
    if block is not None:
        assert qx.scale.shape == (2, -(-45 // block), 3, 1)


def test_block_scales_follow_block_amax():
    x = torch.ones(1, 8, 2, 4)
    x[0, 5, 1, 2] = 44.8
    qx = quantize_e4m3(x, block=4)
    assert torch.allclose(qx.scale[0, :, :, 0], torch.tensor([[1 / 448, 1 / 448], [1 / 448, 0.1]]))
    assert quantize_e4m3(torch.zeros(1, 3, 1, 2)).scale.item() == 1.0


def test_fp8_attention_without_any_rounding_source_is_exact_attention():
    q, k, v = (outlier_normal((1, 40, 2, 16), generator=gen(i)) for i in range(3))
    ref = flash_attn_func(q, k, v, impl="reference")
    out = fp8_attention(q, k, v, block_q=16, block_k=16)
    err = rmse(out, ref)
    assert 1e-4 < err < 0.05  # FP8 has a visible, bounded error


def test_fp8_attention_causal_and_gqa_shapes():
    q = outlier_normal((2, 33, 4, 16), generator=gen(0))
    k = outlier_normal((2, 21, 2, 16), generator=gen(1))
    v = outlier_normal((2, 21, 2, 8), generator=gen(2))
    ref = flash_attn_func(q, k, v, causal=True, impl="reference")
    for bq, inc, rv in [(True, True, False), (False, False, False), (True, True, True)]:
        out = fp8_attention(q, k, v, block_quant=bq, incoherent=inc, rotate_v=rv, causal=True, block_q=16, block_k=8)
        assert out.shape == ref.shape and torch.isfinite(out).all()
        assert rmse(out, ref) < 0.05
        assert torch.all(out[:, :12] == 0)  # rows 0..11 see no key (bottom-right causal)


def test_incoherent_processing_lowers_error_with_outliers():
    q, k, v = (outlier_normal((1, 256, 2, 64), generator=gen(10 + i)) for i in range(3))
    ref = flash_attn_func(q, k, v, impl="reference")
    err = {inc: rmse(fp8_attention(q, k, v, block_quant=False, incoherent=inc), ref) for inc in (False, True)}
    assert err[True] < err[False]


def test_unquantized_p_and_fp16_rows():
    q, k, v = (outlier_normal((1, 64, 2, 32), generator=gen(20 + i)) for i in range(3))
    ref = flash_attn_func(q, k, v, impl="reference")
    assert rmse(fp8_attention(q, k, v, quantize_p=False), ref) < rmse(fp8_attention(q, k, v), ref)
    e_std, e_flash = rmse(fp16_attention(q, k, v, style="standard"), ref), rmse(fp16_attention(q, k, v, style="flash"), ref)
    assert 0 < e_flash < 1e-3 and 0 < e_std < 1e-3


def test_outlier_normal_statistics():
    x = outlier_normal((200_000,), outlier_prob=0.01, outlier_std=10.0, generator=gen(3))
    # variance 1 + p * sigma^2 = 2
    assert abs(x.var().item() - 2.0) < 0.1
    assert torch.equal(outlier_normal((5,), generator=gen(1)), outlier_normal((5,), generator=gen(1)))


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="d must be a positive power of two"):
        hadamard(12)
    with pytest.raises(ValueError, match="x.shape"):
        fwht(torch.ones(3, 6))
    with pytest.raises(ValueError, match="x must have 4"):
        quantize_e4m3(torch.ones(3, 4), block=2)
    with pytest.raises(ValueError, match="block"):
        quantize_e4m3(torch.ones(1, 3, 1, 4), block=0)
    with pytest.raises(ValueError, match="signs"):
        incoherent_rotation(torch.ones(2, 8), torch.ones(4))
    with pytest.raises(ValueError, match="style"):
        fp16_attention(torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4), style="bf16")
    with pytest.raises(ValueError, match="outlier_prob"):
        outlier_normal((3,), outlier_prob=2.0)
    with pytest.raises(ValueError, match="shape"):
        rmse(torch.ones(2), torch.ones(3))
    with pytest.raises(ValueError, match="power of two"):
        fp8_attention(torch.ones(1, 2, 1, 12), torch.ones(1, 2, 1, 12), torch.ones(1, 2, 1, 12))


def test_signed_permutation_is_orthogonal_but_mixes_nothing():
    q = torch.randn(2, 40, 3, 64, generator=gen(1), dtype=torch.float64)
    k = torch.randn(2, 50, 3, 64, generator=gen(2), dtype=torch.float64)
    s = random_signs(64, seed=4, dtype=torch.float64)
    qp, kp = signed_permutation(q, s, seed=4), signed_permutation(k, s, seed=4)
    before = torch.einsum("bqhd,bkhd->bhqk", q, k)
    assert (before - torch.einsum("bqhd,bkhd->bhqk", qp, kp)).abs().max().item() <= 1e-12
    assert not torch.equal(qp.abs(), q.abs())                   # coordinates did move ...
    assert torch.equal(qp.abs().sort(-1).values, q.abs().sort(-1).values)  # ... but never mix
    with pytest.raises(ValueError, match="signs"):
        signed_permutation(q, torch.ones(8))


def test_fp8_without_mixing_is_block_only_up_to_summation_order():
    q, k, v = (outlier_normal((1, 128, 2, 64), generator=gen(30 + i)) for i in range(3))
    ref = flash_attn_func(q, k, v, impl="reference")
    block_only = fp8_attention(q, k, v, incoherent=False)
    no_mix = fp8_attention(q, k, v, rotation="signed-permutation")
    fa3 = fp8_attention(q, k, v)
    assert abs(rmse(no_mix, ref) / rmse(block_only, ref) - 1) < 1e-4
    assert rmse(fa3, ref) < rmse(no_mix, ref)


def test_e5m2_quantisation_and_the_wrong_format_doubles_the_error():
    x = torch.randn(2, 45, 3, 16, generator=gen(6))
    qx = quantize_fp8(x, block=16, fmt="e5m2")
    assert qx.data.dtype == torch.float8_e5m2
    assert torch.allclose(qx.data.float().abs().amax(), torch.tensor(E5M2_MAX))
    rel = ((qx.dequantize() - x).abs() / x.abs().clamp(min=1e-3)).max().item()
    assert rel <= 2.0 ** -3 + 1e-6                             # 2 mantissa bits
    q, k, v = (outlier_normal((1, 128, 2, 64), generator=gen(40 + i)) for i in range(3))
    ref = flash_attn_func(q, k, v, impl="reference")
    assert rmse(fp8_attention(q, k, v, fmt="e5m2"), ref) > 1.5 * rmse(fp8_attention(q, k, v), ref)
    with pytest.raises(ValueError, match="fmt"):
        fp8_attention(q, k, v, fmt="e3m4")
    with pytest.raises(ValueError, match="rotation"):
        fp8_attention(q, k, v, rotation="dct")


def test_fp16_flash_with_fp16_scores_loses_its_advantage():
    q, k, v = (outlier_normal((1, 256, 2, 64), generator=gen(50 + i)) for i in range(3))
    ref = flash_attn_func(q, k, v, impl="reference")
    e = {name: rmse(fp16_attention(q, k, v, **kw), ref) for name, kw in (
        ("standard", dict(style="standard")), ("flash", dict(style="flash")),
        ("flash-s16", dict(style="flash", round_scores=True)))}
    assert e["flash"] < 0.8 * e["standard"]
    assert e["flash-s16"] > 0.9 * e["standard"]


def _paper_baseline_one_tile(q, k, v):
    """The paper's baseline written out for one key tile (Sk <= block_k): per-tensor e4m3 inputs,
    float32 products, then S, its max, P and the row sum in fp16; P to e4m3; O = (P8 V8) s_V / l."""
    half = lambda t: t.to(torch.float16).to(torch.float32)  # noqa: E731
    qq, kq, vq = (quantize_e4m3(t.float()) for t in (q, k, v))
    tau = q.shape[-1] ** -0.5
    s = torch.einsum("bqhd,bkhd->bhqk", qq.data.float(), kq.data.float()) * (qq.scale * kq.scale * tau)
    s = half(s)
    m = s.amax(-1, keepdim=True)
    p = half(torch.exp(s - m))
    l = half(p.sum(-1, keepdim=True))
    p8 = p.to(torch.float8_e4m3fn).float()
    o = torch.einsum("bhqk,bkhd->bhqd", p8, vq.data.float()) * vq.scale / l
    return o.transpose(1, 2)


def test_paper_baseline_keeps_softmax_intermediates_in_fp16():
    q, k, v = (outlier_normal((1, 48, 2, 32), generator=gen(40 + i)) for i in range(3))
    base16 = fp8_attention(q, k, v, block_quant=False, incoherent=False, softmax_dtype="float16", block_k=64)
    torch.testing.assert_close(base16, _paper_baseline_one_tile(q, k, v), rtol=1e-6, atol=1e-6)
    base32 = fp8_attention(q, k, v, block_quant=False, incoherent=False, block_k=64)
    assert 0 < (base16 - base32).abs().max().item() < 0.05      # differs, but only by fp16 rounding
    # several key tiles: the running statistics stay fp16 numbers
    ref = flash_attn_func(q, k, v, impl="reference")
    tiled = fp8_attention(q, k, v, block_quant=False, incoherent=False, softmax_dtype="float16", block_k=16)
    assert rmse(tiled, ref) < 2 * rmse(base32, ref)
    with pytest.raises(ValueError, match="softmax_dtype must be one of"):
        fp8_attention(q, k, v, softmax_dtype="bfloat16")


def test_scale_block_sets_the_scale_granularity():
    q, k, v = (outlier_normal((2, 64, 2, 32), generator=gen(50 + i)) for i in range(3))
    torch.testing.assert_close(fp8_attention(q, k, v, block_k=16, block_q=16, scale_block=16),
                               fp8_attention(q, k, v, block_k=16, block_q=16), rtol=0, atol=0)
    # one scale block per (batch, head) sequence: the K/V descale of every tile is that block's
    one_block = fp8_attention(q, k, v, incoherent=False, block_q=16, block_k=16, scale_block=64)
    per_seq = quantize_e4m3(k.float(), 64)
    assert per_seq.scale.shape == (2, 1, 2, 1)
    assert not torch.equal(one_block, fp8_attention(q, k, v, incoherent=False, block_q=16, block_k=16))
    with pytest.raises(ValueError, match="multiple of block_k"):
        fp8_attention(q, k, v, block_k=16, scale_block=24)


@pytest.mark.skipif(not hasattr(torch, "_scaled_mm"), reason="torch without _scaled_mm")
def test_scaled_mm_path_matches_the_emulation_where_scaled_mm_upcasts():
    # on a CPU torch's _scaled_mm multiplies the e4m3 values exactly in float32, so the two paths
    # must agree to float32 summation order; a length of 40 exercises the zero padding to multiples of 16
    q, k, v = (outlier_normal((1, 40, 2, 32), generator=gen(60 + i)) for i in range(3))
    for kw in (dict(), dict(block_quant=False, incoherent=False, softmax_dtype="float16"), dict(causal=True)):
        emu = fp8_attention(q, k, v, block_q=16, block_k=16, **kw)
        try:
            real = fp8_attention(q, k, v, block_q=16, block_k=16, matmul="scaled_mm", **kw)
        except RuntimeError as e:  # pragma: no cover - a torch build without a CPU _scaled_mm
            pytest.skip(f"_scaled_mm unavailable on CPU: {e}")
        torch.testing.assert_close(real, emu, rtol=1e-5, atol=1e-6)
    assert has_fp8_matmul("cpu") is False
    with pytest.raises(ValueError, match="matmul must be one of"):
        fp8_attention(q, k, v, matmul="cublas")
    with pytest.raises(ValueError, match="fmt='e4m3' only"):
        fp8_attention(q, k, v, matmul="scaled_mm", fmt="e5m2")
