r"""Fine-tuning from demonstrations with and without a learned reward (Li et al., NeurIPS 2024),
on the enumerable toy LM of :mod:`reprobook.prefs.toy_lm`.

Demonstrations :math:`\mathcal D = \{(x_i, y_i)\}` come from an unknown expert. The paper reads
supervised fine-tuning as the special case of **maximum-likelihood inverse RL** (ML-IRL) that never
models a reward: find a reward :math:`r` whose KL-regularised optimal policy
:math:`\pi_r \propto \pi_\mathrm{ref}\,e^{r/\beta}` makes the demonstrations likely,

.. math::

    \max_r\ \mathbb E_{\mathcal D}\big[\log \pi_r(y\mid x)\big], \qquad
    \nabla_r = \mathbb E_{\mathcal D}[\nabla r(x, y)] - \mathbb E_{x\sim\mathcal D,\,y\sim\pi_r}[\nabla r(x,y)],

and learns the reward and the policy *together*. Three methods, the same demonstrations and steps:

* :func:`train_sft` — **SFT**: maximise :math:`\mathbb E_\mathcal D \log\pi_\theta(y\mid x)` (minibatch Adam).
* :func:`train_rft` — **RFT** (explicit reward :math:`r_\phi`): alternate a reward step along the
  ML-IRL gradient above, with :math:`\pi_\theta` in place of :math:`\pi_r` and the expectation computed
  exactly over the enumerated responses, and ``policy_steps`` policy steps that move :math:`\pi_\theta`
  toward :math:`\pi_{r_\phi}` by minimising :math:`\mathrm{KL}(\pi_{r_\phi}\,\|\,\pi_\theta)` exactly (the
  toy's stand-in for the paper's PPO step). :math:`r_\phi` is ``"linear"`` in given features or a
  ``"network"`` (a :class:`~reprobook.prefs.toy_lm.ToyLM` whose unnormalised next-token scores are
  summed: as expressive as the policy and told nothing about the true reward).
* :func:`train_irft` — **IRFT** (implicit reward :math:`\beta\log\pi_\theta/\pi_k`): the self-play loss
  :func:`~reprobook.prefs.losses.spin_loss` with the demonstration preferred over a response the
  opponent :math:`\pi_k` samples; the opponent is the model itself, refreshed every ``sync_every``
  steps. ``negatives="demos"`` is the broken control: the rejected response is another
  demonstration of the same prompt, so preferred and rejected come from one distribution and the
  loss has nothing to contrast.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from .losses import spin_loss
from .toy_lm import ToyLM, ToyTask

__all__ = ["FitConfig", "FitResult", "train_sft", "train_irft", "train_rft", "RewardNet",
           "irl_gradient_gap"]


@dataclass(frozen=True)
class FitConfig:
    """Optimisation budget shared by the methods (steps count optimiser steps on the policy)."""

    steps: int = 300
    lr: float = 0.01
    batch: int = 64
    spin_beta: float = 0.5          # IRFT's beta in the self-play loss
    sync_every: int = 50            # IRFT: steps between opponent refreshes
    policy_steps: int = 5           # RFT: policy steps per reward step
    reward_lr: float = 0.01         # RFT: reward step size (Adam)

    def __post_init__(self):
        for name in ("steps", "batch", "sync_every", "policy_steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        for name in ("lr", "spin_beta", "reward_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")


@dataclass
class FitResult:
    """The trained policy's log-probability table, the learned reward table (``None`` for SFT),
    and a per-step history of whatever the trainer logs."""

    logp: torch.Tensor
    reward: torch.Tensor | None = None
    history: dict = field(default_factory=dict)


def _check_demos(model: ToyLM, x, y) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = torch.as_tensor(np.asarray(x), dtype=torch.long), torch.as_tensor(np.asarray(y), dtype=torch.long)
    if x.ndim != 1 or x.shape != y.shape or len(x) == 0:
        raise ValueError("demonstrations must be two equal-length 1-D arrays: prompts and "
                         f"response rows; got shapes {tuple(x.shape)} and {tuple(y.shape)}")
    if x.min() < 0 or x.max() >= model.n_prompts or y.min() < 0 or y.max() >= len(model.responses):
        raise ValueError("a demonstration's prompt or response row is out of range for the model")
    return x, y


def train_sft(model: ToyLM, x, y, cfg: FitConfig, *, seed: int) -> FitResult:
    """Maximum likelihood on the demonstrations (minibatches drawn with replacement)."""
    x, y = _check_demos(model, x, y)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    for _ in range(cfg.steps):
        i = torch.randint(len(x), (cfg.batch,), generator=g)
        loss = -model.log_probs()[x[i], y[i]].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return FitResult(logp=model.log_probs())


def train_irft(model: ToyLM, x, y, cfg: FitConfig, *, seed: int,
               negatives: str = "model") -> FitResult:
    """Implicit-reward fine-tuning: the self-play loss against a periodically refreshed opponent.
    ``negatives="demos"``: the broken control (rejected = another demonstration of the prompt)."""
    if negatives not in ("model", "demos"):
        raise ValueError(f"negatives must be 'model' or 'demos', got {negatives!r}")
    x, y = _check_demos(model, x, y)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    by_prompt = {int(p): y[x == p] for p in torch.unique(x)}
    with torch.no_grad():
        opponent = model.log_probs()
    for step in range(cfg.steps):
        if step and step % cfg.sync_every == 0:
            with torch.no_grad():
                opponent = model.log_probs()
        i = torch.randint(len(x), (cfg.batch,), generator=g)
        xb, yb = x[i], y[i]
        if negatives == "model":
            yl = torch.multinomial(opponent[xb].exp(), 1, generator=g).squeeze(1)
        else:
            yl = torch.stack([by_prompt[int(p)][torch.randint(len(by_prompt[int(p)]), (1,), generator=g)][0]
                              for p in xb])
        lp = model.log_probs()
        loss = spin_loss(lp[xb, yb], lp[xb, yl], opponent[xb, yb], opponent[xb, yl], cfg.spin_beta)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return FitResult(logp=model.log_probs())


class RewardNet(torch.nn.Module):
    """A reward over (prompt, response) with the toy LM's architecture: the sum over positions of
    the unnormalised score the network gives each token (no softmax), a table ``[X, R]``."""

    def __init__(self, like: ToyLM, generator: torch.Generator | None = None, width: int = 32):
        super().__init__()
        self.net = ToyLM(like.n_prompts, like.vocab, like.length, width, init_scale=0.1,
                         generator=generator)

    def table(self) -> torch.Tensor:
        s = self.net.prefix_logits()
        return sum(s[:, self.net._row[:, t], self.net.responses[:, t]] for t in range(self.net.length))


def irl_gradient_gap(features: torch.Tensor, x, y, logp: torch.Tensor) -> torch.Tensor:
    """The ML-IRL gradient of a reward linear in ``features`` (``[X, R, F]``):
    :math:`\\mathbb E_\\mathcal D\\,\\phi - \\mathbb E_{x\\sim\\mathcal D,\\,y\\sim\\pi}\\,\\phi` (``[F]``);
    zero exactly at a stationary point."""
    x, y = torch.as_tensor(np.asarray(x)), torch.as_tensor(np.asarray(y))
    demo = features[x, y].mean(0)
    model = (logp.detach().exp()[x, :, None] * features[x]).sum(1).mean(0)
    return demo - model


def train_rft(model: ToyLM, task: ToyTask, x, y, cfg: FitConfig, *, seed: int,
              reward: str = "network", features: torch.Tensor | None = None,
              update_policy: bool = True, planted_bug: str | None = None) -> FitResult:
    """Explicit-reward fine-tuning (see the module docstring). ``reward="linear"`` uses
    ``features`` (default: the task's own); ``update_policy=False`` is the broken control that
    learns the reward against a policy that never moves; ``planted_bug="wrong-sign"`` moves the
    policy toward :math:`\\pi_\\mathrm{ref}e^{-r/\\beta}` instead (a sign error in the policy step).
    ``cfg.steps`` counts policy steps; the reward takes one step per ``cfg.policy_steps`` of them."""
    x, y = _check_demos(model, x, y)
    if reward not in ("network", "linear"):
        raise ValueError(f"reward must be 'network' or 'linear', got {reward!r}")
    if planted_bug not in (None, "wrong-sign"):
        raise ValueError(f"planted_bug must be None or 'wrong-sign', got {planted_bug!r}")
    sign = -1.0 if planted_bug == "wrong-sign" else 1.0
    g = torch.Generator().manual_seed(seed)
    if reward == "linear":
        feats = task.features if features is None else features
        if feats.shape[:2] != task.features.shape[:2]:
            raise ValueError(f"features must be [X, R, F] = {tuple(task.features.shape[:2])} x F, "
                             f"got {tuple(feats.shape)}")
        w = torch.zeros(feats.shape[-1], requires_grad=True)
        reward_params, table = [w], (lambda: feats @ w)
    else:
        net = RewardNet(model, generator=g)
        reward_params, table = list(net.parameters()), net.table
    ropt = torch.optim.Adam(reward_params, lr=cfg.reward_lr)
    popt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    prompts = torch.unique(x)
    gaps = []
    for step in range(cfg.steps):
        if step % cfg.policy_steps == 0:
            # reward ascent on E_D[r] - E_{x~D, y~pi}[r], exact over the enumerated responses
            with torch.no_grad():
                pi = model.log_probs().exp()
            r = table()
            obj = r[x, y].mean() - (pi[x] * r[x]).sum(1).mean()
            ropt.zero_grad()
            (-obj).backward()
            ropt.step()
            if reward == "linear":
                gaps.append(float(irl_gradient_gap(feats, x, y, pi.log()).norm()))
        if update_policy:
            with torch.no_grad():
                target = torch.log_softmax(task.ref_logp + sign * table() / task.beta, 1)[prompts]
            lp = model.log_probs()[prompts]
            loss = (target.exp() * (target - lp)).sum(1).mean()       # KL(target || pi)
            popt.zero_grad()
            loss.backward()
            popt.step()
    with torch.no_grad():
        hist = {"gap": gaps} if gaps else {}
        return FitResult(logp=model.log_probs(), reward=table().detach(), history=hist)
