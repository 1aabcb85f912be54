"""Gated linear attention: chunked torch form and Triton kernel against the recurrence."""

import pytest
import torch
import torch.nn.functional as F

from reprobook.kernels.gla import chunk_gla, fused_recurrent_gla


def rel(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def make(B, T, H, K, V, dtype, norm=1.0, gk=True, gv=False, h0=True, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype)

    q, k, v = r(B, T, H, K), r(B, T, H, K), r(B, T, H, V)
    g_k = F.logsigmoid(r(B, T, H, K)) / norm if gk else None
    g_v = F.logsigmoid(r(B, T, H, V)) / norm if gv else None
    s0 = r(B, H, K, V) if h0 else None
    return q, k, v, g_k, g_v, s0


CASES = [  # (T, K, V, chunk)
    (1, 5, 3, 64),
    (37, 7, 33, 8),
    (100, 16, 16, 64),
    (64, 10, 6, 16),
]


@pytest.mark.parametrize("T,K,V,C", CASES)
@pytest.mark.parametrize("gates", ["k", "v", "kv", "none"])
def test_chunked_equals_recurrent_float64(T, K, V, C, gates):
    q, k, v, gk, gv, h0 = make(2, T, 2, K, V, torch.float64, gk="k" in gates, gv="v" in gates)
    ref, s_ref = fused_recurrent_gla(q, k, v, gk, gv, initial_state=h0, output_final_state=True)
    out, s_out = fused_recurrent_gla(q, k, v, gk, gv, initial_state=h0, output_final_state=True, impl="torch")
    assert rel(out, ref) <= 1e-10
    assert rel(s_out, s_ref) <= 1e-10
    if gv is None and gk is not None:  # chunk_gla with an explicit chunk size is the same computation
        out2, s2 = chunk_gla(q, k, v, gk, initial_state=h0, output_final_state=True, chunk_size=C)
        assert rel(out2, ref) <= 1e-10 and rel(s2, s_ref) <= 1e-10


@pytest.mark.parametrize("norm", [0.05, 1.0, 20.0])
def test_float32_and_strong_gates_stay_finite(norm):
    # with norm = 0.05 the cumulative log-gate inside a 64-chunk reaches about -1e3: exp(-b) would
    # overflow float32, the secondary-chunk form must not
    q, k, v, gk, gv, h0 = make(1, 128, 2, 12, 9, torch.float64, norm=norm, gv=True)
    ref, s_ref = fused_recurrent_gla(q, k, v, gk, gv, initial_state=h0, output_final_state=True)
    f32 = [None if x is None else x.float() for x in (q, k, v, gk, gv, h0)]
    out, s_out = fused_recurrent_gla(*f32[:5], initial_state=f32[5], output_final_state=True, impl="torch")
    assert torch.isfinite(out).all() and out.dtype == torch.float32
    assert rel(out.double(), ref) <= 1e-4
    assert rel(s_out.double(), s_ref) <= 1e-4


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
def test_gradients_match_reference(dtype, tol):
    q, k, v, gk, gv, h0 = make(2, 45, 2, 9, 7, torch.float64, norm=0.5, gv=True)
    leaves = [x.to(dtype).requires_grad_() for x in (q, k, v, gk, gv, h0)]
    do = torch.randn(2, 45, 2, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    dS = torch.randn(2, 2, 9, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(4))

    def grads(impl, xs):
        o, s = fused_recurrent_gla(*xs[:5], initial_state=xs[5], output_final_state=True, impl=impl)
        loss = (o.double() * do).sum() + (s.double() * dS).sum()
        return torch.autograd.grad(loss, xs)

    ref = grads("reference", [x.detach().double().requires_grad_() for x in leaves])
    got = grads("torch", leaves)
    for name, a, b in zip(["q", "k", "v", "gk", "gv", "h0"], got, ref):
        assert rel(a.double(), b) <= tol, name


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
@pytest.mark.parametrize("T,K,V,gates", [(1, 5, 3, "k"), (40, 7, 20, "kv"), (33, 16, 16, "v"), (17, 8, 8, "none")])
def test_triton_matches_reference(dtype, tol, T, K, V, gates):
    q, k, v, gk, gv, h0 = make(1, T, 2, K, V, dtype, gk="k" in gates, gv="v" in gates)
    ref, s_ref = fused_recurrent_gla(*(x.double() if x is not None else None for x in (q, k, v, gk, gv)),
                                     initial_state=h0.double(), output_final_state=True)
    out, s_out = fused_recurrent_gla(q, k, v, gk, gv, initial_state=h0, output_final_state=True, impl="triton")
    assert out.dtype == dtype
    assert rel(out.double(), ref) <= tol
    assert rel(s_out.double(), s_ref) <= tol


def test_no_initial_state_and_no_final_state():
    q, k, v, gk, _, _ = make(1, 20, 1, 4, 4, torch.float64, h0=False)
    o, s = chunk_gla(q, k, v, gk)
    assert s is None and o.shape == v.shape
    o_ref, _ = chunk_gla(q, k, v, gk, impl="reference")
    assert rel(o, o_ref) <= 1e-10


def test_half_precision_input_returns_input_dtype():
    q, k, v, gk, _, h0 = make(1, 30, 2, 8, 8, torch.float32)
    o, s = chunk_gla(*(x.bfloat16() for x in (q, k, v, gk)), initial_state=h0, output_final_state=True)
    ref, _ = chunk_gla(q, k, v, gk, initial_state=h0, impl="reference")
    assert o.dtype == torch.bfloat16 and s.dtype == torch.float32
    assert rel(o.float(), ref) <= 3e-2


def test_bad_inputs_name_the_argument():
    q, k, v, gk, _, h0 = make(1, 8, 1, 4, 4, torch.float32)
    with pytest.raises(ValueError, match="impl"):
        chunk_gla(q, k, v, gk, impl="cuda")
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_gla(q, k, v, gk, chunk_size=48)
    with pytest.raises(ValueError, match="^k "):
        chunk_gla(q, k[:, :4], v, gk)
    with pytest.raises(ValueError, match="^g "):
        chunk_gla(q, k, v, gk[..., :3])
    with pytest.raises(ValueError, match="initial_state"):
        chunk_gla(q, k, v, gk, initial_state=h0[..., :2])
    with pytest.raises(TypeError, match="^q "):
        chunk_gla(q.long(), k, v, gk)
    with pytest.raises(ValueError, match="scale"):
        chunk_gla(q, k, v, gk, scale="big")
    with pytest.raises(NotImplementedError, match="forward-only"):
        chunk_gla(q.requires_grad_(), k, v, gk, impl="triton")


@pytest.mark.anchor
def test_anchor_fla_naive_gla():
    naive = pytest.importorskip("fla.ops.gla.naive", reason="flash-linear-attention is not installed")
    q, k, v, gk, _, h0 = make(2, 50, 2, 12, 10, torch.float32, norm=0.5)
    o_fla, s_fla = naive.naive_recurrent_gla(q, k, v, gk, initial_state=h0, output_final_state=True)
    for impl in ("reference", "torch"):
        o, s = chunk_gla(q, k, v, gk, initial_state=h0, output_final_state=True, impl=impl)
        assert rel(o, o_fla) <= 1e-5 and rel(s, s_fla) <= 1e-5


def test_exclusive_gate_off_by_one_is_detected(monkeypatch):
    # the chapter's planted bug: an exclusive cumulative gate inside each chunk
    import reprobook.kernels.gla as gla_mod

    q, k, v, gk, _, h0 = make(1, 40, 1, 6, 5, torch.float64)
    ref, _ = chunk_gla(q, k, v, gk, initial_state=h0, impl="reference")
    monkeypatch.setattr(gla_mod, "_chunk_cumsum", lambda g: g.cumsum(-2) - g)
    bad, _ = chunk_gla(q, k, v, gk, initial_state=h0, chunk_size=16)
    assert rel(bad, ref) > 1e-2


@pytest.mark.parametrize("gates", ["k", "v", "kv"])
def test_factorised_and_log_space_paths_agree(monkeypatch, gates):
    """Mild gates take the factorised intra-chunk product; with it switched off the log-space
    sub-chunk path runs instead. Both must give the recurrence's outputs and gradients."""
    import reprobook.kernels.gla as gla

    q, k, v, gk, gv, h0 = make(1, 70, 2, 8, 6, torch.float64, norm=8.0, gk="k" in gates, gv="v" in gates)
    g = gk if gk is not None else gv
    assert g.cumsum(1).abs().max() < gla.FACTOR_LIMIT[torch.float64]  # mild: every chunk factorisable
    results = []
    for limits in (dict(gla.FACTOR_LIMIT), {}):
        monkeypatch.setattr(gla, "FACTOR_LIMIT", limits)
        leaves = [x.clone().requires_grad_() if x is not None else None for x in (q, k, v, gk, gv, h0)]
        o, s = fused_recurrent_gla(*leaves[:5], initial_state=leaves[5], output_final_state=True, impl="torch")
        grads = torch.autograd.grad(o.sum() + s.square().sum(), [x for x in leaves if x is not None])
        results.append((o, s, *grads))
    for a, b in zip(*results):
        assert rel(a, b) < 1e-12


def test_strong_gates_are_not_factorised():
    import reprobook.kernels.gla as gla

    *_, gk, _, _ = make(1, 64, 1, 8, 8, torch.float32, norm=0.05)   # log-gates around -16 a token
    assert not gla._factorisable(gk.cumsum(1).transpose(1, 2))          # [B, H, T, K], one chunk
