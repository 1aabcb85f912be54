r"""A2PO: advantage-aware policy optimisation (Qing et al., NeurIPS 2024).

Written from the paper and its official code (github.com/Plankson/A2PO), in our own words.

**Advantage condition.** With the shared critic of :mod:`reprobook.rl.offline_baselines`
(twin Q and a value head :math:`V` that regresses the TD targets of the data's actions),
every data pair gets the condition

.. math:: \xi(s,a) = \tanh\big(Q_1(s,a) - V(s)\big)\in(-1,1)

(detached; optionally discretised to :math:`\{-1,0,1\}` with thresholds).

**Behaviour disentangling (CVAE).** An encoder :math:`q(z\mid s,\xi,a)=N(\mu,\sigma^2)` with a
latent of size :math:`2|A|` (log-std clamped to [-4, 15]) and a decoder
:math:`a = \tanh(D(s,\xi,z))` are trained on :math:`\lVert D(s,\xi,z)-a\rVert^2 +
\mathrm{KL}(q\,\Vert\,N(0,I))`, per dimension averaged, for the first ``vae_steps`` steps, jointly
with the critic. Because :math:`\xi` tells the decoder how good the action was, the actions of
behaviour policies that disagree at the same state are separated by the condition instead of being
averaged: :math:`D(s,\xi{=}1,\cdot)` reproduces the high-advantage mode and
:math:`D(s,\xi{=}-1,\cdot)` the low one. Sampling from the prior uses :math:`z\sim N(0,I)`
clipped to :math:`\pm 0.5`.

**Advantage-aware actor.** The actor outputs a latent, :math:`z = \tanh(\mathrm{MLP}(s,\xi))`, and
acts through the decoder, :math:`\pi(s,\xi) = D(s,\xi,z)`. Every ``policy_freq`` steps it minimises

.. math:: -\lambda\,Q_1\big(s, \pi(s, 1)\big) + w_{bc}\,\lVert \pi(s,\xi(s,a)) - a\rVert^2,
          \qquad \lambda = \alpha / \overline{|Q_1|},

so the imitation term asks it to reproduce each data action *under that action's own advantage
condition* (no conflicting targets at one input), while the improvement term is taken at
:math:`\xi=1`. The critic's next action is :math:`\pi'(s',1)` of the target actor (through the
current decoder). At test time the agent plays :math:`\pi(s,1)`.

``conditioned=False`` is the ablation that removes the advantage condition (:math:`\xi\equiv 0`
everywhere): a CVAE-constrained TD3+BC, the control for the disentangling claim.
"""
from __future__ import annotations

import torch
from torch import nn

from .offline_baselines import (EnsembleMLP, OfflineConfig, TwinQV, _adam, _check_data, _step,
                                actor_critic_setup, critic_loss, sample_batch, soft_update)

__all__ = ["CVAE", "A2POAgent", "advantage_condition", "train_a2po"]


class CVAE(nn.Module):
    """Conditional VAE over actions given (state, advantage condition), one per member."""

    def __init__(self, members, obs_dim, act_dim, hidden, generator):
        super().__init__()
        self.latent_dim = 2 * act_dim
        self.enc = EnsembleMLP(members, [obs_dim + 1 + act_dim, hidden, hidden,
                                         2 * self.latent_dim], generator)
        self.dec = EnsembleMLP(members, [obs_dim + 1 + self.latent_dim, hidden, hidden, act_dim],
                               generator)

    def encode(self, s, xi, a):
        h = self.enc(torch.cat([s, xi, a], -1))
        mean, log_std = h.split(self.latent_dim, dim=-1)
        return mean, log_std.clamp(-4.0, 15.0).exp()

    def decode(self, s, xi, z=None, generator: torch.Generator | None = None):
        """Actions :math:`\\tanh(D(s,\\xi,z))`; ``z=None`` samples the clipped prior."""
        if z is None:
            z = torch.randn(s.shape[:2] + (self.latent_dim,), generator=generator).clamp(-0.5, 0.5)
        return torch.tanh(self.dec(torch.cat([s, xi, z], -1)))

    def loss(self, s, xi, a, generator):
        """Reconstruction + KL, per dimension averaged, per member; summed over members."""
        mean, std = self.encode(s, xi, a)
        z = mean + std * torch.randn(std.shape, generator=generator)
        rec = ((self.decode(s, xi, z) - a) ** 2).mean(-1)
        kl = -0.5 * (1 + 2 * std.log() - mean ** 2 - std ** 2).mean(-1)
        return (rec + kl).mean(-1).sum()


class _LatentActor(nn.Module):
    def __init__(self, members, obs_dim, latent_dim, hidden, layers, generator):
        super().__init__()
        self.net = EnsembleMLP(members, [obs_dim + 1, *[hidden] * layers, latent_dim], generator)

    def forward(self, s, xi):
        return torch.tanh(self.net(torch.cat([s, xi], -1)))


def _full(s, value):
    return torch.full(s.shape[:2] + (1,), float(value), dtype=s.dtype)


def advantage_condition(critic: TwinQV, s, a, discrete: tuple | None = None) -> torch.Tensor:
    """:math:`\\tanh(Q_1(s,a)-V(s))`, detached, (E, B, 1); ``discrete=(lo, hi)`` maps it to -1
    below ``lo``, 1 above ``hi`` and 0 between (the paper's discrete variant)."""
    with torch.no_grad():
        xi = torch.tanh(critic.advantage(s, a))
        if discrete is not None:
            lo, hi = discrete
            if not lo <= hi:
                raise ValueError(f"discrete thresholds must satisfy lo <= hi, got {discrete}")
            xi = torch.where(xi < lo, -1.0, torch.where(xi > hi, 1.0, 0.0)).to(xi.dtype)
        return xi


class A2POAgent(nn.Module):
    """The trained agent: ``agent(s)`` plays :math:`\\pi(s, \\xi=1)`; ``agent(s, xi)`` any
    condition; :meth:`decode` samples the CVAE alone (no actor) at a condition."""

    def __init__(self, actor, cvae, critic, conditioned):
        super().__init__()
        self.actor, self.cvae, self.critic, self.conditioned = actor, cvae, critic, conditioned

    @torch.no_grad()
    def forward(self, s, xi: float = 1.0):
        c = _full(s, xi if self.conditioned else 0.0)
        return self.cvae.decode(s, c, self.actor(s, c))

    @torch.no_grad()
    def decode(self, s, xi: float, generator: torch.Generator | None = None):
        c = _full(s, xi if self.conditioned else 0.0)
        return self.cvae.decode(s, c, None, generator)


def train_a2po(data: dict, cfg: OfflineConfig, generator: torch.Generator,
               vae_steps: int | None = None, conditioned: bool = True,
               discrete: tuple | None = None) -> A2POAgent:
    """Train A2PO for ``cfg.steps`` critic steps (the CVAE for the first ``vae_steps``, default
    all). ``conditioned=False`` removes the advantage condition (ablation)."""
    E, N, ds, da = _check_data(data)
    vae_steps = cfg.steps if vae_steps is None else vae_steps
    if isinstance(vae_steps, bool) or not isinstance(vae_steps, int) or vae_steps < 0:
        raise ValueError(f"vae_steps must be an int >= 0, got {vae_steps!r}")
    cvae = CVAE(E, ds, da, cfg.vae_hidden, generator)
    actor = _LatentActor(E, ds, cvae.latent_dim, cfg.hidden, cfg.actor_layers, generator)
    critic = TwinQV(E, ds, da, cfg.hidden, cfg.critic_layers, generator)
    actor_t, critic_t, (a_opt, a_sched), (c_opt, c_sched) = actor_critic_setup(actor, critic, cfg)
    v_opt, v_sched = _adam(cvae, cfg)

    def cond(s, a):
        if not conditioned:
            return _full(s, 0.0)
        return advantage_condition(critic, s, a, discrete)

    for it in range(1, cfg.steps + 1):
        b = sample_batch(data, cfg.batch_size, generator)
        s, a = b["obs"], b["actions"]
        with torch.no_grad():
            one2 = _full(s, 1.0 if conditioned else 0.0)
            na = cvae.decode(b["next_obs"], one2, actor_t(b["next_obs"], one2))
        _step(c_opt, c_sched, critic_loss(critic, critic_t, b, na, cfg, generator))
        if it <= vae_steps:
            _step(v_opt, v_sched, cvae.loss(s, cond(s, a), a, generator))
        if it % cfg.policy_freq == 0:
            one = _full(s, 1.0 if conditioned else 0.0)
            best = cvae.decode(s, one, actor(s, one))
            q = critic.Q1(s, best)
            lam = cfg.alpha / q.abs().mean(dim=(1, 2), keepdim=True).detach()
            xi = cond(s, a)
            pi = cvae.decode(s, xi, actor(s, xi))
            loss = ((-lam * q).mean(dim=(1, 2))
                    + cfg.bc_weight * ((pi - a) ** 2).mean(dim=(1, 2))).sum()
            # the actor's loss flows through the decoder and the critic too; only the actor
            # steps on it (as in the official code, whose other optimisers zero their grads)
            _step(a_opt, a_sched, loss)
            soft_update(critic_t, critic, cfg.tau)
            soft_update(actor_t, actor, cfg.tau)
    return A2POAgent(actor.eval(), cvae.eval(), critic.eval(), conditioned)
