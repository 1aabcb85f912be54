r"""A state-conditioned denoising diffusion model (DDPM) of outcome vectors, for DiSPOs.

The model learns :math:`p(x\mid s)` for vectors :math:`x\in\mathbb R^d` (normalised successor
features, "outcomes") given a discrete state :math:`s`. It is the DDPM of Ho et al. with the cosine
schedule of Nichol & Dhariwal and deterministic DDIM sampling:

* **Forward process.** With :math:`K` diffusion steps and
  :math:`\bar\alpha_k = f(k)/f(0)`, :math:`f(k)=\cos^2\!\big(\tfrac{k/K+c}{1+c}\tfrac\pi2\big)`,
  :math:`c = 0.008`, a noisy outcome is :math:`x_k=\sqrt{\bar\alpha_k}\,x_0+\sqrt{1-\bar\alpha_k}\,
  \varepsilon`, :math:`\varepsilon\sim\mathcal N(0,I)`, :math:`k\in\{1..K\}`.
* **Network.** An MLP (SiLU) predicts :math:`\varepsilon` from :math:`x_k`, a sinusoidal embedding
  of :math:`k` and a learned embedding of :math:`s`.
* **Loss.** :math:`\mathbb E_{k,\varepsilon}\lVert\hat\varepsilon(x_k,k,s)-\varepsilon\rVert^2/d`
  (:meth:`OutcomeDDPM.loss`), :math:`k` uniform.
* **Sampling** (:meth:`OutcomeDDPM.sample`). DDIM with :math:`\eta=0` on an evenly spaced
  sub-sequence :math:`k_1>\dots>k_m` of the steps: from :math:`x_{k_1}\sim\mathcal N(0,I)`,
  :math:`\hat x_0=(x_k-\sqrt{1-\bar\alpha_k}\hat\varepsilon)/\sqrt{\bar\alpha_k}` and
  :math:`x_{k'}=\sqrt{\bar\alpha_{k'}}\hat x_0+\sqrt{1-\bar\alpha_{k'}}\hat\varepsilon`; the last
  :math:`\hat x_0` is the sample. Every random number comes from the caller's ``torch.Generator``.
"""
from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["cosine_alpha_bar", "timestep_embedding", "init_from", "OutcomeDDPM"]


@torch.no_grad()
def init_from(module: nn.Module, generator: torch.Generator) -> nn.Module:
    r"""Re-initialise ``module`` from ``generator``: every ``Linear`` weight uniform on
    :math:`\pm 1/\sqrt{\text{fan-in}}` (torch's default range) with zero bias, every ``Embedding``
    standard normal. Returns the module."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            bound = 1.0 / math.sqrt(m.in_features)
            m.weight.copy_((torch.rand(m.weight.shape, generator=generator) * 2 - 1) * bound)
            if m.bias is not None:
                m.bias.zero_()
        elif isinstance(m, nn.Embedding):
            m.weight.copy_(torch.randn(m.weight.shape, generator=generator))
    return module


def cosine_alpha_bar(n_steps: int, offset: float = 0.008) -> torch.Tensor:
    r""":math:`\bar\alpha_k` for :math:`k = 0..K` (shape (K+1,), :math:`\bar\alpha_0 = 1`), decreasing,
    with each :math:`\beta_k = 1-\bar\alpha_k/\bar\alpha_{k-1}` clipped at 0.999 (so
    :math:`\bar\alpha_K > 0`)."""
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be an int >= 1, got {n_steps!r}")
    k = torch.arange(n_steps + 1, dtype=torch.float64)
    f = torch.cos((k / n_steps + offset) / (1 + offset) * math.pi / 2) ** 2
    ab = f / f[0]
    beta = (1 - ab[1:] / ab[:-1]).clamp(max=0.999)
    return torch.cat([torch.ones(1, dtype=torch.float64), torch.cumprod(1 - beta, 0)])


def timestep_embedding(k: torch.Tensor, dim: int, n_steps: int) -> torch.Tensor:
    """Sinusoidal embedding (dim even) of integer steps ``k`` (shape (B,)), scaled to [0, 1000]."""
    if dim % 2:
        raise ValueError(f"the step embedding dimension must be even, got {dim}")
    t = k.to(torch.float32) * (1000.0 / n_steps)
    freqs = torch.exp(-math.log(10_000.0) * torch.arange(dim // 2, dtype=torch.float32) / (dim // 2))
    ang = t[:, None] * freqs[None]
    return torch.cat([torch.sin(ang), torch.cos(ang)], dim=1)


class OutcomeDDPM(nn.Module):
    r"""An :math:`\varepsilon`-prediction DDPM of ``dim``-vectors conditioned on one of ``n_states``.

    ``hidden`` units in each of ``layers`` hidden layers; ``emb`` the width of the step and state
    embeddings; ``n_steps`` = :math:`K`. Initialised from ``generator`` (a ``torch.Generator``).
    """

    def __init__(self, dim: int, n_states: int, *, hidden: int = 256, layers: int = 3,
                 emb: int = 64, n_steps: int = 20, generator: torch.Generator | None = None):
        super().__init__()
        for name, v, lo in (("dim", dim, 1), ("n_states", n_states, 1), ("hidden", hidden, 1),
                            ("layers", layers, 1), ("emb", emb, 2), ("n_steps", n_steps, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
        self.dim, self.n_states, self.n_steps, self.emb_dim = dim, n_states, n_steps, emb
        self.state_emb = nn.Embedding(n_states, emb)
        sizes = [dim + 2 * emb] + [hidden] * layers
        mods: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            mods += [nn.Linear(a, b), nn.SiLU()]
        mods.append(nn.Linear(sizes[-1], dim))
        self.net = nn.Sequential(*mods)
        self.register_buffer("alpha_bar", cosine_alpha_bar(n_steps).to(torch.float32))
        if generator is not None:   # reproducible initialisation from the caller's generator
            init_from(self, generator)

    def _check(self, x: torch.Tensor | None, s: torch.Tensor) -> None:
        if s.dim() != 1 or s.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"states must be a 1-d integer tensor, got {tuple(s.shape)} {s.dtype}")
        if s.numel() and (int(s.min()) < 0 or int(s.max()) >= self.n_states):
            raise ValueError(f"states must lie in [0, {self.n_states})")
        if x is not None and (x.dim() != 2 or x.shape != (s.shape[0], self.dim)):
            raise ValueError(f"outcomes must have shape (B, {self.dim}) with B = {s.shape[0]} "
                             f"states, got {tuple(x.shape)}")

    def eps(self, x: torch.Tensor, k: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """The predicted noise at step ``k`` (B,) for noisy outcomes ``x`` (B, dim) in states ``s``."""
        h = torch.cat([x, timestep_embedding(k, self.emb_dim, self.n_steps), self.state_emb(s)], 1)
        return self.net(h)

    def loss(self, x0: torch.Tensor, s: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The denoising loss on clean outcomes ``x0`` (B, dim) of states ``s`` (B,)."""
        self._check(x0, s)
        B = x0.shape[0]
        k = torch.randint(1, self.n_steps + 1, (B,), generator=generator)
        noise = torch.randn(x0.shape, generator=generator)
        ab = self.alpha_bar[k][:, None]
        xk = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
        return ((self.eps(xk, k, s) - noise) ** 2).mean()

    @torch.no_grad()
    def sample(self, s: torch.Tensor, generator: torch.Generator, n_sample_steps: int = 10,
               low: torch.Tensor | None = None, high: torch.Tensor | None = None) -> torch.Tensor:
        r"""One outcome per entry of ``s`` (B,) by DDIM (eta = 0) in ``n_sample_steps`` steps.

        ``low``/``high`` (dim,) clip every :math:`\hat x_0` to a box known to hold the data (as
        DDPM clips images to [-1, 1]): early steps divide by :math:`\sqrt{\bar\alpha_k}\approx0`
        and would otherwise throw a half-trained model's errors far outside the data.
        """
        self._check(None, s)
        if isinstance(n_sample_steps, bool) or not isinstance(n_sample_steps, int) \
                or not 1 <= n_sample_steps <= self.n_steps:
            raise ValueError(f"n_sample_steps must be an int in [1, {self.n_steps}], got "
                             f"{n_sample_steps!r}")
        ks = torch.linspace(self.n_steps, 1, n_sample_steps).round().long().tolist()
        x = torch.randn((s.shape[0], self.dim), generator=generator)
        x0 = x
        for i, k in enumerate(ks):
            kk = torch.full((s.shape[0],), k, dtype=torch.long)
            ab = self.alpha_bar[k]
            e = self.eps(x, kk, s)
            x0 = (x - (1 - ab).sqrt() * e) / ab.sqrt()
            if low is not None or high is not None:
                x0 = torch.clamp(x0, low, high)
                e = (x - ab.sqrt() * x0) / (1 - ab).sqrt()    # the noise consistent with the clip
            ab_prev = self.alpha_bar[ks[i + 1]] if i + 1 < len(ks) else None
            if ab_prev is not None:
                x = ab_prev.sqrt() * x0 + (1 - ab_prev).sqrt() * e
        return x0
