"""Bi-level behaviour distillation: the unrolled BC loop, its BPTT meta-gradient, the objectives."""
import numpy as np
import pytest
import torch

from reprobook.rl.behavior_distillation import (Adam, DistillConfig, distill, init_policy, meta_loss,
                                                outer_targets, policy_forward, random_subset,
                                                train_on_synthetic, unroll_bc)
from reprobook.threads import single_threaded_torch


@pytest.fixture(autouse=True)
def _one_thread():
    with single_threaded_torch():
        yield


def _g(s=0):
    return torch.Generator().manual_seed(s)


def test_unroll_is_plain_sgd_with_momentum():
    p0 = init_policy(2, 2, 1, 8, 1, _g(), torch.float64)
    s = torch.randn(2, 5, 2, generator=_g(1), dtype=torch.float64)
    a = torch.rand(2, 5, 1, generator=_g(2), dtype=torch.float64) - 0.5
    got = unroll_bc(p0, s, a, 3, 0.1, 0.9, create_graph=False)
    # heavy-ball momentum written out, member by member, with .backward() and in-place updates
    for e in range(2):
        ps = [p[e:e + 1].clone().requires_grad_(True) for p in p0]
        bufs = [torch.zeros_like(p) for p in ps]
        for _ in range(3):
            for p in ps:
                p.grad = None
            ((policy_forward(ps, s[e:e + 1]) - a[e:e + 1]) ** 2).mean().backward()
            with torch.no_grad():
                for p, b in zip(ps, bufs):
                    b.mul_(0.9).add_(p.grad)
                    p.sub_(0.1 * b)
        for x, y in zip(got, ps):
            torch.testing.assert_close(x[e:e + 1], y.detach())


def test_adam_matches_torch():
    x = torch.randn(5, generator=_g(1), dtype=torch.float64)
    a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    mine, ref = Adam([a], lr=0.05), torch.optim.Adam([b], lr=0.05)
    for _ in range(4):
        mine.step(torch.autograd.grad(((a - 1) ** 4).sum(), [a]))
        ref.zero_grad()
        ((b - 1) ** 4).sum().backward()
        ref.step()
    torch.testing.assert_close(a.detach(), b.detach())


def test_members_are_independent():
    p0 = init_policy(2, 2, 1, 8, 1, _g(), torch.float64)
    s = torch.randn(2, 5, 2, generator=_g(1), dtype=torch.float64)
    a = torch.zeros(2, 5, 1, dtype=torch.float64)
    out1 = unroll_bc(p0, s, a, 4, 0.1, 0.5, create_graph=False)
    s2 = s.clone()
    s2[1] += 3.0
    out2 = unroll_bc(p0, s2, a, 4, 0.1, 0.5, create_graph=False)
    assert all(torch.equal(x[0], y[0]) for x, y in zip(out1, out2))
    assert not all(torch.equal(x[1], y[1]) for x, y in zip(out1, out2))


def test_bptt_gradient_matches_finite_differences():
    cfg = DistillConfig(n_syn=3, hidden=5, layers=1, inner_steps=5, inner_lr=0.3,
                        inner_momentum=0.9)
    dt = torch.float64
    p0 = init_policy(1, 2, 1, 5, 1, _g(), dt)
    s_syn = torch.randn(1, 3, 2, generator=_g(1), dtype=dt).requires_grad_(True)
    a_syn = (torch.rand(1, 3, 1, generator=_g(2), dtype=dt) - 0.5).requires_grad_(True)
    st = torch.randn(1, 7, 2, generator=_g(3), dtype=dt)
    tg = torch.rand(1, 7, 1, generator=_g(4), dtype=dt) - 0.5
    w = torch.rand(1, 7, 1, generator=_g(5), dtype=dt) + 0.5
    gs, ga = torch.autograd.grad(meta_loss(s_syn, a_syn, p0, st, tg, w, cfg), (s_syn, a_syn))
    eps = 1e-6
    for x, g in ((s_syn, gs), (a_syn, ga)):
        fd = torch.zeros_like(x)
        for i in range(x.numel()):
            d = torch.zeros_like(x).view(-1)
            d[i] = eps
            d = d.view_as(x)
            with torch.no_grad():
                xp, xm = (x + d, x - d)
            lp = meta_loss(xp if x is s_syn else s_syn.detach(), xp if x is a_syn else a_syn.detach(),
                           p0, st, tg, w, cfg)
            lm = meta_loss(xm if x is s_syn else s_syn.detach(), xm if x is a_syn else a_syn.detach(),
                           p0, st, tg, w, cfg)
            fd.view(-1)[i] = (lp - lm).item() / (2 * eps)
        assert (g - fd).norm() / fd.norm() < 1e-6


def test_outer_targets():
    a, ea = torch.zeros(1, 4, 2), torch.ones(1, 4, 2)
    q = torch.arange(4.0).view(1, 4, 1)
    t, w = outer_targets("dbc", a, ea, q)
    assert torch.equal(t, a) and torch.equal(w, torch.ones_like(q))
    t, w = outer_targets("pbc", a, ea, q)
    assert torch.equal(t, ea) and torch.equal(w, torch.ones_like(q))
    t, w = outer_targets("avpbc", a, ea, q, beta=2.0)
    assert torch.equal(t, ea) and torch.equal(w, 2 * q)
    with pytest.raises(ValueError, match="unknown objective"):
        outer_targets("bc", a, ea, q)
    with pytest.raises(ValueError, match="non-negative"):
        outer_targets("avpbc", a, ea, q - 1)


def _toy(E=2, N=200):
    # one-step imitation: the expert action is -s_1 clipped; data actions are noise
    s = torch.rand(E, N, 2, generator=_g(7)) * 2 - 1
    return dict(obs=s, actions=torch.rand(E, N, 1, generator=_g(8)) * 2 - 1,
                expert_actions=(-0.8 * s[..., :1]), q=torch.ones(E, N, 1))


def test_distillation_lowers_the_outer_loss_and_helps_bc():
    data = _toy()
    cfg = DistillConfig(n_syn=4, hidden=16, layers=1, inner_steps=10, outer_steps=40,
                        outer_lr=0.05, outer_batch=64)
    out = distill("pbc", data, cfg, _g(), snapshot_every=20)
    assert out["s_syn"].shape == (2, 4, 2) and len(out["loss"]) == 40
    assert [k for k, *_ in out["snapshots"]] == [0, 20, 40]
    assert np.mean(out["loss"][-10:]) < 0.5 * np.mean(out["loss"][:5])

    def err(s, a):
        p = train_on_synthetic(s, a, _g(3), hidden=16, layers=1, steps=10, repeats=2)
        st = data["obs"].repeat_interleave(2, 0)
        return ((policy_forward(p, st) - data["expert_actions"].repeat_interleave(2, 0)) ** 2).mean()

    assert err(out["s_syn"], out["a_syn"]) < 0.5 * err(*random_subset(data, 4, _g(4)))


def test_bad_input():
    with pytest.raises(ValueError, match="inner_steps"):
        DistillConfig(inner_steps=0)
    with pytest.raises(ValueError, match="inner_momentum"):
        DistillConfig(inner_momentum=1.0)
    p0 = init_policy(1, 2, 1, 4, 1, _g())
    with pytest.raises(ValueError, match="states must be"):
        policy_forward(p0, torch.zeros(2, 3, 2))
    with pytest.raises(ValueError, match="optimizer"):
        unroll_bc(p0, torch.zeros(1, 3, 2), torch.zeros(1, 3, 1), 1, 0.1, optimizer="lbfgs")
    with pytest.raises(ValueError, match="missing"):
        distill("pbc", {"obs": torch.zeros(1, 3, 2)}, DistillConfig(), _g())
    with pytest.raises(ValueError, match="n must be"):
        random_subset(_toy(), 0, _g())
