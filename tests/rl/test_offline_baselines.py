"""The ensemble networks, the shared critic and the BC / TD3+BC / AW-BC learners."""
import numpy as np
import pytest
import torch

from rl.offline_helpers import one_step_data

from reprobook.rl.offline_baselines import (EnsembleMLP, OfflineConfig, TwinQV, actor_critic_setup,
                                            awbc_weights, critic_loss, sample_batch, soft_update,
                                            train_awbc, train_bc, train_td3bc)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _gen(s=0):
    return torch.Generator().manual_seed(s)


def test_members_are_independent_networks():
    m = EnsembleMLP(3, [2, 8, 8, 1], _gen())
    x = torch.randn(3, 5, 2, generator=_gen(1))
    y = m(x)
    x2 = x.clone()
    x2[1] += 1.0
    y2 = m(x2)
    assert torch.equal(y[0], y2[0]) and torch.equal(y[2], y2[2]) and not torch.equal(y[1], y2[1])
    # member 0's loss has no gradient on the other members' weights
    m(x)[0].sum().backward()
    for w in m.weights:
        assert w.grad[0].abs().sum() > 0 and w.grad[1:].abs().sum() == 0
    # member e is the plain MLP with its own weights
    h = x[2]
    for i, (w, b) in enumerate(zip(m.weights, m.biases)):
        h = h @ w[2] + b[2]
        h = torch.relu(h) if i < 2 else h
    torch.testing.assert_close(y[2], h)
    with pytest.raises(ValueError, match="members=3"):
        m(torch.randn(2, 5, 2))


def test_config_validates():
    with pytest.raises(ValueError, match="steps"):
        OfflineConfig(steps=0)
    with pytest.raises(ValueError, match="beta"):
        OfflineConfig(beta=-1.0)
    assert OfflineConfig().but(steps=7).steps == 7


def _data(E=2, N=64, seed=0):
    g = _gen(seed)
    return dict(obs=torch.randn(E, N, 2, generator=g), actions=torch.rand(E, N, 1, generator=g) * 2 - 1,
                rewards=torch.randn(E, N, 1, generator=g), next_obs=torch.randn(E, N, 2, generator=g),
                not_done=torch.ones(E, N, 1))


def test_sample_batch_draws_each_members_own_rows():
    d = _data()
    d["obs"][1] += 100.0
    b = sample_batch(d, 10, _gen())
    assert b["obs"].shape == (2, 10, 2)
    assert (b["obs"][0].abs() < 50).all() and (b["obs"][1] > 50).all()


def test_critic_loss_targets():
    cfg = OfflineConfig(gamma=0.9, policy_noise=0.0)
    c = TwinQV(2, 2, 1, 8, 2, _gen())
    ct = TwinQV(2, 2, 1, 8, 2, _gen(1))
    d = _data()
    na = torch.zeros(2, 64, 1)
    with torch.no_grad():
        y = d["rewards"] + 0.9 * torch.min(*ct(d["next_obs"], na))
        q1, q2 = c(d["obs"], d["actions"])
        v = c.value(d["obs"])
        ref = sum(((x - y) ** 2).mean(dim=(1, 2)).sum() for x in (q1, q2, v))
    torch.testing.assert_close(critic_loss(c, ct, d, na, cfg, _gen()), ref)
    d["not_done"].zero_()                       # terminal: the target is the reward alone
    with torch.no_grad():
        ref0 = sum(((x - d["rewards"]) ** 2).mean(dim=(1, 2)).sum() for x in (q1, q2, v))
    torch.testing.assert_close(critic_loss(c, ct, d, na, cfg, _gen()), ref0)


def test_soft_update_and_weights():
    a, b = EnsembleMLP(1, [2, 3], _gen(0)), EnsembleMLP(1, [2, 3], _gen(1))
    w0 = a.weights[0].detach().clone()
    soft_update(a, b, 0.25)
    torch.testing.assert_close(a.weights[0].detach(), 0.75 * w0 + 0.25 * b.weights[0].detach())
    c = TwinQV(1, 2, 1, 4, 1, _gen())
    w = awbc_weights(c, torch.randn(1, 9, 2), torch.randn(1, 9, 1), OfflineConfig(weight_clip=1.5))
    assert (w > 0).all() and (w <= 1.5).all()


def _bimodal(E=2, N=512, seed=0):
    # one-step data: a = +0.8 (reward 1) or a = -0.8 (reward -1), half each, at every state
    g = np.random.default_rng(seed)
    s = g.uniform(-1, 1, (E, N, 2))
    good = g.random((E, N, 1)) < 0.5
    a = np.where(good, 0.8, -0.8)
    return one_step_data(s, a, np.where(good, 1.0, -1.0))


def test_bc_averages_the_modes_while_awbc_and_td3bc_move_to_the_good_one():
    d = _bimodal()
    cfg = OfflineConfig(steps=200, hidden=32, critic_layers=2, batch_size=64, gamma=0.0,
                        lr=3e-3, policy_freq=1)
    s = torch.zeros(2, 1, 2)
    bc = train_bc(d, cfg, _gen())
    with torch.no_grad():
        assert bc(s).abs().max() < 0.3
    aw, _ = train_awbc(d, cfg, _gen())
    td, _ = train_td3bc(d, cfg, _gen())
    with torch.no_grad():
        assert (aw(s) > 0.5).all() and (td(s) > 0.2).all()


def test_actor_critic_setup_freezes_independent_targets():
    cfg = OfflineConfig()
    actor, critic = EnsembleMLP(2, [3, 8, 1], _gen()), TwinQV(2, 3, 1, 8, 2, _gen(1))
    actor_t, critic_t, (a_opt, _), (c_opt, _) = actor_critic_setup(actor, critic, cfg)
    for net, tgt, opt in ((actor, actor_t, a_opt), (critic, critic_t, c_opt)):
        assert all(not p.requires_grad for p in tgt.parameters())
        assert all(p.requires_grad for p in net.parameters())
        for p, q in zip(net.parameters(), tgt.parameters()):
            assert torch.equal(p, q) and p.data_ptr() != q.data_ptr()   # a copy, not a view
        assert {id(p) for g in opt.param_groups for p in g["params"]} == {id(p) for p in net.parameters()}
