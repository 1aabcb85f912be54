"""A2PO: the advantage condition, the CVAE, and disentangling of two opposite behaviour modes."""
import numpy as np
import pytest
import torch

from rl.offline_helpers import one_step_data

from reprobook.rl.a2po import CVAE, advantage_condition, train_a2po
from reprobook.rl.offline_baselines import OfflineConfig, TwinQV

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _gen(s=0):
    return torch.Generator().manual_seed(s)


def test_advantage_condition_is_tanh_of_q_minus_v_and_discretises():
    c = TwinQV(2, 2, 1, 8, 2, _gen())
    s, a = torch.randn(2, 20, 2, generator=_gen(1)), torch.randn(2, 20, 1, generator=_gen(2))
    with torch.no_grad():
        ref = torch.tanh(c.Q1(s, a) - c.value(s))
    xi = advantage_condition(c, s, a)
    torch.testing.assert_close(xi, ref)
    assert not xi.requires_grad
    d = advantage_condition(c, s, a, discrete=(-0.01, 0.01))
    assert set(d.unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert torch.equal(d == 1.0, ref > 0.01) and torch.equal(d == -1.0, ref < -0.01)
    with pytest.raises(ValueError, match="lo <= hi"):
        advantage_condition(c, s, a, discrete=(0.5, -0.5))


def test_cvae_shapes_prior_clip_and_loss():
    v = CVAE(2, 3, 2, 16, _gen())
    s, xi = torch.randn(2, 7, 3), torch.ones(2, 7, 1)
    a = v.decode(s, xi, generator=_gen(1))
    assert a.shape == (2, 7, 2) and (a.abs() < 1).all()
    torch.testing.assert_close(a, v.decode(s, xi, generator=_gen(1)))     # seeded
    # the prior sample is clipped to +-0.5: a huge latent decodes differently from any prior draw
    big = v.decode(s, xi, z=torch.full((2, 7, 4), 0.5))
    torch.testing.assert_close(big, v.decode(s, xi, z=torch.full((2, 7, 4), 9.0).clamp(-0.5, 0.5)))
    loss = v.loss(s, xi, a.detach(), _gen())
    assert loss.ndim == 0 and torch.isfinite(loss)


def _bimodal(E=2, N=1024, seed=0):
    # one-step conflict: a = +0.8 is good (reward 1) where s1 > 0 and bad (reward -3) where
    # s1 < 0, and a = -0.8 the opposite; half of the data each
    g = np.random.default_rng(seed)
    s = g.uniform(-1, 1, (E, N, 2))
    plus = g.random((E, N, 1)) < 0.5
    a = np.where(plus, 0.8, -0.8)
    good = plus == (s[..., :1] > 0)
    return one_step_data(s, a, np.where(good, 1.0, -3.0))


def test_decoding_at_plus_and_minus_one_separates_the_modes_and_ablation_does_not():
    d = _bimodal()
    cfg = OfflineConfig(steps=300, hidden=32, critic_layers=2, vae_hidden=32, batch_size=64,
                        gamma=0.0, lr=3e-3)
    s = torch.tensor(np.random.default_rng(5).uniform(-1, 1, (2, 200, 2)), dtype=torch.float32)
    star = np.where(s[..., 0].numpy() > 0, 0.8, -0.8)
    agent = train_a2po(d, cfg, _gen())
    good = agent.decode(s, 1.0, _gen(1))[..., 0].numpy()
    bad = agent.decode(s, -1.0, _gen(2))[..., 0].numpy()
    assert (good * star > 0).mean() > 0.8 and (bad * star < 0).mean() > 0.8
    act = agent(s)[..., 0].numpy()
    assert (act * star > 0).mean() > 0.8
    flat = train_a2po(d, cfg, _gen(), conditioned=False)
    g0 = flat.decode(s, 1.0, _gen(1))[..., 0].numpy()
    assert (g0 * star > 0).mean() < 0.7            # no condition: both modes, at random


def test_bad_vae_steps():
    with pytest.raises(ValueError, match="vae_steps"):
        train_a2po(_bimodal(N=8), OfflineConfig(steps=1), _gen(), vae_steps=-1)
