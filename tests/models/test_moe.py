"""SMoE and MH-MoE: against naive per-unit references, dispatch modes, the h = 1 identity,
balance loss, FLOPs and the activation statistics."""
import math

import pytest
import torch
import torch.nn.functional as F

from reprobook.bench.flops import flops_per_token
from reprobook.models.moe import (MultiHeadMoE, SparseMoE, activation_ratio, experts_per_token,
                                  load_balancing_loss, load_entropy, moe_layers, routing_counts,
                                  set_dispatch)
from reprobook.models.tiny_transformer import TinyTransformer


def naive_smoe(moe: SparseMoE, units: torch.Tensor) -> torch.Tensor:
    """One unit at a time: softmax router, top-k, (renormalised) gates, expert MLPs."""
    out = []
    for u in units:
        p = torch.softmax(moe.router.weight @ u, -1)
        g, idx = p.topk(moe.top_k)
        if moe.top_k > 1:
            g = g / g.sum()
        out.append(sum(gi * (F.gelu(u @ moe.w_in[e]) @ moe.w_out[e]) for gi, e in zip(g, idx)))
    return torch.stack(out)


def fresh(cls, *args, seed=0, **kw):
    torch.manual_seed(seed)
    m = cls(*args, init_std=0.5, **kw).double()
    for p in m.parameters():          # non-zero biases too, so an identity test means something
        if p.ndim == 1:
            torch.nn.init.normal_(p, std=0.3)
    return m


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("dispatch", ["padded", "loop"])
def test_smoe_matches_a_naive_reference(k, dispatch):
    moe = fresh(SparseMoE, 6, n_experts=5, hidden=7, top_k=k)
    moe.dispatch = dispatch
    x = torch.randn(3, 4, 6, dtype=torch.float64)
    y = moe(x)
    assert y.shape == x.shape
    assert torch.allclose(y.reshape(-1, 6), naive_smoe(moe, x.reshape(-1, 6)), atol=1e-12)
    assert moe.last_assignments.shape == (12, k)


def test_dispatch_modes_agree_in_outputs_and_gradients():
    moe = fresh(SparseMoE, 6, n_experts=4, hidden=5, top_k=2)
    x = torch.randn(40, 6, dtype=torch.float64, requires_grad=True)
    res = {}
    for mode in ("padded", "loop"):
        moe.dispatch = mode
        y = moe(x)
        grads = torch.autograd.grad((y.square().sum() + moe.aux_loss), [x, *moe.parameters()])
        res[mode] = (y, grads)
    assert torch.allclose(res["padded"][0], res["loop"][0], atol=1e-12)
    for a, b in zip(res["padded"][1], res["loop"][1]):
        assert torch.allclose(a, b, atol=1e-12)


def test_mh_moe_with_one_head_and_no_projections_is_smoe():
    mh = fresh(MultiHeadMoE, 6, heads=1, n_experts=5, hidden=7, head_layers=False)
    sm = fresh(SparseMoE, 6, n_experts=5, hidden=7, seed=1)
    sm.load_state_dict({k.removeprefix("moe."): v for k, v in mh.state_dict().items()})
    x = torch.randn(2, 9, 6, dtype=torch.float64)
    assert torch.equal(mh(x), sm(x))
    assert torch.equal(mh.aux_loss, sm.aux_loss)


def test_mh_moe_with_one_head_and_identity_projections_is_smoe():
    mh = fresh(MultiHeadMoE, 6, heads=1, n_experts=5, hidden=7, head_layers=True)
    with torch.no_grad():
        for lin in (mh.head, mh.merge):
            lin.weight.copy_(torch.eye(6))
            lin.bias.zero_()
    sm = fresh(SparseMoE, 6, n_experts=5, hidden=7, seed=1)
    sm.load_state_dict({k.removeprefix("moe."): v for k, v in mh.state_dict().items()
                        if k.startswith("moe.")})
    x = torch.randn(2, 9, 6, dtype=torch.float64)
    assert (mh(x) - sm(x)).abs().max() < 1e-12


def test_mh_moe_matches_a_naive_reference():
    h, d = 3, 6
    mh = fresh(MultiHeadMoE, d, heads=h, n_experts=4, hidden=5)
    x = torch.randn(7, d, dtype=torch.float64)
    want = []
    for tok in x:
        z = mh.head.weight @ tok + mh.head.bias
        subs = z.reshape(h, d // h)                       # sub-token j: features j*d/h .. (j+1)*d/h
        o = naive_smoe(mh.moe, subs).reshape(d)
        want.append(mh.merge.weight @ o + mh.merge.bias)
    assert torch.allclose(mh(x), torch.stack(want), atol=1e-12)
    assert mh.last_assignments.shape == (7 * h, 1)


def test_split_and_merge_are_inverse():
    mh = MultiHeadMoE(8, heads=4, n_experts=2, hidden=3)
    z = torch.randn(2, 5, 8)
    s = mh.split(z)
    assert s.shape == (40, 2)
    assert torch.equal(s[4 * 3 + 1], z[0, 3, 2:4])
    assert torch.equal(mh.merge_subtokens(s, z.shape), z)


def test_tied_routing_sends_a_tokens_subtokens_to_one_expert():
    mh = fresh(MultiHeadMoE, 8, heads=4, n_experts=6, hidden=3, tied_routing=True)
    mh(torch.randn(30, 8, dtype=torch.float64))
    a = mh.last_assignments.reshape(30, 4)
    assert (a == a[:, :1]).all()
    assert experts_per_token(a) == 1.0
    free = fresh(MultiHeadMoE, 8, heads=4, n_experts=6, hidden=3)
    free(torch.randn(30, 8, dtype=torch.float64))
    assert experts_per_token(free.last_assignments.reshape(30, 4)) > 1.0


def test_load_balancing_loss():
    E, N = 4, 8
    uniform = torch.full((N, E), 1 / E)
    balanced = torch.arange(N)[:, None] % E
    assert load_balancing_loss(uniform, balanced).item() == pytest.approx(1.0)
    peaked = torch.tensor([[0.97, 0.01, 0.01, 0.01]]).repeat(N, 1)
    assert load_balancing_loss(peaked, torch.zeros(N, 1, dtype=torch.long)).item() == pytest.approx(4 * 0.97)
    p = uniform.clone().requires_grad_(True)
    load_balancing_loss(p, balanced).backward()
    assert p.grad is not None
    with pytest.raises(ValueError):
        load_balancing_loss(uniform, balanced[:3])


def test_activation_statistics_on_hand_examples():
    counts = torch.tensor([[6, 2, 0, 0], [2, 2, 2, 2]])
    assert activation_ratio(counts, 8, 0.3) == pytest.approx(1 / 8)       # shares .75 .25 0 0, .25 x4
    assert activation_ratio(counts, 2, 0.3) == pytest.approx(6 / 8)       # per token of 2 units: x4
    assert load_entropy(torch.tensor([1, 1, 1, 1])) == pytest.approx(1.0)
    assert load_entropy(torch.tensor([5, 0, 0, 0])) == pytest.approx(0.0)
    assert load_entropy(torch.tensor([1, 1, 0, 0])) == pytest.approx(math.log(2) / math.log(4))
    assert experts_per_token(torch.tensor([[1, 1, 2, 3], [0, 0, 0, 0]])) == 2.0
    with pytest.raises(ValueError):
        activation_ratio(counts, 0, 0.1)


def test_matched_flops_need_expert_width_f_minus_d():
    d, f, E, h = 32, 64, 8, 4
    smoe = SparseMoE(d, n_experts=E, hidden=f)
    mh = MultiHeadMoE(d, heads=h, n_experts=E, hidden=f - d)
    for m in (smoe, mh):
        set_dispatch(m, "loop")
    fs, fm = flops_per_token(smoe, d), flops_per_token(mh, d)
    assert fs == 2 * d * E + 2 * 2 * d * f                               # router + one expert
    assert fm == 2 * 2 * d * d + 2 * d * E + 2 * 2 * d * (f - d)          # head, merge, router, experts
    assert fs == fm
    set_dispatch(smoe, "padded")
    assert flops_per_token(smoe, d) >= fs                                  # padding is charged


def test_routing_counts_in_a_model():
    torch.manual_seed(0)
    model = TinyTransformer(20, d_model=16, n_layers=2, n_heads=2, max_len=8,
                            ffn=["mlp", "mh-moe"], ffn_options=[{}, {"heads": 4, "n_experts": 3,
                                                                     "hidden": 8}])
    assert len(moe_layers(model)) == 1
    rc = routing_counts(model, torch.randint(0, 20, (5, 8)), batch_size=2)
    assert rc["n_tokens"] == 40 and rc["n_units"] == 160 and rc["top_k"] == 1
    assert rc["counts"].shape == (1, 3) and int(rc["counts"].sum()) == 160
    assert rc["per_token"].shape == (1, 40, 4)
    with pytest.raises(ValueError, match="no routed"):
        routing_counts(TinyTransformer(20, d_model=16), torch.randint(0, 20, (2, 4)))


def test_bad_arguments():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadMoE(10, heads=4)
    with pytest.raises(ValueError, match="top_k"):
        SparseMoE(4, n_experts=2, top_k=3)
    with pytest.raises(ValueError, match="expected inputs"):
        SparseMoE(4, n_experts=2)(torch.randn(3, 5))
    with pytest.raises(ValueError, match="dispatch"):
        set_dispatch(SparseMoE(4), "dense")
