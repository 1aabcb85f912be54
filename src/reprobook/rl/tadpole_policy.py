r"""Batched Gaussian policies on :class:`~reprobook.rl.point_blob.PointBlob`, trained by REINFORCE
from any per-step reward: the policy learner behind the TADPoLe chapter.

``P`` independent policies (one per prompt and seed) are trained at once. Policy :math:`j` maps
the features :math:`\phi(s_t)=(p_1,p_2,e,1-t/T)` to a Gaussian over actions,

.. math:: a_t\sim\mathcal N\big(\tanh(\phi(s_t)W_j+b_j),\ \mathrm{diag}(e^{2\ell_j})\big),

clipped to :math:`[-1,1]` by the environment (the log-likelihood is of the unclipped draw). Each
iteration rolls out ``rollouts`` episodes per policy, asks ``reward_fn`` for the reward of every
step (a tensor (P, N, T) computed from the states *after* each step, i.e. from the frames the
agent produced), and takes one Adam step on the REINFORCE loss with reward-to-go
:math:`G_t=\sum_{t'\ge t}r_{t'}`, a per-step baseline (the mean of :math:`G_t` over the policy's
rollouts) and advantages divided by their standard deviation over the policy's batch:

.. math:: \mathcal L_j=-\frac1{NT}\sum_{n,t}\log\pi_j(a_{nt}\mid s_{nt})\,
          \frac{G_{nt}-\bar G_t}{\mathrm{sd}(G-\bar G)}.

Every policy gets the same number of environment steps and reward calls (the budget), whatever
the reward is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .point_blob import PointBlob, region_of

__all__ = ["ReinforceConfig", "GaussianPolicies", "rollout", "train_policies",
           "random_rollout", "final_outcomes"]

RewardFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class ReinforceConfig:
    iterations: int = 60
    rollouts: int = 64
    lr: float = 0.05
    init_std: float = 0.5

    def __post_init__(self):
        for k in ("iterations", "rollouts"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{k} must be an int >= 1, got {v!r}")
        if not self.lr > 0 or not self.init_std > 0:
            raise ValueError(f"lr and init_std must be positive, got {self.lr}, {self.init_std}")


class GaussianPolicies(torch.nn.Module):
    """``n`` linear-tanh Gaussian policies (see the module docstring), initialised from
    ``generator``: small random weights, zero bias, standard deviation ``init_std``."""

    n_features = 4

    def __init__(self, n: int, generator: torch.Generator, init_std: float = 0.5):
        super().__init__()
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an int >= 1, got {n!r}")
        self.W = torch.nn.Parameter(0.01 * torch.randn(n, self.n_features, 3, generator=generator))
        self.b = torch.nn.Parameter(torch.zeros(n, 3))
        self.log_std = torch.nn.Parameter(torch.full((n, 3), float(torch.log(torch.tensor(init_std)))))

    @staticmethod
    def features(p: torch.Tensor, e: torch.Tensor, t: int, horizon: int) -> torch.Tensor:
        return torch.cat([p, e[..., None], torch.full_like(e, 1 - t / horizon)[..., None]], -1)

    def mean(self, phi: torch.Tensor) -> torch.Tensor:
        """Mean actions (P, N, 3) for features (P, N, 4)."""
        return torch.tanh(torch.einsum("pnf,pfa->pna", phi, self.W) + self.b[:, None])


def rollout(env: PointBlob, policies: GaussianPolicies, n: int, generator: torch.Generator,
            deterministic: bool = False):
    """``n`` episodes per policy. Returns the states after each step, p (P, n, T, 2) and
    e (P, n, T), and the log-likelihood of the actions (P, n, T) (zeros if deterministic)."""
    P, T = policies.W.shape[0], env.horizon
    p, e = env.reset((P, n), generator)
    ps, es, logps = [], [], []
    std = policies.log_std.exp()[:, None]
    for t in range(T):
        mu = policies.mean(GaussianPolicies.features(p, e, t, T))
        if deterministic:
            a, lp = mu.detach(), torch.zeros(mu.shape[:-1])
        else:
            a = (mu + std * torch.randn(mu.shape, generator=generator)).detach()
            lp = torch.distributions.Normal(mu, std).log_prob(a).sum(-1)
        p, e = env.step(p, e, a)
        ps.append(p)
        es.append(e)
        logps.append(lp)
    return torch.stack(ps, 2), torch.stack(es, 2), torch.stack(logps, 2)


def random_rollout(env: PointBlob, shape: tuple, generator: torch.Generator):
    """Episodes of the uniformly random policy, :math:`a\\sim U[-1,1]^3`: p (*shape, T, 2),
    e (*shape, T)."""
    p, e = env.reset(shape, generator)
    ps, es = [], []
    for _ in range(env.horizon):
        p, e = env.step(p, e, torch.rand(*shape, 3, generator=generator) * 2 - 1)
        ps.append(p)
        es.append(e)
    return torch.stack(ps, -2), torch.stack(es, -1)


def train_policies(env: PointBlob, reward_fn: RewardFn, n_policies: int, cfg: ReinforceConfig,
                   generator: torch.Generator):
    """Train ``n_policies`` policies by REINFORCE on ``reward_fn(p, e, generator)`` -> (P, N, T).
    Returns the policies and the mean return of each policy at each iteration (iterations, P)."""
    pol = GaussianPolicies(n_policies, generator, cfg.init_std)
    opt = torch.optim.Adam(pol.parameters(), lr=cfg.lr)
    history = []
    for _ in range(cfg.iterations):
        p, e, logp = rollout(env, pol, cfg.rollouts, generator)
        with torch.no_grad():
            r = reward_fn(p, e, generator)
            if r.shape != logp.shape:
                raise ValueError(f"reward_fn must return shape {tuple(logp.shape)}, got "
                                 f"{tuple(r.shape)}")
            G = r.flip(-1).cumsum(-1).flip(-1)
            adv = G - G.mean(1, keepdim=True)
            adv = adv / (adv.std(dim=(1, 2), keepdim=True) + 1e-8)
        loss = -(logp * adv).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        history.append(r.sum(-1).mean(1))
    return pol, torch.stack(history)


def final_outcomes(p: torch.Tensor, e: torch.Tensor, prompts: torch.Tensor):
    """Ground-truth evaluation of episodes p (P, N, T, 2), e (P, N, T) for prompts (P,): the
    success rate (final position in the prompted quadrant) and the mean final :math:`|e|`
    (distance from the natural round shape), each of shape (P,)."""
    if prompts.shape != p.shape[:1] or e.shape != p.shape[:-1]:
        raise ValueError(f"need p (P, N, T, 2), e (P, N, T), prompts (P,), got {tuple(p.shape)}, "
                         f"{tuple(e.shape)}, {tuple(prompts.shape)}")
    success = (region_of(p[:, :, -1]) == prompts[:, None]).float().mean(1)
    return success, e[:, :, -1].abs().mean(1)
