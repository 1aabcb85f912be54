"""Selective scan: the chunked torch form and the Triton kernel against the recurrence."""

import pytest
import torch
import torch.nn.functional as F

import reprobook.kernels.selective_scan as ss
from reprobook.kernels.selective_scan import linear_scan, selective_scan


@pytest.fixture(params=["doubling", "sweep"])
def fast_path(request, monkeypatch):
    """Run a test through both inner paths of impl='chunked'."""
    monkeypatch.setattr(ss, "SWEEP_MIN_STEP_NUMEL", 10 ** 12 if request.param == "doubling" else 0)
    return request.param


def rel(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def make(Bsz, Dm, N, L, dtype, layout="variable", G=2, seed=0, strong=False):
    gen = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)

    u, delta, z = r(Bsz, Dm, L), r(Bsz, Dm, L), r(Bsz, Dm, L)
    # Mamba's A = -exp(A_log), A_log = log(1..N); "strong" makes exp(delta A) underflow often
    A = -torch.arange(1, N + 1, dtype=dtype).repeat(Dm, 1) * (30.0 if strong else 1.0)
    shape = {"variable": (Bsz, N, L), "grouped": (Bsz, G, N, L), "fixed": (Dm, N)}[layout]
    B, C = r(*shape), r(*shape)
    D, bias = r(Dm), r(Dm)
    return u, delta, A, B, C, D, z, bias


CASES = [  # (L, D, N, chunk, layout)
    (1, 3, 2, 64, "variable"),
    (37, 4, 5, 8, "variable"),
    (100, 6, 4, 16, "grouped"),
    (130, 5, 3, 64, "fixed"),
    (64, 2, 8, 4, "variable"),
]


@pytest.mark.parametrize("L,Dm,N,Cs,layout", CASES)
@pytest.mark.parametrize("extras", [True, False])
def test_chunked_equals_reference_float64(L, Dm, N, Cs, layout, extras, fast_path):
    u, delta, A, B, C, D, z, bias = make(2, Dm, N, L, torch.float64, layout)
    kw = dict(D=D, z=z, delta_bias=bias, delta_softplus=True) if extras else {}
    ref, h_ref = selective_scan(u, delta.abs(), A, B, C, return_last_state=True, impl="reference", **kw)
    out, h_out = selective_scan(u, delta.abs(), A, B, C, return_last_state=True, impl="chunked",
                                chunk_size=Cs, **kw)
    assert out.shape == (2, Dm, L) and h_out.shape == (2, Dm, N)
    assert rel(out, ref) <= 1e-12
    assert rel(h_out, h_ref) <= 1e-12


def test_reference_matches_hand_computed_step():
    # one channel, one state, two steps: h1 = dt1*B1*u1, h2 = e^{dt2 A} h1 + dt2 B2 u2
    u = torch.tensor([[[2.0, 3.0]]], dtype=torch.float64)
    dt = torch.tensor([[[0.5, 0.25]]], dtype=torch.float64)
    A = torch.tensor([[-2.0]], dtype=torch.float64)
    B = torch.tensor([[[1.0, 4.0]]], dtype=torch.float64)
    C = torch.tensor([[[1.0, 0.5]]], dtype=torch.float64)
    h1 = 0.5 * 1.0 * 2.0
    h2 = torch.exp(torch.tensor(-0.5)).item() * h1 + 0.25 * 4.0 * 3.0
    out = selective_scan(u, dt, A, B, C, impl="reference")
    assert torch.allclose(out[0, 0], torch.tensor([h1, 0.5 * h2], dtype=torch.float64), atol=1e-14)


@pytest.mark.parametrize("impl", ["reference", "chunked"])
def test_strong_decay_float32_stays_finite(impl):
    u, delta, A, B, C, D, z, bias = make(1, 4, 4, 200, torch.float64, strong=True)
    ref = selective_scan(u, delta, A, B, C, D, z, bias, True, impl="reference")
    out = selective_scan(*(x.float() for x in (u, delta, A, B, C, D, z, bias)), True, impl=impl)
    assert torch.isfinite(out).all() and out.dtype == torch.float32
    assert rel(out.double(), ref) <= 1e-5


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
def test_gradients_chunked_match_reference(dtype, tol, fast_path):
    u, delta, A, B, C, D, z, bias = make(2, 3, 4, 45, torch.float64, "grouped", G=3)
    gen = torch.Generator().manual_seed(5)
    dout = torch.randn(2, 3, 45, generator=gen, dtype=torch.float64)
    dlast = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64)

    def grads(impl, xs):
        out, last = selective_scan(*xs, delta_softplus=True, return_last_state=True, impl=impl,
                                   chunk_size=8)
        loss = (out.double() * dout).sum() + (last.double() * dlast).sum()
        return torch.autograd.grad(loss, xs)

    names = ["u", "delta", "A", "B", "C", "D", "z", "delta_bias"]
    xs = (u, delta, A, B, C, D, z, bias)
    ref = grads("reference", [x.clone().requires_grad_() for x in xs])
    got = grads("chunked", [x.to(dtype).requires_grad_() for x in xs])
    for name, a, b in zip(names, got, ref):
        assert rel(a.double(), b) <= tol, name


def test_linear_scan_signed_gates_and_initial_state(fast_path):
    gen = torch.Generator().manual_seed(1)
    a = torch.rand(3, 5, 77, generator=gen, dtype=torch.float64) * 2 - 1     # gates in [-1, 1]
    b = torch.randn(3, 5, 77, generator=gen, dtype=torch.float64)
    h0 = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    ref = linear_scan(a, b, h0, impl="reference")
    for cs in (1, 4, 16, 128):
        assert rel(linear_scan(a, b, h0, impl="chunked", chunk_size=cs), ref) <= 1e-12
    # parity with gate -1 on every '1': h_t = (-1)^{#ones} exactly
    bits = torch.randint(0, 2, (4, 1000), generator=gen)
    gate = 1.0 - 2.0 * bits.double()
    h = linear_scan(gate, torch.zeros_like(gate), torch.ones(4, dtype=torch.float64))
    assert torch.equal(h, (-1.0) ** bits.cumsum(-1).double())


@pytest.mark.parametrize("L,Dm,N,layout,extras", [
    (1, 3, 2, "variable", True),
    (23, 20, 5, "grouped", True),
    (16, 4, 4, "fixed", False),
    (31, 7, 3, "variable", False),
])
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_triton_matches_reference(L, Dm, N, layout, extras, dtype, tol):
    pytest.importorskip("triton")
    u, delta, A, B, C, D, z, bias = make(2, Dm, N, L, torch.float64, layout, G=4)
    kw = dict(D=D, z=z, delta_bias=bias, delta_softplus=True) if extras else {}
    ref, h_ref = selective_scan(u, delta.abs(), A, B, C, return_last_state=True, impl="reference", **kw)
    cast = {k: v.to(dtype) for k, v in kw.items() if isinstance(v, torch.Tensor)}
    kw.update(cast)
    out, h_out = selective_scan(*(x.to(dtype) for x in (u, delta.abs(), A, B, C)),
                                return_last_state=True, impl="triton", **kw)
    assert out.dtype == dtype
    assert rel(out.double(), ref) <= tol
    assert rel(h_out.double(), h_ref) <= tol


def test_triton_is_forward_only():
    pytest.importorskip("triton")
    u, delta, A, B, C, D, z, bias = make(1, 2, 2, 4, torch.float32)
    with pytest.raises(NotImplementedError, match="forward-only"):
        selective_scan(u.requires_grad_(), delta, A, B, C, impl="triton")


def test_bad_inputs_raise_clear_errors():
    u, delta, A, B, C, D, z, bias = make(2, 4, 3, 10, torch.float32)
    with pytest.raises(ValueError, match="u must have 3 dimensions"):
        selective_scan(u[0], delta, A, B, C)
    with pytest.raises(ValueError, match="delta must have shape"):
        selective_scan(u, delta[:, :, :5], A, B, C)
    with pytest.raises(ValueError, match="A must have shape"):
        selective_scan(u, delta, A[:3], B, C)
    with pytest.raises(ValueError, match="B must have shape"):
        selective_scan(u, delta, A, B[:, :2], C)
    with pytest.raises(ValueError, match="groups"):
        selective_scan(u, delta, A, B[:, None].expand(-1, 3, -1, -1), C)
    with pytest.raises(ValueError, match="C must be"):
        selective_scan(u, delta, A, B, C[None, None])
    with pytest.raises(ValueError, match="D must have shape"):
        selective_scan(u, delta, A, B, C, D=D[:2])
    with pytest.raises(ValueError, match="z must have shape"):
        selective_scan(u, delta, A, B, C, z=z[:1])
    with pytest.raises(ValueError, match="impl must be one of"):
        selective_scan(u, delta, A, B, C, impl="cuda")
    with pytest.raises(ValueError, match="chunk_size"):
        selective_scan(u, delta, A, B, C, chunk_size=12)
    with pytest.raises(TypeError, match="complex"):
        selective_scan(u, delta, A.to(torch.complex64), B, C)
    with pytest.raises(ValueError, match="b must have shape"):
        linear_scan(u, delta[..., :3])


def test_linear_scan_gradients_match_reference(fast_path):
    gen = torch.Generator().manual_seed(7)
    a = (torch.rand(2, 3, 50, generator=gen, dtype=torch.float64) * 2 - 1).requires_grad_()
    b = torch.randn(2, 3, 50, generator=gen, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(2, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 3, 50, generator=gen, dtype=torch.float64)
    ref = torch.autograd.grad((linear_scan(a, b, h0, impl="reference") * w).sum(), (a, b, h0))
    got = torch.autograd.grad((linear_scan(a, b, h0, chunk_size=8) * w).sum(), (a, b, h0))
    for x, y in zip(got, ref):
        assert rel(x, y) <= 1e-12
    assert torch.autograd.gradcheck(lambda a, b, h0: linear_scan(a, b, h0, chunk_size=4),
                                    (a[:1, :1, :9], b[:1, :1, :9], h0[:1, :1]))


@pytest.mark.anchor
def test_matches_mambapy_parallel_scan():
    """Side by side with the pure-PyTorch Mamba of the ``mambapy`` package (its ``pscan``)."""
    pscan = pytest.importorskip("mambapy.pscan").pscan
    u, delta, A, B, C, D, z, bias = make(2, 6, 4, 32, torch.float32)
    dt = F.softplus(delta)
    # mambapy's layout is [B, L, ED(, N)]: h_t = exp(dt A) h_{t-1} + dt B_t x_t, y = h C_t + D x
    dA = torch.exp(dt.transpose(1, 2)[..., None] * A)
    BX = dt.transpose(1, 2)[..., None] * B.transpose(1, 2)[:, :, None, :] * u.transpose(1, 2)[..., None]
    hs = pscan(dA, BX)
    y_anchor = ((hs @ C.transpose(1, 2)[..., None]).squeeze(-1) + D * u.transpose(1, 2)).transpose(1, 2)
    y = selective_scan(u, delta, A, B, C, D, delta_softplus=True)
    assert rel(y.double(), y_anchor.double()) <= 1e-5
