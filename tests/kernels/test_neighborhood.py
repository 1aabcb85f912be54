"""Neighborhood attention: every form against the dense masked reference, NATTEN's semantics."""

import pytest
import torch
import torch.nn.functional as F

from reprobook.kernels.neighborhood import (
    PLANTED_BUGS, fused_working_set, na1d, na2d, neighborhood_indices, neighborhood_mask, planted_bug,
)


def rand(*shape, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=dtype)


def qkv(shape, dv=None, dtype=torch.float64, seed=0):
    vshape = (*shape[:-1], dv or shape[-1])
    return (rand(*shape, dtype=dtype, seed=seed), rand(*shape, dtype=dtype, seed=seed + 1),
            rand(*vshape, dtype=dtype, seed=seed + 2))


def maxerr(a, b):
    return (a - b).abs().max().item()


# --------------------------------------------------------------------------- the neighbourhood
def test_border_windows_are_shifted_not_truncated():
    m = neighborhood_mask(8, 3)
    assert m[0].nonzero().flatten().tolist() == [0, 1, 2]
    assert m[1].nonzero().flatten().tolist() == [0, 1, 2]
    assert m[7].nonzero().flatten().tolist() == [5, 6, 7]
    assert m[4].nonzero().flatten().tolist() == [3, 4, 5]


def test_even_kernel_sees_more_on_the_left():
    m = neighborhood_mask(10, 4)          # left = 2, right = 1 (NATTEN >= 0.17.5)
    assert m[5].nonzero().flatten().tolist() == [3, 4, 5, 6]


def test_dilation_groups_with_uneven_lengths():
    m = neighborhood_mask(10, 3, dilation=3)   # groups {0,3,6,9}, {1,4,7}, {2,5,8}
    assert m[0].nonzero().flatten().tolist() == [0, 3, 6]
    assert m[9].nonzero().flatten().tolist() == [3, 6, 9]
    assert m[7].nonzero().flatten().tolist() == [1, 4, 7]
    assert m[5].nonzero().flatten().tolist() == [2, 5, 8]


def test_causal_windows_are_truncated_at_the_start():
    m = neighborhood_mask(9, 3, dilation=2, is_causal=True)
    assert m[0].nonzero().flatten().tolist() == [0]
    assert m[3].nonzero().flatten().tolist() == [1, 3]
    assert m[8].nonzero().flatten().tolist() == [4, 6, 8]


@pytest.mark.parametrize("shape,k,d", [((13,), 4, 3), ((7, 9), (3, 4), (2, 1)), ((16,), 5, 1)])
def test_non_causal_rows_hold_exactly_prod_k_keys(shape, k, d):
    m = neighborhood_mask(shape, k, d)
    prod_k = torch.tensor(k).prod().item()
    assert (m.sum(1) == prod_k).all()
    assert m.diagonal().all()                      # every query sees itself


@pytest.mark.parametrize("shape,k,d,c", [((13,), 4, 3, False), ((11,), 5, 2, True),
                                         ((5, 7), (3, 2), (1, 3), (True, False))])
def test_index_table_agrees_with_mask(shape, k, d, c):
    idx, valid = neighborhood_indices(shape, k, d, c)
    n = idx.shape[0]
    m = torch.zeros(n, n, dtype=torch.bool)
    rows = torch.arange(n)[:, None].expand_as(idx)
    m[rows[valid], idx[valid]] = True
    assert torch.equal(m, neighborhood_mask(shape, k, d, c))


# --------------------------------------------------------------------------- equivalence, 1-D
CASES_1D = [  # (L, kernel, dilation, causal)
    (64, 7, 1, False),
    (64, 7, 2, False),
    (63, 5, 3, False),      # length not divisible by the dilation
    (64, 7, 1, True),
    (49, 49, 1, False),     # kernel = length: full attention
    (10, 4, 1, False),      # even kernel
    (17, 6, 2, True),       # even kernel, dilation, causal
    (13, 2, 6, False),
    (5, 1, 1, False),
    (1, 1, 1, True),
    (100, 9, 1, False),     # several tiles, last one partial
]


@pytest.mark.parametrize("impl", ["naive", "gemm", "torch"])
@pytest.mark.parametrize("L,k,d,c", CASES_1D)
def test_1d_forms_equal_reference_float64(impl, L, k, d, c):
    q, kk, v = qkv((2, L, 3, 5), dv=7)
    ref = na1d(q, kk, v, k, d, c, impl="reference")
    assert maxerr(na1d(q, kk, v, k, d, c, impl=impl), ref) <= 1e-10
    if impl in ("gemm", "torch"):
        for tile in (1, 3, 16):
            assert maxerr(na1d(q, kk, v, k, d, c, impl=impl, tile_shape=tile), ref) <= 1e-10


def test_fused_is_an_alias_of_torch():
    q, k, v = qkv((1, 20, 2, 4))
    assert torch.equal(na1d(q, k, v, 5, impl="fused"), na1d(q, k, v, 5, impl="torch"))


@pytest.mark.parametrize("impl", ["reference", "naive", "gemm", "torch"])
@pytest.mark.parametrize("causal", [False, True])
def test_kernel_equal_to_length_is_full_attention(impl, causal):
    q, k, v = qkv((2, 37, 2, 20))
    out = na1d(q, k, v, 37, is_causal=causal, impl=impl)
    sdpa = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)),
                                          is_causal=causal).transpose(1, 2)
    assert maxerr(out, sdpa) <= 1e-10


@pytest.mark.parametrize("impl", ["reference", "naive", "gemm", "torch"])
def test_kernel_one_returns_value(impl):
    q, k, v = qkv((1, 12, 2, 3))
    assert maxerr(na1d(q, k, v, 1, impl=impl), v) <= 1e-12


def test_dilation_is_attention_on_each_residue_subsequence():
    q, k, v = qkv((1, 23, 2, 4))
    out = na1d(q, k, v, 3, dilation=4)
    for g in range(4):
        sub = na1d(q[:, g::4], k[:, g::4], v[:, g::4], 3, impl="reference")
        assert maxerr(out[:, g::4], sub) <= 1e-10


def test_explicit_scale_and_float32_float16():
    q, k, v = qkv((2, 50, 2, 16), dtype=torch.float32)
    ref = na1d(q.double(), k.double(), v.double(), 7, scale=0.3, impl="reference")
    for impl in ("naive", "gemm", "torch"):
        out = na1d(q, k, v, 7, scale=0.3, impl=impl)
        assert out.dtype == torch.float32
        assert maxerr(out.double(), ref) / ref.abs().max().item() <= 1e-4
    out16 = na1d(q.half(), k.half(), v.half(), 7, scale=0.3)
    assert out16.dtype == torch.float16
    assert maxerr(out16.double(), ref) <= 1e-2


@pytest.mark.parametrize("impl", ["gemm", "torch"])
def test_tiled_forms_in_small_chunks(impl):
    q, k, v = qkv((1, 70, 2, 4))
    ref = na1d(q, k, v, 9, 2, impl="reference")
    for chunk in (1, 100, 10 ** 9):              # one tile per chunk ... everything in one chunk
        assert maxerr(na1d(q, k, v, 9, 2, impl=impl, tile_shape=4, chunk_scores=chunk), ref) <= 1e-10
    with pytest.raises(ValueError, match="chunk_scores must be a positive int"):
        na1d(q, k, v, 9, impl=impl, chunk_scores=0)


def test_gemm_form_stores_the_n_by_k_weights_and_the_blocked_form_does_not():
    from reprobook.bench.neighborhood import track_memory

    b, n, h, kk = 1, 2048, 2, 31
    q, k, v = qkv((b, n, h, 8), dtype=torch.float32)
    weights = b * h * n * kk * 4
    gemm = track_memory(na1d, q, k, v, kk, impl="gemm", chunk_scores=1 << 12)
    blocked = track_memory(na1d, q, k, v, kk, impl="torch", chunk_scores=1 << 12)
    assert gemm["largest"] >= weights                 # the attention tensor, written in full
    assert blocked["peak"] - blocked["result_bytes"] < weights / 4


def test_blocked_memory_is_flat_only_because_of_chunking():
    from reprobook.bench.neighborhood import track_memory

    def working(n, chunk):
        q, k, v = qkv((1, n, 1, 8), dtype=torch.float32)
        m = track_memory(na1d, q, k, v, 15, impl="torch", chunk_scores=chunk)
        return m["peak"] - m["result_bytes"]

    # chunked: flat up to the tile descriptors (four ints per tile, O(n / T))
    assert working(4096, 1 << 12) <= 1.1 * working(2048, 1 << 12)
    assert working(4096, 10 ** 9) > 1.8 * working(2048, 10 ** 9)   # one chunk: grows with n


def test_non_contiguous_inputs_and_batched_output():
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in qkv((3, 21, 2, 4)))
    assert not q.is_contiguous()
    ref = na1d(q.contiguous(), k.contiguous(), v.contiguous(), 5, 2, impl="reference")
    for impl in ("naive", "gemm", "torch"):
        assert maxerr(na1d(q, k, v, 5, 2, impl=impl), ref) <= 1e-10


def test_tile_shape_is_checked():
    q, k, v = qkv((1, 12, 1, 2))
    with pytest.raises(ValueError, match="tile_shape entries must be >= 1"):
        na1d(q, k, v, 3, tile_shape=0)
    with pytest.raises(ValueError, match="powers of two"):
        na1d(q.float(), k.float(), v.float(), 3, impl="triton", tile_shape=3)


# --------------------------------------------------------------------------- equivalence, 2-D
CASES_2D = [  # (X, Y, kernel, dilation, causal)
    (8, 10, (3, 5), (1, 2), (False, False)),
    (9, 11, (2, 3), (3, 1), (True, False)),
    (7, 10, (7, 10), 1, False),
    (8, 11, (4, 4), (2, 2), (False, True)),
    (12, 6, 3, 1, True),
]


@pytest.mark.parametrize("impl", ["naive", "gemm", "torch"])
@pytest.mark.parametrize("X,Y,k,d,c", CASES_2D)
def test_2d_forms_equal_reference_float64(impl, X, Y, k, d, c):
    q, kk, v = qkv((2, X, Y, 2, 5), dv=3)
    ref = na2d(q, kk, v, k, d, c, impl="reference")
    assert maxerr(na2d(q, kk, v, k, d, c, impl=impl), ref) <= 1e-10
    if impl in ("gemm", "torch"):
        assert maxerr(na2d(q, kk, v, k, d, c, impl=impl, tile_shape=(3, 2)), ref) <= 1e-10


def test_2d_full_kernel_is_full_attention():
    q, k, v = qkv((1, 5, 6, 2, 8))
    flat = [t.reshape(1, 30, 2, 8).transpose(1, 2) for t in (q, k, v)]
    sdpa = F.scaled_dot_product_attention(*flat).transpose(1, 2).reshape(1, 5, 6, 2, 8)
    assert maxerr(na2d(q, k, v, (5, 6)), sdpa) <= 1e-10


def test_2d_separable_case_matches_1d():
    # kernel 1 on the first axis: every row is an independent 1-D problem
    q, k, v = qkv((1, 4, 15, 2, 3))
    out = na2d(q, k, v, (1, 5), (1, 2), (False, True))
    ref = na1d(q.reshape(4, 15, 2, 3), k.reshape(4, 15, 2, 3), v.reshape(4, 15, 2, 3), 5, 2, True)
    assert maxerr(out, ref.reshape(1, 4, 15, 2, 3)) <= 1e-10


# --------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("impl", ["naive", "gemm", "torch"])
@pytest.mark.parametrize("dims", [1, 2])
def test_gradients_equal_reference(impl, dims):
    if dims == 1:
        shape, fn, args = (2, 19, 2, 6), na1d, (4, 2, True)
    else:
        shape, fn, args = (1, 7, 9, 2, 5), na2d, ((3, 4), (2, 1), (False, True))
    grads = {}
    for form in ("reference", impl):
        q, k, v = (t.requires_grad_() for t in qkv(shape, seed=3))
        out = fn(q, k, v, *args, impl=form)
        (out * rand(*out.shape, seed=9)).sum().backward()
        grads[form] = (q.grad, k.grad, v.grad)
    for a, b in zip(grads["reference"], grads[impl]):
        assert maxerr(a, b) <= 1e-10


# --------------------------------------------------------------------------- Triton (interpreter)
TRITON_1D = [(37, 5, 1, False), (33, 4, 2, False), (24, 6, 2, True), (16, 16, 1, False)]


@pytest.mark.parametrize("L,k,d,c", TRITON_1D)
def test_triton_1d(L, k, d, c):
    q, kk, v = qkv((1, L, 2, 12), dv=10, dtype=torch.float32)
    ref = na1d(q.double(), kk.double(), v.double(), k, d, c, impl="reference")
    out = na1d(q, kk, v, k, d, c, impl="triton")
    assert out.shape == (1, L, 2, 10) and out.dtype == torch.float32
    assert maxerr(out.double(), ref) / ref.abs().max().item() <= 1e-4


def test_triton_1d_float64():
    q, k, v = qkv((1, 29, 1, 8))
    ref = na1d(q, k, v, 7, 3, False, impl="reference")
    assert maxerr(na1d(q, k, v, 7, 3, False, impl="triton"), ref) <= 1e-10


@pytest.mark.parametrize("X,Y,k,d,c", [(6, 9, (3, 4), (1, 2), (False, True)),
                                        (7, 5, (2, 3), (3, 1), (True, False))])
def test_triton_2d(X, Y, k, d, c):
    q, kk, v = qkv((1, X, Y, 1, 6), dtype=torch.float32)
    ref = na2d(q.double(), kk.double(), v.double(), k, d, c, impl="reference")
    out = na2d(q, kk, v, k, d, c, impl="triton")
    assert maxerr(out.double(), ref) / ref.abs().max().item() <= 1e-4


# --------------------------------------------------------------------------- planted bugs
@pytest.mark.parametrize("impl", ["naive", "gemm", "torch", "triton"])
def test_no_border_shift_breaks_non_causal_windows_of_every_fast_form(impl):
    dt = torch.float32 if impl == "triton" else torch.float64
    q, k, v = qkv((1, 40, 2, 8), dtype=dt)
    ref = na1d(q.double(), k.double(), v.double(), 7, 2, impl="reference")
    ref_causal = na1d(q.double(), k.double(), v.double(), 7, 2, True, impl="reference")
    mask = neighborhood_mask(40, 7, 2)
    with planted_bug("no-border-shift"):
        assert torch.equal(neighborhood_mask(40, 7, 2), mask)      # the reference is untouched
        assert maxerr(na1d(q, k, v, 7, 2, impl=impl).double(), ref) > 0.1
        assert maxerr(na1d(q, k, v, 7, 2, True, impl=impl).double(), ref_causal) <= 1e-5
    assert maxerr(na1d(q, k, v, 7, 2, impl=impl).double(), ref) <= 1e-5


@pytest.mark.parametrize("impl", ["gemm", "torch", "triton"])
def test_no_halo_keeps_the_output_exact(impl):
    dt = torch.float32 if impl == "triton" else torch.float64
    q, k, v = qkv((1, 9, 11, 2, 8), dtype=dt)
    ref = na2d(q.double(), k.double(), v.double(), (3, 5), (2, 1), (False, True), impl="reference")
    with planted_bug("no-halo"):
        out = na2d(q, k, v, (3, 5), (2, 1), (False, True), impl=impl, tile_shape=(2, 4))
    assert maxerr(out.double(), ref) <= 1e-5


def test_no_halo_makes_the_blocked_form_quadratic():
    from reprobook.bench.neighborhood import track_memory

    q, k, v = qkv((1, 512, 1, 8), dtype=torch.float32)
    m = track_memory(na1d, q, k, v, 7, impl="torch", tile_shape=16)
    with planted_bug("no-halo"):
        m_bug = track_memory(na1d, q, k, v, 7, impl="torch", tile_shape=16)
    assert m_bug["largest"] > 10 * m["largest"]


def test_fused_working_set_does_not_depend_on_length():
    sets = []
    for n in (32, 96):
        q, k, v = qkv((1, n, 1, 20), dv=12, dtype=torch.float32)
        sets.append(fused_working_set(q, k, v, 7))
    assert sets[0] == sets[1]
    w = sets[0]
    assert (w["head_dim"], w["value_dim"]) == (32, 16)
    m, nk = w["queries"], w["keys"]
    assert w["elements"] == m * 32 + nk * (32 + 16) + m * nk + m * 16 + 2 * m
    assert w["bytes"] == 4 * w["elements"] and w["registers"] is None     # interpreted
    q2, k2, v2 = qkv((1, 6, 9, 1, 8), dtype=torch.float32)
    assert fused_working_set(q2, k2, v2, (3, 4))["queries"] >= 1
    with pytest.raises(ValueError, match="query must be"):
        fused_working_set(q[0], k[0], v[0], 3)


@pytest.mark.parametrize("impl", ["naive", "gemm", "torch"])
def test_half_inputs_on_cpu_compute_in_float32(impl):
    q, k, v = qkv((1, 40, 2, 16), dtype=torch.float16)
    ref = na1d(q.double(), k.double(), v.double(), 7, impl="reference")
    out = na1d(q, k, v, 7, impl=impl)
    assert out.dtype == torch.float16 and maxerr(out.double(), ref) <= 2e-3


def test_planted_bug_names_and_nesting():
    assert PLANTED_BUGS == ("no-border-shift", "no-halo")
    with pytest.raises(ValueError, match="unknown bug"):
        with planted_bug("off-by-one"):
            pass
    with pytest.raises(RuntimeError, match="inside"):
        with planted_bug("no-halo"), planted_bug("no-border-shift"):
            pass
    q, k, v = qkv((1, 12, 1, 4))
    assert maxerr(na1d(q, k, v, 5), na1d(q, k, v, 5, impl="reference")) <= 1e-12


# --------------------------------------------------------------------------- errors
def test_errors_name_the_argument():
    q, k, v = qkv((1, 10, 2, 4))
    with pytest.raises(ValueError, match="kernel_size 11 exceeds the input length 10"):
        na1d(q, k, v, 11)
    with pytest.raises(ValueError, match="kernel_size must be >= 1"):
        na1d(q, k, v, 0)
    with pytest.raises(ValueError, match="kernel_size \\* dilation"):
        na1d(q, k, v, 4, dilation=3)
    with pytest.raises(ValueError, match="dilation must be >= 1"):
        na1d(q, k, v, 3, dilation=0)
    with pytest.raises(ValueError, match="query must have 4 dimensions"):
        na1d(q[0], k[0], v[0], 3)
    with pytest.raises(ValueError, match="query must have 5 dimensions"):
        na2d(q, k, v, 3)
    with pytest.raises(ValueError, match="key must have the shape of query"):
        na1d(q, k[:, :9], v, 3)
    with pytest.raises(ValueError, match="value must match query"):
        na1d(q, k, v[:, :, :1], 3)
    with pytest.raises(TypeError, match="share a dtype"):
        na1d(q, k.float(), v, 3)
    with pytest.raises(ValueError, match="impl must be one of"):
        na1d(q, k, v, 3, impl="cuda")
    with pytest.raises(TypeError, match="kernel_size must be an int"):
        na1d(q, k, v, 3.0)
    with pytest.raises(ValueError, match="kernel_size must be one value or a tuple of 2"):
        na2d(*qkv((1, 5, 5, 1, 2)), (3, 3, 3))
    with pytest.raises(TypeError, match="is_causal must be a bool"):
        na1d(q, k, v, 3, is_causal=1)
    with pytest.raises(TypeError, match="query must be a torch.Tensor"):
        na1d(q.numpy(), k, v, 3)
    with pytest.raises(ValueError, match="on axis 1"):
        na2d(*qkv((1, 8, 4, 1, 2)), (3, 5))


# --------------------------------------------------------------------------- anchor: NATTEN
def _natten():
    try:
        import natten
    except Exception as e:  # pragma: no cover - depends on the environment
        pytest.skip(f"natten is not importable ({type(e).__name__}: {e})")
    return natten


@pytest.mark.anchor
def test_anchor_natten_na1d_na2d():
    natten = _natten()
    cases_1d = [(40, 7, 1, False), (40, 4, 3, False), (40, 5, 2, True)]
    for L, k, d, c in cases_1d:
        q, kk, v = qkv((2, L, 2, 16), dtype=torch.float32)
        theirs = natten.na1d(q, kk, v, kernel_size=k, dilation=d, is_causal=c, backend="flex-fna")
        ours = na1d(q, kk, v, k, d, c)
        assert maxerr(ours, theirs) <= 1e-4, (L, k, d, c)
    q, kk, v = qkv((1, 9, 11, 2, 16), dtype=torch.float32)
    for k, d, c in [((3, 4), (3, 2), (False, True))]:
        theirs = natten.na2d(q, kk, v, kernel_size=k, dilation=d, is_causal=c, backend="flex-fna")
        assert maxerr(na2d(q, kk, v, k, d, c), theirs) <= 1e-4, (k, d, c)
