r"""Offline behaviour distillation (OBD): a tiny synthetic (state, action) set learned by BPTT.

Lei, Zhang & Tao (NeurIPS 2024) distil a large offline RL data set :math:`\mathcal D_{\rm off}`
into :math:`N_{\rm syn}` learnable pairs :math:`\mathcal D_{\rm syn}=\{(\tilde s_i,\tilde a_i)\}`
such that behaviour cloning (BC) on them gives a good policy. It is a bi-level problem:

.. math:: \min_{\mathcal D_{\rm syn}} \mathcal H(\pi_{\theta_T}),\qquad
          \theta_{t} = \theta_{t-1} - \alpha_0\, m_t,\quad
          m_t = \beta_0 m_{t-1} + \nabla_\theta \ell_{\rm BC}(\theta_{t-1}; \mathcal D_{\rm syn}),

:math:`\ell_{\rm BC}(\theta;\mathcal D)=\frac1N\sum_i\lVert\pi_\theta(\tilde s_i)-\tilde a_i
\rVert^2` from a fresh random :math:`\theta_0` every outer step, and :math:`\mathcal H` one of
three outer objectives on a minibatch of offline states (:func:`outer_targets`):

* **DBC** (data-based BC): :math:`\mathbb E_{(s,a)\sim\mathcal D_{\rm off}}\lVert\pi_\theta(s)-a\rVert^2`;
* **PBC** (policy-based BC): :math:`\mathbb E_{s\sim\mathcal D_{\rm off}}\lVert\pi_\theta(s)-\pi^\star(s)\rVert^2`
  for a near-expert :math:`\pi^\star`;
* **Av-PBC** (action-value weighted PBC, the paper's method):
  :math:`\mathbb E_{s\sim\mathcal D_{\rm off}}\,\beta\,q_{\pi^\star}(s,\pi^\star(s))\,
  \lVert\pi_\theta(s)-\pi^\star(s)\rVert^2`.

The meta-gradient :math:`\partial\mathcal H/\partial\mathcal D_{\rm syn}` is back-propagation
through the unrolled inner loop (BPTT, ``create_graph=True``): exact, at memory linear in
:math:`T`. (The official code saves memory with a reversible backward pass built on
Hessian-vector products; the gradient is the same.)

Everything is batched over an **ensemble axis** ``E``: member :math:`e` has its own synthetic set,
its own offline data and its own policies, and the members' losses are summed, which (no shared
parameter, Adam coordinate-wise) is exactly ``E`` independent distillations, e.g. one per seed.
Policies are deterministic MLPs :math:`\pi(s)=\tanh(\mathrm{MLP}(s))` (action box [-1, 1]).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from .offline_baselines import EnsembleMLP

__all__ = ["DistillConfig", "OBJECTIVES", "Adam", "init_policy", "policy_forward", "unroll_bc",
           "meta_loss", "outer_targets", "distill", "train_on_synthetic", "random_subset"]

OBJECTIVES = ("dbc", "pbc", "avpbc")


@dataclass(frozen=True)
class DistillConfig:
    """Hyper-parameters of the bi-level problem (inner BC loop and outer optimiser)."""
    n_syn: int = 16               # synthetic pairs per member
    hidden: int = 64              # policy width
    layers: int = 2               # hidden layers of the policy
    inner_steps: int = 50         # T, unrolled BC steps
    inner_lr: float = 0.1         # alpha_0
    inner_momentum: float = 0.9   # beta_0
    outer_steps: int = 300
    outer_lr: float = 0.01        # Adam on (s_syn, a_syn)
    outer_batch: int = 512        # offline states per outer step
    beta: float = 1.0             # Av-PBC weight scale

    def __post_init__(self):
        for k in ("n_syn", "hidden", "layers", "inner_steps", "outer_steps", "outer_batch"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"DistillConfig.{k} must be a positive int, got {v!r}")
        for k in ("inner_lr", "outer_lr", "beta"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"DistillConfig.{k} must be a finite number > 0, got {v!r}")
        if not (0 <= self.inner_momentum < 1):
            raise ValueError(f"DistillConfig.inner_momentum must be in [0, 1), got "
                             f"{self.inner_momentum!r}")

    def but(self, **kw) -> "DistillConfig":
        return replace(self, **kw)


class Adam:
    """Adam (Kingma & Ba; torch's defaults, no weight decay) on a list of tensors, in place.

    Written out because ``torch.optim``'s first step imports ``torch._dynamo`` (seconds on a
    loaded 2-core machine), more than a whole smoke-size distillation costs."""

    def __init__(self, params, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.params, self.lr, self.betas, self.eps = list(params), lr, betas, eps
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.t = 0

    @torch.no_grad()
    def step(self, grads) -> None:
        b1, b2 = self.betas
        self.t += 1
        c1, c2 = 1 - b1 ** self.t, 1 - b2 ** self.t
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            p.sub_(self.lr * (m / c1) / ((v / c2).sqrt() + self.eps))


def init_policy(members: int, obs_dim: int, act_dim: int, hidden: int, layers: int,
                generator: torch.Generator, dtype=torch.float32) -> list[torch.Tensor]:
    """Fresh policy parameters ``[W1, b1, W2, b2, ...]`` with W (E, fan_in, fan_out) and b
    (E, 1, fan_out), initialised as ``nn.Linear`` (via :class:`EnsembleMLP`)."""
    net = EnsembleMLP(members, [obs_dim, *[hidden] * layers, act_dim], generator)
    out = []
    for w, b in zip(net.weights, net.biases):
        out += [w.detach().to(dtype), b.detach().to(dtype)]
    return out


def policy_forward(params: list[torch.Tensor], s: torch.Tensor) -> torch.Tensor:
    """:math:`\\tanh(\\mathrm{MLP}(s))` for states (E, B, d_obs) -> actions (E, B, d_act)."""
    if s.dim() != 3 or s.shape[0] != params[0].shape[0] or s.shape[2] != params[0].shape[1]:
        raise ValueError(f"states must be (E={params[0].shape[0]}, B, {params[0].shape[1]}), got "
                         f"{tuple(s.shape)}")
    x = s
    n = len(params) // 2
    for i in range(n):
        x = torch.baddbmm(params[2 * i + 1], x, params[2 * i])
        if i < n - 1:
            x = torch.relu(x)
    return torch.tanh(x)


def _bc_loss(params, s, a):
    # per-member mean squared error, summed over members (members stay independent)
    return ((policy_forward(params, s) - a) ** 2).mean(dim=(1, 2)).sum()


def unroll_bc(params0, s_syn, a_syn, steps: int, lr: float, momentum: float = 0.0,
              create_graph: bool = True, optimizer: str = "sgd", batch_size: int | None = None,
              generator: torch.Generator | None = None) -> list[torch.Tensor]:
    """``steps`` BC steps on (s_syn, a_syn) from ``params0``. With ``create_graph`` the result is a
    differentiable function of the synthetic data (BPTT); ``optimizer="adam"`` (not
    differentiated, evaluation and whole-data BC only) uses Adam with learning rate ``lr``, on
    minibatches of ``batch_size`` rows per member (drawn from ``generator``) if given."""
    if s_syn.shape[:2] != a_syn.shape[:2]:
        raise ValueError(f"s_syn {tuple(s_syn.shape)} and a_syn {tuple(a_syn.shape)} must share "
                         "(members, N)")
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}")
    if optimizer == "adam":
        if create_graph:
            raise ValueError("the Adam inner loop is for evaluation only (create_graph=False)")
        params = [p.detach().clone().requires_grad_(True) for p in params0]
        opt = Adam(params, lr=lr)
        s, a = s_syn.detach(), a_syn.detach()
        E, N = s.shape[:2]
        rows = torch.arange(E)[:, None]
        for _ in range(steps):
            if batch_size is not None:
                idx = torch.randint(N, (E, batch_size), generator=generator)
                sb, ab = s[rows, idx], a[rows, idx]
            else:
                sb, ab = s, a
            opt.step(torch.autograd.grad(_bc_loss(params, sb, ab), params))
        return [p.detach() for p in params]
    params = [p if p.requires_grad else p.clone().requires_grad_(True) for p in params0]
    buf = None
    for _ in range(steps):
        grads = torch.autograd.grad(_bc_loss(params, s_syn, a_syn), params,
                                    create_graph=create_graph)
        buf = list(grads) if buf is None else [momentum * m + g for m, g in zip(buf, grads)]
        params = [p - lr * m for p, m in zip(params, buf)]
        if not create_graph:
            params = [p.detach().requires_grad_(True) for p in params]
    return params if create_graph else [p.detach() for p in params]


def meta_loss(s_syn, a_syn, params0, states, targets, weights, cfg: DistillConfig) -> torch.Tensor:
    r"""The outer objective after the unrolled inner loop:
    :math:`\sum_e \frac1B\sum_b w_{eb}\lVert\pi_{\theta_T^e}(s_{eb})-y_{eb}\rVert^2`, differentiable
    in ``s_syn`` and ``a_syn``. ``states``/``targets`` (E, B, d), ``weights`` (E, B, 1)."""
    if weights.shape != states.shape[:2] + (1,) or targets.shape[:2] != states.shape[:2]:
        raise ValueError(f"states {tuple(states.shape)}, targets {tuple(targets.shape)} and "
                         f"weights {tuple(weights.shape)} must be (E, B, d), (E, B, d_act), "
                         "(E, B, 1)")
    params = unroll_bc(params0, s_syn, a_syn, cfg.inner_steps, cfg.inner_lr, cfg.inner_momentum)
    err = ((policy_forward(params, states) - targets) ** 2).sum(-1, keepdim=True)
    return (weights * err).mean(dim=(1, 2)).sum()


def outer_targets(objective: str, actions, expert_actions, q_values, beta: float = 1.0):
    """``(targets, weights)`` of an outer objective for offline rows with data ``actions``,
    expert actions :math:`\\pi^\\star(s)` and values :math:`q_{\\pi^\\star}(s,\\pi^\\star(s))`
    (E, N, 1). DBC: (data action, 1); PBC: (expert action, 1); Av-PBC: (expert action, beta q)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose from {OBJECTIVES}")
    ones = torch.ones_like(q_values)
    if objective == "dbc":
        return actions, ones
    if objective == "pbc":
        return expert_actions, ones
    if torch.any(q_values < 0):
        raise ValueError("Av-PBC needs non-negative action values q(s, pi*(s)) (shift the reward)")
    return expert_actions, beta * q_values


def distill(objective: str, data: dict, cfg: DistillConfig, generator: torch.Generator,
            snapshot_every: int | None = None) -> dict:
    """Distil ``E`` synthetic sets, one per member of ``data`` (tensors ``obs``, ``actions``,
    ``expert_actions`` (E, N, d) and ``q`` (E, N, 1)). The synthetic pairs start as random offline
    rows (the paper's initialisation); each outer step draws a fresh policy initialisation and a
    fresh minibatch of offline rows for every member and takes one Adam step on (s_syn, a_syn).

    Returns ``s_syn``, ``a_syn`` (E, n_syn, d), ``loss`` (outer_steps, E) and ``snapshots``: a list
    of ``(step, s_syn, a_syn)`` every ``snapshot_every`` steps (with step 0 and the last)."""
    need = ("obs", "actions", "expert_actions", "q")
    missing = [k for k in need if k not in data]
    if missing:
        raise ValueError(f"data is missing {missing}")
    E, N, ds = data["obs"].shape
    da = data["actions"].shape[2]
    if data["expert_actions"].shape != (E, N, da) or data["q"].shape != (E, N, 1):
        raise ValueError("expert_actions must be (E, N, d_act) and q (E, N, 1) like the data")
    targets, weights = outer_targets(objective, data["actions"], data["expert_actions"],
                                     data["q"], cfg.beta)
    rows = torch.arange(E)[:, None]
    idx = torch.randint(N, (E, cfg.n_syn), generator=generator)
    s_syn = data["obs"][rows, idx].clone().requires_grad_(True)
    a_syn = data["actions"][rows, idx].clone().requires_grad_(True)
    opt = Adam([s_syn, a_syn], lr=cfg.outer_lr)
    losses, snaps = [], []
    if snapshot_every:
        snaps.append((0, s_syn.detach().clone(), a_syn.detach().clone()))
    for step in range(1, cfg.outer_steps + 1):
        p0 = init_policy(E, ds, da, cfg.hidden, cfg.layers, generator, data["obs"].dtype)
        b = torch.randint(N, (E, cfg.outer_batch), generator=generator)
        loss = meta_loss(s_syn, a_syn, p0, data["obs"][rows, b], targets[rows, b],
                         weights[rows, b], cfg)
        opt.step(torch.autograd.grad(loss, (s_syn, a_syn)))
        with torch.no_grad():   # synthetic actions stay in the action box
            a_syn.clamp_(-1.0, 1.0)
        losses.append(loss.detach().item())
        if snapshot_every and (step % snapshot_every == 0 or step == cfg.outer_steps) \
                and snaps[-1][0] != step:
            snaps.append((step, s_syn.detach().clone(), a_syn.detach().clone()))
    return dict(s_syn=s_syn.detach(), a_syn=a_syn.detach(), loss=losses, snapshots=snaps)


def train_on_synthetic(s_syn, a_syn, generator: torch.Generator, *, hidden: int = 64,
                       layers: int = 2, steps: int = 50, lr: float = 0.1, momentum: float = 0.9,
                       optimizer: str = "sgd", repeats: int = 1,
                       batch_size: int | None = None) -> list[torch.Tensor]:
    """Plain BC (no graph) of ``repeats`` fresh policies per member on the synthetic sets
    (E, n, d): returns parameters with E * repeats members (member-major: e * repeats + k)."""
    E = s_syn.shape[0]
    s = s_syn.detach().repeat_interleave(repeats, 0)
    a = a_syn.detach().repeat_interleave(repeats, 0)
    p0 = init_policy(E * repeats, s.shape[2], a.shape[2], hidden, layers, generator, s.dtype)
    with torch.enable_grad():
        return unroll_bc(p0, s, a, steps, lr, momentum, create_graph=False, optimizer=optimizer,
                         batch_size=batch_size, generator=generator)


def random_subset(data: dict, n: int, generator: torch.Generator):
    """The paper's "random selection" baseline: ``n`` offline (s, a) rows per member, (E, n, d)."""
    E, N = data["obs"].shape[:2]
    if not 1 <= n <= N:
        raise ValueError(f"n must be in [1, {N}], got {n}")
    idx = torch.stack([torch.randperm(N, generator=generator)[:n] for _ in range(E)])
    rows = torch.arange(E)[:, None]
    return data["obs"][rows, idx], data["actions"][rows, idx]
