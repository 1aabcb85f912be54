r"""Offline-RL baselines on one shared critic: BC, TD3+BC and advantage-weighted BC.

Every learner here trains an **ensemble** of independent members in one batched pass: member
:math:`e` has its own networks, its own data set (``data[k][e]``, see
:func:`reprobook.rl.offline_data.stack`) and its own minibatches, and its loss is added to the
others'. Since no parameter is shared and Adam works coordinate-wise, this is exactly ``E``
independent training runs (one per seed), at the cost of about one.

**The critic** (:class:`TwinQV`, trained by :func:`critic_loss`) is the one of A2PO's official
code, used by every learner that needs one: twin Q networks and a state-value head, all regressed
on the same clipped double-Q target

.. math:: y = r + \gamma (1-d)\,\min_{j=1,2} Q'_j(s', \tilde a'),\qquad
          \tilde a' = \mathrm{clip}(\pi'(s') + \mathrm{clip}(\epsilon, -c, c), -1, 1),\
          \epsilon\sim N(0,\sigma^2),

.. math:: L = \lVert Q_1(s,a)-y\rVert^2 + \lVert Q_2(s,a)-y\rVert^2 + \lVert V(s)-y\rVert^2 .

:math:`\pi'` is the learner's own target actor. :math:`V` regresses the targets of the *data's*
actions, so it estimates the value of the behaviour mixture at :math:`s`, and
:math:`A(s,a)=Q_1(s,a)-V(s)` is the advantage of a data action over the behaviour mixture: the
quantity that both advantage-weighted BC and A2PO use.

**The actors** (deterministic, :math:`\pi(s) = \tanh(\mathrm{MLP}(s))`):

* ``bc``: :math:`\min \lVert\pi(s)-a\rVert^2` on every data pair (no critic);
* ``td3bc`` (Fujimoto & Gu 2021): :math:`\min -\lambda Q_1(s,\pi(s)) + \lVert\pi(s)-a\rVert^2`
  with :math:`\lambda = \alpha / \overline{|Q_1|}` (per member, detached), updated every
  ``policy_freq`` critic steps, with Polyak-averaged targets;
* ``awbc`` (AWR/AWAC-style with a deterministic policy): :math:`\min w\,\lVert\pi(s)-a\rVert^2`
  with :math:`w = \min(\exp(A(s,a)/\beta), w_\max)`, the same critic, the same schedule.

All use Adam with a step decay of the learning rate (A2PO's schedule) and the same number of
gradient steps, so that the method and the baselines get the same budget.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace

import torch
from torch import nn

__all__ = ["OfflineConfig", "EnsembleMLP", "TwinQV", "DeterministicActor", "critic_loss",
           "sample_batch", "soft_update", "actor_critic_setup", "train_bc", "train_td3bc", "train_awbc",
           "awbc_weights"]


@dataclass(frozen=True)
class OfflineConfig:
    """Hyperparameters shared by every learner (A2PO's official defaults except the widths)."""
    steps: int = 3000            # gradient steps of the critic (and the BC actor)
    batch_size: int = 256
    hidden: int = 128            # width of actor and critic layers (paper: 256)
    critic_layers: int = 3       # hidden layers of each Q and V network (as the paper's code)
    actor_layers: int = 2
    lr: float = 3e-4
    lr_step: int = 1000          # StepLR: multiply the learning rate by lr_decay every lr_step
    lr_decay: float = 0.9
    gamma: float = 0.99
    tau: float = 0.005
    policy_noise: float = 0.2
    noise_clip: float = 0.5
    policy_freq: int = 2
    alpha: float = 2.5           # TD3+BC's (and A2PO's) Q-term weight
    beta: float = 1.0            # AW-BC temperature
    weight_clip: float = 100.0   # AW-BC's largest weight
    vae_hidden: int = 256        # A2PO's CVAE width (paper: 750)
    bc_weight: float = 1.0       # A2PO's weight of the advantage-conditioned BC term

    def __post_init__(self):
        for k in ("steps", "batch_size", "hidden", "critic_layers", "actor_layers", "lr_step",
                  "policy_freq", "vae_hidden"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"OfflineConfig.{k} must be a positive int, got {v!r}")
        for k in ("lr", "lr_decay", "tau", "alpha", "beta", "weight_clip"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"OfflineConfig.{k} must be a finite number > 0, got {v!r}")
        for k in ("gamma", "policy_noise", "noise_clip", "bc_weight"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"OfflineConfig.{k} must be a finite number >= 0, got {v!r}")

    def but(self, **kw) -> "OfflineConfig":
        return replace(self, **kw)


class EnsembleMLP(nn.Module):
    """``members`` independent ReLU MLPs of layer sizes ``sizes`` = (d_in, h, ..., d_out), applied
    to inputs (members, batch, d_in) by batched matrix products. Initialised as ``nn.Linear``
    (uniform in :math:`\\pm 1/\\sqrt{\\text{fan-in}}`), from ``generator``."""

    def __init__(self, members: int, sizes, generator: torch.Generator):
        super().__init__()
        sizes = list(sizes)
        if isinstance(members, bool) or not isinstance(members, int) or members < 1:
            raise ValueError(f"members must be a positive int, got {members!r}")
        if len(sizes) < 2 or any(isinstance(s, bool) or not isinstance(s, int) or s < 1
                                 for s in sizes):
            raise ValueError(f"sizes must be >= 2 positive ints, got {sizes}")
        self.members, self.sizes = members, sizes
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fi, fo in zip(sizes[:-1], sizes[1:]):
            b = 1.0 / math.sqrt(fi)
            self.weights.append(nn.Parameter(
                (torch.rand(members, fi, fo, generator=generator) * 2 - 1) * b))
            self.biases.append(nn.Parameter(
                (torch.rand(members, 1, fo, generator=generator) * 2 - 1) * b))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[0] != self.members or x.shape[2] != self.sizes[0]:
            raise ValueError(f"input must be (members={self.members}, batch, {self.sizes[0]}), "
                             f"got {tuple(x.shape)}")
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = torch.baddbmm(b, x, w)
            if i < last:
                x = torch.relu(x)
        return x


class TwinQV(nn.Module):
    """Twin Q networks and a value head (one ensemble of each)."""

    def __init__(self, members, obs_dim, act_dim, hidden, layers, generator):
        super().__init__()
        h = [hidden] * layers
        self.q1 = EnsembleMLP(members, [obs_dim + act_dim, *h, 1], generator)
        self.q2 = EnsembleMLP(members, [obs_dim + act_dim, *h, 1], generator)
        self.v = EnsembleMLP(members, [obs_dim, *h, 1], generator)

    def forward(self, s, a):
        sa = torch.cat([s, a], -1)
        return self.q1(sa), self.q2(sa)

    def Q1(self, s, a):
        return self.q1(torch.cat([s, a], -1))

    def value(self, s):
        return self.v(s)

    def advantage(self, s, a):
        """:math:`Q_1(s,a) - V(s)`, (E, B, 1)."""
        return self.Q1(s, a) - self.v(s)


class DeterministicActor(nn.Module):
    """:math:`\\pi(s) = \\tanh(\\mathrm{MLP}(s))` (action box [-1, 1]), one per member."""

    def __init__(self, members, obs_dim, act_dim, hidden, layers, generator):
        super().__init__()
        self.net = EnsembleMLP(members, [obs_dim, *[hidden] * layers, act_dim], generator)

    def forward(self, s):
        return torch.tanh(self.net(s))


def _check_data(data: dict) -> tuple[int, int, int, int]:
    need = ("obs", "actions", "rewards", "next_obs", "not_done")
    missing = [k for k in need if k not in data]
    if missing:
        raise ValueError(f"data is missing {missing} (make it with offline_data.stack)")
    E, N, ds = data["obs"].shape
    if data["actions"].shape[:2] != (E, N) or data["rewards"].shape != (E, N, 1) \
            or data["next_obs"].shape != (E, N, ds) or data["not_done"].shape != (E, N, 1):
        raise ValueError("data tensors must share (members, N): obs/next_obs (E, N, d_obs), "
                         "actions (E, N, d_act), rewards/not_done (E, N, 1)")
    return E, N, ds, data["actions"].shape[2]


def sample_batch(data: dict, batch_size: int, generator: torch.Generator) -> dict:
    """An independent minibatch (with replacement) for every member: tensors (E, B, ...)."""
    E, N = data["obs"].shape[:2]
    idx = torch.randint(N, (E, batch_size), generator=generator)
    rows = torch.arange(E)[:, None]
    return {k: v[rows, idx] for k, v in data.items()}


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Polyak averaging: target <- tau * source + (1 - tau) * target."""
    torch._foreach_lerp_(list(target.parameters()), list(source.parameters()), tau)


def critic_loss(critic: TwinQV, critic_target: TwinQV, batch: dict, next_action: torch.Tensor,
                cfg: OfflineConfig, generator: torch.Generator) -> torch.Tensor:
    """The shared critic loss (module docstring), summed over members. ``next_action`` is the
    target actor's action at ``batch["next_obs"]``; the clipped smoothing noise is added here."""
    with torch.no_grad():
        noise = (torch.randn(next_action.shape, generator=generator) * cfg.policy_noise
                 ).clamp(-cfg.noise_clip, cfg.noise_clip)
        a2 = (next_action + noise).clamp(-1.0, 1.0)
        tq1, tq2 = critic_target(batch["next_obs"], a2)
        y = batch["rewards"] + cfg.gamma * batch["not_done"] * torch.min(tq1, tq2)
    q1, q2 = critic(batch["obs"], batch["actions"])
    v = critic.value(batch["obs"])
    per_member = ((q1 - y) ** 2 + (q2 - y) ** 2 + (v - y) ** 2).mean(dim=(1, 2))
    return per_member.sum()


def _adam(module, cfg):
    # fused: one kernel for all parameters; the per-tensor Adam costs more than the tiny networks
    opt = torch.optim.Adam(module.parameters(), lr=cfg.lr, fused=True)
    return opt, torch.optim.lr_scheduler.StepLR(opt, step_size=cfg.lr_step, gamma=cfg.lr_decay)


def _step(opt, sched, loss):
    # gradients of the optimiser's own parameters only: the actor's loss also flows through the
    # critic (and A2PO's decoder), whose weight gradients would be computed for nothing
    params = [p for g in opt.param_groups for p in g["params"]]
    for p, g in zip(params, torch.autograd.grad(loss, params)):
        p.grad = g
    opt.step()
    sched.step()


def train_bc(data: dict, cfg: OfflineConfig, generator: torch.Generator) -> DeterministicActor:
    """Behaviour cloning: regress the data actions, ``cfg.steps`` steps."""
    E, N, ds, da = _check_data(data)
    actor = DeterministicActor(E, ds, da, cfg.hidden, cfg.actor_layers, generator)
    opt, sched = _adam(actor, cfg)
    for _ in range(cfg.steps):
        b = sample_batch(data, cfg.batch_size, generator)
        _step(opt, sched, ((actor(b["obs"]) - b["actions"]) ** 2).mean(dim=(1, 2)).sum())
    return actor.eval()


def actor_critic_setup(actor: nn.Module, critic: nn.Module, cfg: OfflineConfig):
    """Frozen target copies of ``actor`` and ``critic`` and one Adam (with its schedule) for each:
    ``(actor_t, critic_t, (a_opt, a_sched), (c_opt, c_sched))``. Every actor-critic learner here
    (TD3+BC, AW-BC, A2PO) starts from the same setup, so that they differ only in their losses."""
    actor_t, critic_t = copy.deepcopy(actor), copy.deepcopy(critic)
    for p in (*actor_t.parameters(), *critic_t.parameters()):
        p.requires_grad_(False)
    return actor_t, critic_t, _adam(actor, cfg), _adam(critic, cfg)


def _actor_critic(data, cfg, generator, actor_loss_fn):
    E, N, ds, da = _check_data(data)
    actor = DeterministicActor(E, ds, da, cfg.hidden, cfg.actor_layers, generator)
    critic = TwinQV(E, ds, da, cfg.hidden, cfg.critic_layers, generator)
    actor_t, critic_t, (a_opt, a_sched), (c_opt, c_sched) = actor_critic_setup(actor, critic, cfg)
    for it in range(1, cfg.steps + 1):
        b = sample_batch(data, cfg.batch_size, generator)
        with torch.no_grad():
            na = actor_t(b["next_obs"])
        _step(c_opt, c_sched, critic_loss(critic, critic_t, b, na, cfg, generator))
        if it % cfg.policy_freq == 0:
            _step(a_opt, a_sched, actor_loss_fn(actor, critic, b))
            soft_update(critic_t, critic, cfg.tau)
            soft_update(actor_t, actor, cfg.tau)
    return actor.eval(), critic.eval()


def train_td3bc(data: dict, cfg: OfflineConfig, generator: torch.Generator):
    """TD3+BC on the shared critic. Returns ``(actor, critic)``."""
    def loss(actor, critic, b):
        pi = actor(b["obs"])
        q = critic.Q1(b["obs"], pi)
        lam = cfg.alpha / q.abs().mean(dim=(1, 2), keepdim=True).detach()
        return ((-lam * q).mean(dim=(1, 2)) + ((pi - b["actions"]) ** 2).mean(dim=(1, 2))).sum()
    return _actor_critic(data, cfg, generator, loss)


def awbc_weights(critic: TwinQV, s, a, cfg: OfflineConfig) -> torch.Tensor:
    """:math:`\\min(\\exp(A(s,a)/\\beta), w_\\max)`, detached, (E, B, 1)."""
    with torch.no_grad():
        return torch.exp(critic.advantage(s, a) / cfg.beta).clamp(max=cfg.weight_clip)


def train_awbc(data: dict, cfg: OfflineConfig, generator: torch.Generator):
    """Advantage-weighted BC on the shared critic. Returns ``(actor, critic)``."""
    def loss(actor, critic, b):
        w = awbc_weights(critic, b["obs"], b["actions"], cfg)
        err = ((actor(b["obs"]) - b["actions"]) ** 2).mean(dim=2, keepdim=True)
        return (w * err).mean(dim=(1, 2)).sum()
    return _actor_critic(data, cfg, generator, loss)
