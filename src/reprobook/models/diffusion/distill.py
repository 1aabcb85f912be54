r"""Data-free one-step distillation of a diffusion teacher: SIM, SiD-type and Diff-Instruct losses.

A generator :math:`x_0=g_\theta(z)` defines :math:`p_\theta`; the teacher knows only the scores
:math:`s_{q,\sigma}` of the diffused data (here through its denoiser
:math:`D_q(x,\sigma)=x+\sigma^2 s_{q,\sigma}(x)`). An online *fake* denoiser :math:`D_\psi` is trained by
denoising score matching on generator samples, so :math:`s_\psi\approx s_{p_\theta,\sigma}`.

**Score implicit matching (SIM; Luo et al. 2024).** The divergence
:math:`\mathcal D(\theta)=E_\sigma E_{x_\sigma\sim p_{\theta,\sigma}}[d_\sigma(s_{p_\theta,\sigma}-s_{q,\sigma})]`
cannot be evaluated (it needs :math:`s_{p_\theta}` as a function of :math:`\theta`), but with the
sampling distribution held fixed its gradient equals that of the tractable surrogate

.. math:: \mathcal L(\theta)=-E_{z,\varepsilon,\sigma}\Big[d_\sigma'(y)^\top\big(s_{\rm sg}(x_\sigma)
          -\nabla_{x_\sigma}\log q(x_\sigma\mid x_0)\big)\Big],\quad x_\sigma=g_\theta(z)+\sigma\varepsilon,

with :math:`y=s_{\rm sg}(x_\sigma)-s_q(x_\sigma)`, the fake score's *parameters* frozen
(:math:`s_{\rm sg}`) and gradients flowing through :math:`x_\sigma` everywhere;
:math:`-\nabla\log q(x_\sigma|x_0)=\varepsilon/\sigma` is a constant. (Proof sketch: Stein's identity
:math:`E_p[g^\top s_p]=-E_p[\nabla\!\cdot g]` differentiated in :math:`\theta`, then the conditional
Stein identity turns :math:`\nabla\!\cdot g` into :math:`-g^\top\nabla\log q(x_\sigma|x_0)`.)

In denoiser units, :math:`\delta=D_\psi(x_\sigma)-D_q(x_\sigma)=\sigma^2y` and
:math:`r=D_\psi(x_\sigma)-x_0=\sigma^2(s_\psi+\varepsilon/\sigma)`. We measure the distance on
:math:`\delta` (so every noise level weighs alike), :math:`d_\sigma(y)=h(\sigma^2y)`:

* ``"sim"``: pseudo-Huber :math:`h(\delta)=\sqrt{\|\delta\|^2+c^2}-c`; loss :math:`-E[h'(\delta)^\top r]`,
  :math:`h'(\delta)=\delta/\sqrt{\|\delta\|^2+c^2}`;
* ``"sid"``: squared distance :math:`h=\tfrac12\|\delta\|^2`; loss :math:`-E[\delta^\top r]`, SiD's
  :math:`(D_q-D_\psi)^\top(D_\psi-x_0)` form with :math:`\alpha=0` and unit weight;
* ``"diff-instruct"``: the KL gradient :math:`E[\sigma^2(s_\psi-s_q)^\top\partial x_\sigma/\partial\theta]`,
  loss :math:`E[\mathrm{sg}(\delta)^\top x_\sigma]`.

:func:`distill` takes only the teacher's denoiser: it never sees data.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from .schedules import log_uniform_sigmas
from .train import dsm_loss

__all__ = ["KINDS", "OneStepGenerator", "DistillConfig", "distance", "distance_grad",
           "generator_loss", "distill"]

KINDS = ("sim", "sid", "diff-instruct")
Denoiser = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown distillation loss {kind!r}; choose one of {KINDS}")
    return kind


def distance(kind: str, delta: torch.Tensor, c: float = 1.0) -> torch.Tensor:
    """:math:`h(\\delta)` per row: pseudo-Huber (``"sim"``) or half squared norm (``"sid"``)."""
    if _kind(kind) == "sim":
        return torch.sqrt((delta ** 2).sum(-1) + c ** 2) - c
    if kind == "sid":
        return 0.5 * (delta ** 2).sum(-1)
    raise ValueError("diff-instruct has no distance d: it follows the KL gradient")


def distance_grad(kind: str, delta: torch.Tensor, c: float = 1.0) -> torch.Tensor:
    """:math:`h'(\\delta)`, row-wise."""
    if _kind(kind) == "sim":
        return delta / torch.sqrt((delta ** 2).sum(-1, keepdim=True) + c ** 2)
    if kind == "sid":
        return delta
    raise ValueError("diff-instruct has no distance d: it follows the KL gradient")


def generator_loss(kind: str, x0: torch.Tensor, sigma: torch.Tensor, eps: torch.Tensor,
                   fake_denoise: Denoiser, teacher_denoise: Denoiser, c: float = 1.0) -> torch.Tensor:
    """The generator's surrogate loss on one batch; its gradient in :math:`\\theta` (through ``x0``)
    is the method's gradient. ``fake_denoise`` must not carry parameter gradients (freeze it)."""
    _kind(kind)
    if x0.shape != eps.shape or sigma.ndim != 2 or sigma.shape[0] != x0.shape[0]:
        raise ValueError(f"need x0, eps of equal shape (n, d) and sigma (n, 1); got "
                         f"{tuple(x0.shape)}, {tuple(eps.shape)}, {tuple(sigma.shape)}")
    xt = x0 + sigma * eps
    d_fake = fake_denoise(xt, sigma)
    delta = d_fake - teacher_denoise(xt, sigma)
    if kind == "diff-instruct":
        return (delta.detach() * xt).sum(-1).mean()
    return -(distance_grad(kind, delta, c) * (d_fake - x0)).sum(-1).mean()


class OneStepGenerator(nn.Module):
    """:math:`g_\\theta(z)=D_\\theta(\\sigma_g z,\\sigma_g)`: a denoiser applied once at level
    :math:`\\sigma_g` (SiD's and SIM's generator), initialised from a copy of ``net``."""

    def __init__(self, net: nn.Module, sigma_init: float = 2.5):
        super().__init__()
        if sigma_init <= 0:
            raise ValueError(f"sigma_init must be positive, got {sigma_init}")
        self.net, self.sigma_init = copy.deepcopy(net), float(sigma_init)
        self.net.requires_grad_(True)

    @property
    def dim(self) -> int:
        return self.net.dim

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(self.sigma_init * z, self.sigma_init)

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        return self(torch.randn(n, self.dim, generator=generator))


@dataclass(frozen=True)
class DistillConfig:
    iterations: int = 300
    batch: int = 256
    lr_gen: float = 1e-4
    lr_fake: float = 1e-3
    sigma_min: float = 0.01           # generator and fake-score noise levels, log-uniform
    sigma_max: float = 10.0
    c: float = 1.0                    # pseudo-Huber constant (denoiser units)
    fake_steps: int = 1               # DSM steps of the fake score per generator step
    warmup: int = 100                 # DSM steps of the fake score on the initial generator
    betas: tuple = (0.0, 0.999)       # Adam's, as SiD and DMD use for both networks

    def __post_init__(self):
        if self.iterations < 0 or self.batch < 1 or self.fake_steps < 1 or self.warmup < 0:
            raise ValueError(f"bad DistillConfig {self}")


def distill(kind: str, generator: OneStepGenerator, fake: nn.Module, teacher_denoise: Denoiser,
            config: DistillConfig, torch_gen: torch.Generator,
            callback: Callable[[int], None] | None = None) -> list[float]:
    """Train ``generator`` with loss ``kind`` against ``teacher_denoise``, alternating DSM steps of
    the online fake denoiser ``fake`` on (detached) generator samples. Data-free: nothing here draws
    from the data. ``callback(i)`` runs after iterations ``0..iterations`` (0 = before training).
    Returns the generator loss per iteration."""
    _kind(kind)
    cfg = config
    opt_g = torch.optim.Adam(generator.parameters(), lr=cfg.lr_gen, betas=cfg.betas)
    opt_f = torch.optim.Adam(fake.parameters(), lr=cfg.lr_fake, betas=cfg.betas)
    dim = generator.dim

    def fake_step():
        with torch.no_grad():
            x0 = generator.sample(cfg.batch, torch_gen)
        sig = log_uniform_sigmas(cfg.batch, cfg.sigma_min, cfg.sigma_max, torch_gen, x0.dtype)
        loss = dsm_loss(fake, x0, sig, torch.randn(x0.shape, generator=torch_gen, dtype=x0.dtype))
        opt_f.zero_grad(set_to_none=True)
        loss.backward()
        opt_f.step()

    for _ in range(cfg.warmup):
        fake_step()
    if callback:
        callback(0)
    losses = []
    for it in range(1, cfg.iterations + 1):
        for _ in range(cfg.fake_steps):
            fake_step()
        fake.requires_grad_(False)     # sg on the fake score's parameters; x_t still carries gradients
        z = torch.randn(cfg.batch, dim, generator=torch_gen)
        sig = log_uniform_sigmas(cfg.batch, cfg.sigma_min, cfg.sigma_max, torch_gen)
        eps = torch.randn(cfg.batch, dim, generator=torch_gen)
        loss = generator_loss(kind, generator(z), sig, eps, fake, teacher_denoise, cfg.c)
        opt_g.zero_grad(set_to_none=True)
        loss.backward()
        opt_g.step()
        fake.requires_grad_(True)
        losses.append(float(loss.detach()))
        if callback:
            callback(it)
    return losses
