"""Gated slot attention: two-pass chunked form and Triton kernel against the one-loop recurrence."""

import pytest
import torch
import torch.nn.functional as F

from reprobook.kernels.gla import gla_chunked
from reprobook.kernels.gsa import abc_gates, chunk_gsa, fused_recurrent_gsa, gsa_two_pass


def rel(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def make(B, T, H, K, V, M, dtype, norm=1.0, abc=False, h0=True, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype)

    q, k, v = r(B, T, H, K), r(B, T, H, K), r(B, T, H, V)
    g = F.logsigmoid(r(B, T, H, M)) / norm
    s = r(B, T, H, M) if abc else 1 - g.exp()  # the layer's tie s = 1 - alpha
    state = (r(B, H, K, M), r(B, H, M, V)) if h0 else None
    return q, k, v, s, (None if abc else g), state


CASES = [  # (T, K, V, M, chunk)
    (1, 5, 3, 4, 64),
    (7, 10, 6, 5, 16),
    (63, 16, 16, 8, 16),
    (100, 9, 20, 7, 64),
]


@pytest.mark.parametrize("T,K,V,M,C", CASES)
@pytest.mark.parametrize("abc", [False, True])
def test_two_pass_equals_recurrent_float64(T, K, V, M, C, abc):
    q, k, v, s, g, h0 = make(2, T, 2, K, V, M, torch.float64, abc=abc)
    ref, (hk_r, hv_r) = fused_recurrent_gsa(q, k, v, s, g, initial_state=h0, output_final_state=True)
    out, (hk, hv) = chunk_gsa(q, k, v, s, g, initial_state=h0, output_final_state=True, chunk_size=C)
    assert hk.shape == (2, 2, K, M) and hv.shape == (2, 2, M, V)
    assert rel(out, ref) <= 1e-10
    assert rel(hk, hk_r) <= 1e-10 and rel(hv, hv_r) <= 1e-10


@pytest.mark.parametrize("norm", [0.05, 1.0, 20.0])
def test_float32_against_float64_reference(norm):
    q, k, v, s, g, h0 = make(2, 90, 2, 12, 10, 6, torch.float64, norm=norm)
    ref, (hk_r, hv_r) = fused_recurrent_gsa(q, k, v, s, g, initial_state=h0, output_final_state=True)
    f32 = [x.float() for x in (q, k, v, s, g)]
    out, (hk, hv) = chunk_gsa(*f32, initial_state=tuple(x.float() for x in h0), output_final_state=True)
    assert torch.isfinite(out).all()
    assert rel(out.double(), ref) <= 1e-4
    assert rel(hk.double(), hk_r) <= 1e-4 and rel(hv.double(), hv_r) <= 1e-4


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
@pytest.mark.parametrize("abc", [False, True])
def test_gradients_match_reference(dtype, tol, abc):
    T, K, V, M = 40, 9, 7, 5
    q, k, v, s, g, (hk0, hv0) = make(2, T, 2, K, V, M, torch.float64, abc=abc)
    if g is None:
        g = torch.zeros_like(s)  # unused placeholder so both branches have the same leaves
    gen = torch.Generator().manual_seed(5)
    do = torch.randn(2, T, 2, V, dtype=torch.float64, generator=gen)
    dhk = torch.randn(2, 2, K, M, dtype=torch.float64, generator=gen)
    dhv = torch.randn(2, 2, M, V, dtype=torch.float64, generator=gen)

    def grads(impl, xs):
        o, (hk, hv) = chunk_gsa(*xs[:4], None if abc else xs[4], initial_state=(xs[5], xs[6]),
                                output_final_state=True, chunk_size=16, impl=impl)
        loss = (o.double() * do).sum() + (hk.double() * dhk).sum() + (hv.double() * dhv).sum()
        return torch.autograd.grad(loss, xs, allow_unused=True)

    leaves = [x.to(dtype).requires_grad_() for x in (q, k, v, s, g, hk0, hv0)]
    got = grads("torch", leaves)
    ref = grads("reference", [x.detach().double().requires_grad_() for x in leaves])
    for name, a, b in zip(["q", "k", "v", "s", "g", "hk0", "hv0"], got, ref):
        if b is None:
            assert a is None, name
            continue
        # absolute error relative to the largest gradient entry (ds can be ~0 at T=1 in ABC mode)
        assert rel(a.double(), b) <= tol, name


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
@pytest.mark.parametrize("T,K,V,M,abc", [(1, 5, 3, 4, False), (37, 7, 20, 6, False), (20, 16, 8, 16, True)])
def test_triton_matches_reference(dtype, tol, T, K, V, M, abc):
    q, k, v, s, g, h0 = make(1, T, 2, K, V, M, dtype, abc=abc)
    ref, (hk_r, hv_r) = fused_recurrent_gsa(q, k, v, s, g, initial_state=h0, output_final_state=True)
    out, (hk, hv) = chunk_gsa(q, k, v, s, g, initial_state=h0, output_final_state=True, impl="triton")
    assert rel(out, ref) <= tol
    assert rel(hk, hk_r) <= tol and rel(hv, hv_r) <= tol


def test_state_carries_across_calls():
    # running the second half from the first half's final state equals one run over everything
    q, k, v, s, g, h0 = make(1, 50, 2, 8, 8, 4, torch.float64)
    full, (hk_f, hv_f) = chunk_gsa(q, k, v, s, g, initial_state=h0, output_final_state=True)
    a = slice(0, 23)
    b = slice(23, 50)
    o1, st = chunk_gsa(q[:, a], k[:, a], v[:, a], s[:, a], g[:, a], initial_state=h0, output_final_state=True)
    o2, (hk, hv) = chunk_gsa(q[:, b], k[:, b], v[:, b], s[:, b], g[:, b], initial_state=st,
                             output_final_state=True)
    assert rel(torch.cat([o1, o2], 1), full) <= 1e-10
    assert rel(hk, hk_f) <= 1e-10 and rel(hv, hv_f) <= 1e-10


def test_state_size_is_two_slot_memories():
    K, V, M = 32, 32, 16
    q, k, v, s, g, _ = make(1, 5, 3, K, V, M, torch.float32, h0=False)
    _, (hk, hv) = chunk_gsa(q, k, v, s, g, output_final_state=True)
    assert hk[0, 0].numel() + hv[0, 0].numel() == K * M + M * V == 1024 == K * V


def test_abc_gates_are_a_running_softmax():
    s = torch.randn(1, 1, 9, 3, dtype=torch.float64)
    w, g = abc_gates(s, dim=2)
    # after t steps, the decayed writes form softmax(s_{<=t}) along time
    t = 6
    decayed = w[:, :, : t + 1] * torch.flip(torch.cumsum(torch.flip(
        torch.cat([g[:, :, 1: t + 1], torch.zeros_like(g[:, :, :1])], 2), [2]), 2), [2]).exp()
    assert torch.allclose(decayed, s[:, :, : t + 1].softmax(2), atol=1e-12)
    assert (g <= 1e-12).all() and g[:, :, 0].abs().max() == 0


def test_dropping_the_softmax_is_detected():
    # the planted bug of the chapter: without the softmax the two passes no longer equal GSA
    q, k, v, s, g, h0 = make(1, 30, 1, 6, 6, 4, torch.float64)
    ref, _ = fused_recurrent_gsa(q, k, v, s, g)
    tr = [x.transpose(1, 2) for x in (q, k, v, s, g)]

    def gla(a, b, c, gk, gv, sc, s0):
        return gla_chunked(a, b, c, gk, gv, sc, s0, 16)

    bad, _ = gsa_two_pass(*tr, 6 ** -0.5, None, None, gla, softmax=False)
    assert rel(bad.transpose(1, 2), ref) > 1e-2


def test_bad_inputs_name_the_argument():
    q, k, v, s, g, h0 = make(1, 8, 1, 4, 4, 3, torch.float32)
    with pytest.raises(ValueError, match="^s "):
        chunk_gsa(q, k, v, s[:, :5], g)
    with pytest.raises(ValueError, match="^g "):
        chunk_gsa(q, k, v, s, g[..., :2])
    with pytest.raises(TypeError, match="initial_state"):
        chunk_gsa(q, k, v, s, g, initial_state=h0[0])
    with pytest.raises(ValueError, match=r"initial_state\[1\]"):
        chunk_gsa(q, k, v, s, g, initial_state=(h0[0], h0[1][..., :2]))
    with pytest.raises(ValueError, match="impl"):
        fused_recurrent_gsa(q, k, v, s, g, impl="fast")


@pytest.mark.anchor
@pytest.mark.parametrize("abc", [False, True])
def test_anchor_fla_naive_gsa(abc):
    naive = pytest.importorskip("fla.ops.gsa.naive", reason="flash-linear-attention is not installed")
    q, k, v, s, g, h0 = make(2, 45, 2, 10, 12, 6, torch.float32, norm=0.5, abc=abc)
    if abc:
        # fla's naive function needs g; feed it the ABC gates and writes computed independently
        w, g_abc = abc_gates(s.transpose(1, 2), dim=2)
        o_fla, (hk_f, hv_f) = naive.naive_recurrent_gsa(q, k, v, w.transpose(1, 2), g_abc.transpose(1, 2),
                                                         initial_state=h0, output_final_state=True)
    else:
        o_fla, (hk_f, hv_f) = naive.naive_recurrent_gsa(q, k, v, s, g, initial_state=h0, output_final_state=True)
    for impl in ("reference", "torch"):
        o, (hk, hv) = chunk_gsa(q, k, v, s, g, initial_state=h0, output_final_state=True, impl=impl)
        assert rel(o, o_fla) <= 1e-5
        assert rel(hk, hk_f) <= 1e-5 and rel(hv, hv_f) <= 1e-5
