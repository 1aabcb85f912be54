r"""DiSPOs: distributional successor features for zero-shot policy optimisation, on discrete states.

Zhu, Wang, Han, Du & Gupta (NeurIPS 2024). From reward-free data of a behaviour policy, learn

1. an **outcome model** :math:`p(\psi\mid s)`: the distribution of the discounted feature sum
   :math:`\psi=\sum_{t\ge0}\gamma^t\phi(s_t)` over the futures the data contain from :math:`s`
   (a conditional diffusion model, :class:`~reprobook.rl.outcome_model.OutcomeDDPM`), trained on
   **distributional Bellman targets** :math:`\psi \overset{d}{=} \phi(s)+\gamma\psi'`,
   :math:`\psi'\sim p(\cdot\mid s')` for the data's transitions :math:`(s,a,s')`. Because
   :math:`\psi'` is drawn from the model at :math:`s'` rather than read off the same trajectory,
   the outcomes of different trajectories are stitched together;
2. a **readout policy** :math:`\pi(a\mid s,\psi)`: a classifier of the action the data took from
   :math:`s` on the way to outcome :math:`\psi` (trained with cross-entropy on the same targets).

For a new reward :math:`r=\phi^\top w` the value of an outcome is :math:`w^\top\psi`, so planning is
:math:`\psi^\star=\arg\max_{\psi\sim p(\cdot|s)}w^\top\psi` over sampled outcomes (random shooting)
and acting is :math:`a=\arg\max_a\pi(a\mid s,\psi^\star)`, re-planned at every step. No rollout of
a one-step model is ever made, so there is no error to compound.

**Implementation choices** (see the chapter for why):

* *n-step targets.* :math:`\psi_t=\sum_{k<n'}\gamma^k\phi(s_{t+k})+\gamma^{n'}\psi'`,
  :math:`\psi'\sim p_{\rm target}(\cdot\mid s_{t+n'})`, :math:`n'=\min(n, T-t)`; ``n_step = 1`` is
  the paper's one-step target. Larger :math:`n` needs fewer Bellman iterations.
* *A bank of target outcomes.* Every ``refresh`` gradient steps the current model draws ``bank``
  outcomes for every state (DDIM); until the next refresh :math:`\psi'` is a uniformly chosen
  bank entry of :math:`s'`. The bank plays the part of the target network (one refresh = one
  distributional Bellman iteration); it starts at :math:`\psi'=0`.
* *Normalisation.* The model sees :math:`x=(\psi-\ell)/\sigma` with :math:`\ell=\bar\phi/(1-\gamma)`
  (the data's mean feature) and :math:`\sigma=\mathrm{sd}(\phi)/(1-\gamma)`, fixed before training.
* *Clipping.* :math:`(1-\gamma)\psi` is a convex combination of feature vectors, so each coordinate
  lies in :math:`[\min_s\phi_j(s),\max_s\phi_j(s)]/(1-\gamma)`; DDIM clips its clean-outcome
  prediction to that box.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch import nn

from .outcome_model import OutcomeDDPM, init_from

__all__ = ["DiSPOConfig", "DiSPO", "nstep_targets", "train_dispo", "plan"]


@dataclass(frozen=True)
class DiSPOConfig:
    """Sizes and schedule of a DiSPO (outcome model and readout policy)."""

    hidden: int = 256            # outcome model: width of each hidden layer
    layers: int = 3              # outcome model: hidden layers
    emb: int = 64                # width of the step and state embeddings
    diffusion_steps: int = 20    # K
    sample_steps: int = 10       # DDIM steps when sampling
    readout_hidden: int = 256
    readout_layers: int = 2
    steps: int = 4000            # gradient steps (outcome model and readout together)
    batch: int = 256
    lr: float = 1e-3
    refresh: int = 200           # gradient steps between target-bank refreshes (Bellman iterations)
    bank: int = 32               # target outcomes kept per state
    n_step: int = 1              # n of the n-step distributional target (1 = the paper's)

    def __post_init__(self):
        for k in ("hidden", "layers", "emb", "diffusion_steps", "sample_steps", "readout_hidden",
                  "readout_layers", "steps", "batch", "refresh", "bank", "n_step"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"DiSPOConfig.{k} must be an int >= 1, got {v!r}")
        if self.sample_steps > self.diffusion_steps:
            raise ValueError("sample_steps cannot exceed diffusion_steps")
        if not self.lr > 0:
            raise ValueError(f"DiSPOConfig.lr must be > 0, got {self.lr!r}")

    def but(self, **kw) -> "DiSPOConfig":
        return replace(self, **kw)


def nstep_targets(states, actions, features, gamma: float, n_step: int) -> dict:
    r"""The fixed part of every n-step target, one row per transition :math:`(i, t)`.

    Returns ``s`` and ``a`` (N,), ``partial`` :math:`\sum_{k<n'}\gamma^k\phi(s_{t+k})` (N, d),
    ``boot`` :math:`s_{t+n'}` (N,) and ``discount`` :math:`\gamma^{n'}` (N,), with
    :math:`n'=\min(n, T-t)`.
    """
    states, actions = np.asarray(states), np.asarray(actions)
    Phi = np.asarray(features, dtype=np.float64)
    if states.ndim != 2 or actions.shape != (states.shape[0], states.shape[1] - 1):
        raise ValueError(f"states must be (n, T + 1) and actions (n, T); got {states.shape}, "
                         f"{actions.shape}")
    if Phi.ndim != 2 or states.max() >= Phi.shape[0] or states.min() < 0:
        raise ValueError(f"features must be (S, d) covering every state; got {Phi.shape}")
    if isinstance(n_step, bool) or not isinstance(n_step, int) or n_step < 1:
        raise ValueError(f"n_step must be an int >= 1, got {n_step!r}")
    n, T = actions.shape
    t = np.arange(T)
    nn_ = np.minimum(n_step, T - t)                        # n' per time step
    partial = np.zeros((n, T, Phi.shape[1]))
    for k in range(n_step):
        live = k < nn_                                    # steps whose window still covers t + k
        idx = np.minimum(t + k, T)
        partial[:, live] += gamma ** k * Phi[states[:, idx[live]]]
    boot = states[:, t + nn_]
    disc = np.broadcast_to(gamma ** nn_, (n, T))
    return dict(s=states[:, :-1].ravel(), a=actions.ravel(), partial=partial.reshape(n * T, -1),
                boot=boot.ravel(), discount=disc.ravel().copy())


class _Readout(nn.Module):
    r""":math:`\pi(a\mid s,\psi)`: an MLP on [state embedding, outcome, outcome minus the outcome
    of staying at :math:`s` forever] (all normalised) -> action logits. The displacement term
    :math:`\psi-\phi(s)/(1-\gamma)` says where the future goes from here, the same way in
    every state, which a per-state embedding alone would have to learn state by state."""

    def __init__(self, dim, n_states, n_actions, hidden, layers, emb, stay_x):
        super().__init__()
        self.state_emb = nn.Embedding(n_states, emb)
        self.register_buffer("stay_x", stay_x)
        sizes = [2 * dim + emb] + [hidden] * layers
        mods: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            mods += [nn.Linear(a, b), nn.SiLU()]
        mods.append(nn.Linear(sizes[-1], n_actions))
        self.net = nn.Sequential(*mods)

    def forward(self, s, x):
        return self.net(torch.cat([x, x - self.stay_x[s], self.state_emb(s)], 1))


@dataclass(eq=False)
class DiSPO:
    """A trained DiSPO: the outcome model, the readout policy and the normalisation."""

    outcome: OutcomeDDPM
    readout: _Readout
    loc: torch.Tensor
    scale: float
    gamma: float
    cfg: DiSPOConfig
    history: dict = field(default_factory=dict)

    low: torch.Tensor | None = None       # the clipping box, in normalised units
    high: torch.Tensor | None = None

    def to_x(self, psi: torch.Tensor) -> torch.Tensor:
        return (psi - self.loc) / self.scale

    def _sample_x(self, s: torch.Tensor, generator: torch.Generator, steps: int) -> torch.Tensor:
        return self.outcome.sample(s, generator, steps, self.low, self.high)

    def sample_outcomes(self, states, n: int, generator: torch.Generator,
                        sample_steps: int | None = None, chunk: int = 8192) -> np.ndarray:
        """``n`` outcomes :math:`\\psi\\sim p(\\cdot\\mid s)` for each of ``states``: (len, n, d), float64."""
        s = torch.as_tensor(np.asarray(states), dtype=torch.long)
        if s.dim() != 1:
            raise ValueError(f"states must be 1-d, got shape {tuple(s.shape)}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an int >= 1, got {n!r}")
        steps = self.cfg.sample_steps if sample_steps is None else sample_steps
        flat = s.repeat_interleave(n)
        out = [self._sample_x(flat[i:i + chunk], generator, steps)
               for i in range(0, flat.numel(), chunk)]
        psi = torch.cat(out) * self.scale + self.loc
        return psi.double().numpy().reshape(s.numel(), n, -1)

    @torch.no_grad()
    def readout_actions(self, states, psi) -> np.ndarray:
        """:math:`\\arg\\max_a\\pi(a\\mid s,\\psi)` for states (B,) and outcomes (B, d)."""
        s = torch.as_tensor(np.asarray(states), dtype=torch.long)
        x = self.to_x(torch.as_tensor(np.asarray(psi), dtype=torch.float32))
        if x.shape != (s.shape[0], self.loc.shape[0]):
            raise ValueError(f"psi must have shape ({s.shape[0]}, {self.loc.shape[0]}), got "
                             f"{tuple(x.shape)}")
        return self.readout(s, x).argmax(1).numpy()


def train_dispo(states, actions, features, gamma: float, cfg: DiSPOConfig,
                generator: torch.Generator, n_actions: int | None = None) -> DiSPO:
    """Train the outcome model and the readout policy on trajectories ``states`` (n, T + 1),
    ``actions`` (n, T) with features (S, d). ``history`` holds the mean denoising and readout
    losses of every Bellman iteration (between refreshes) and ``bank_mean`` (iterations, S, d),
    the per-state mean of each refreshed target bank: the model's mean outcome after each
    iteration."""
    if not isinstance(cfg, DiSPOConfig):
        raise TypeError(f"cfg must be a DiSPOConfig, got {type(cfg).__name__}")
    if not 0.0 <= gamma < 1.0:
        raise ValueError(f"gamma must lie in [0, 1), got {gamma!r}")
    Phi = np.asarray(features, dtype=np.float64)
    data = nstep_targets(states, actions, Phi, gamma, cfg.n_step)
    S, d = Phi.shape
    A = int(n_actions) if n_actions is not None else int(np.max(actions)) + 1
    seen = Phi[np.asarray(states).ravel()]
    loc = torch.as_tensor(seen.mean(0) / (1 - gamma), dtype=torch.float32)
    scale = float(seen.std() / (1 - gamma)) or 1.0

    model = init_from(OutcomeDDPM(d, S, hidden=cfg.hidden, layers=cfg.layers, emb=cfg.emb,
                                  n_steps=cfg.diffusion_steps), generator)
    stay_x = (torch.as_tensor(Phi / (1 - gamma), dtype=torch.float32) - loc) / scale
    readout = init_from(_Readout(d, S, A, cfg.readout_hidden, cfg.readout_layers, cfg.emb,
                                 stay_x), generator)
    agent = DiSPO(model, readout, loc, scale, float(gamma), cfg)
    agent.low = agent.to_x(torch.as_tensor(Phi.min(0) / (1 - gamma), dtype=torch.float32))
    agent.high = agent.to_x(torch.as_tensor(Phi.max(0) / (1 - gamma), dtype=torch.float32))
    opt = torch.optim.Adam(list(model.parameters()) + list(readout.parameters()), lr=cfg.lr)

    t = {k: torch.as_tensor(v) for k, v in data.items()}
    partial = t["partial"].float()
    disc = t["discount"].float()[:, None]
    N = partial.shape[0]
    bank = torch.zeros(S, cfg.bank, d)                      # psi' = 0 before the first refresh
    all_states = torch.arange(S)
    hist = {"denoise": [], "readout": [], "bank_mean": []}
    acc_d, acc_r, m = 0.0, 0.0, 0
    for step in range(cfg.steps):
        if step and step % cfg.refresh == 0:                # one distributional Bellman iteration
            model.eval()
            x = agent._sample_x(all_states.repeat_interleave(cfg.bank), generator, cfg.sample_steps)
            bank = (x * scale + loc).reshape(S, cfg.bank, d)
            hist["bank_mean"].append(bank.mean(1).double().numpy())
            model.train()
            hist["denoise"].append(acc_d / m)
            hist["readout"].append(acc_r / m)
            acc_d, acc_r, m = 0.0, 0.0, 0
        idx = torch.randint(0, N, (cfg.batch,), generator=generator)
        pick = torch.randint(0, cfg.bank, (cfg.batch,), generator=generator)
        psi = partial[idx] + disc[idx] * bank[t["boot"][idx], pick]
        x0 = agent.to_x(psi)
        s = t["s"][idx]
        l_d = model.loss(x0, s, generator)
        l_r = nn.functional.cross_entropy(readout(s, x0), t["a"][idx])
        opt.zero_grad()
        (l_d + l_r).backward()
        opt.step()
        acc_d += float(l_d.detach())
        acc_r += float(l_r.detach())
        m += 1
    if m:
        hist["denoise"].append(acc_d / m)
        hist["readout"].append(acc_r / m)
    model.eval()
    readout.eval()
    agent.history = {k: np.array(v) for k, v in hist.items()}
    if not hist["bank_mean"]:
        agent.history["bank_mean"] = np.zeros((0, S, d))
    return agent


def plan(outcomes, w) -> tuple[np.ndarray, np.ndarray]:
    r"""Random-shooting planning over sampled outcomes (S, n, d): per state the index of
    :math:`\arg\max_k w^\top\psi_k` and its planned value :math:`\max_k w^\top\psi_k`, both (S,)."""
    psi = np.asarray(outcomes, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    if psi.ndim != 3 or w.shape != (psi.shape[2],):
        raise ValueError(f"outcomes must be (S, n, d) and w (d,); got {psi.shape}, {w.shape}")
    v = psi @ w
    k = v.argmax(axis=1)
    return k, v[np.arange(v.shape[0]), k]
