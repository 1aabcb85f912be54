r"""Exact scores of a Gaussian mixture (and of a diagonal Gaussian) diffused by the VE process.

Under :math:`x_\sigma=x_0+\sigma\varepsilon`, an isotropic mixture
:math:`p_0=\sum_k\pi_k\,\mathcal N(\mu_k,s_k^2I)` stays one:

.. math:: p_\sigma(x)=\sum_k\pi_k\,\mathcal N\big(x;\mu_k,(s_k^2+\sigma^2)I\big),\qquad
          \nabla_x\log p_\sigma(x)=-\sum_k r_k(x)\,\frac{x-\mu_k}{s_k^2+\sigma^2},

with responsibilities :math:`r_k(x)\propto\pi_k\mathcal N(x;\mu_k,(s_k^2+\sigma^2)I)`. The denoiser
(posterior mean of :math:`x_0`) is Tweedie's :math:`D(x,\sigma)=x+\sigma^2\nabla\log p_\sigma(x)`.

A diagonal Gaussian :math:`\mathcal N(m,\mathrm{diag}(e^{2\ell}))` diffuses to
:math:`\mathcal N(m,\mathrm{diag}(e^{2\ell}+\sigma^2))`, score :math:`-(x-m)/(e^{2\ell}+\sigma^2)`;
its parameters may carry gradients (it is the generator family of the gradient check).

``sigma`` is a float or a tensor broadcastable to (n, 1).
"""
from __future__ import annotations

import math

import torch

__all__ = ["GaussianMixture", "DiagonalGaussian"]


def _sig2(sigma, like: torch.Tensor) -> torch.Tensor:
    s = torch.as_tensor(sigma, dtype=like.dtype, device=like.device)
    if s.ndim == 1:
        s = s[:, None]
    return s ** 2


class GaussianMixture:
    """An isotropic Gaussian mixture: ``means`` (K, d), ``stds`` (K,), ``weights`` (K,) summing to 1."""

    def __init__(self, means, stds, weights=None, dtype=torch.float64):
        self.means = torch.as_tensor(means, dtype=dtype)
        if self.means.ndim != 2:
            raise ValueError(f"means must have shape (K, d), got {tuple(self.means.shape)}")
        k = self.means.shape[0]
        self.stds = torch.as_tensor(stds, dtype=dtype).reshape(-1).expand(k).clone()
        if (self.stds <= 0).any():
            raise ValueError("stds must be positive")
        w = torch.full((k,), 1.0 / k, dtype=dtype) if weights is None else torch.as_tensor(
            weights, dtype=dtype)
        if w.shape != (k,) or (w < 0).any() or abs(float(w.sum()) - 1) > 1e-9:
            raise ValueError(f"weights must be {k} non-negative numbers summing to 1")
        self.weights = w

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    @classmethod
    def ring(cls, k: int = 8, radius: float = 2.0, std: float = 0.05, dtype=torch.float64):
        """``k`` equal-weight modes evenly spaced on a circle in 2-D."""
        a = torch.arange(k, dtype=dtype) * (2 * math.pi / k)
        return cls(radius * torch.stack([a.cos(), a.sin()], 1), std, dtype=dtype)

    @classmethod
    def random(cls, k: int, dim: int, generator: torch.Generator, scale: float = 2.0,
               std: float = 0.2, dtype=torch.float64):
        """``k`` equal-weight modes with means drawn from N(0, scale^2 I) in ``dim`` dimensions."""
        return cls(scale * torch.randn(k, dim, generator=generator, dtype=dtype), std, dtype=dtype)

    def _check(self, x: torch.Tensor) -> None:
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x must have shape (n, {self.dim}), got {tuple(x.shape)}")

    def _component_logp(self, x: torch.Tensor, sigma) -> tuple[torch.Tensor, torch.Tensor]:
        self._check(x)
        m, v0, w = (t.to(x.dtype) for t in (self.means, self.stds ** 2, self.weights))
        var = v0[None, :] + _sig2(sigma, x)                            # (n or 1, K)
        sq = ((x[:, None, :] - m[None]) ** 2).sum(-1)                  # (n, K)
        logp = torch.log(w)[None] - 0.5 * sq / var - 0.5 * self.dim * torch.log(2 * math.pi * var)
        return logp, var

    def log_prob(self, x: torch.Tensor, sigma=0.0) -> torch.Tensor:
        """:math:`\\log p_\\sigma(x)`, shape (n,)."""
        return torch.logsumexp(self._component_logp(x, sigma)[0], dim=1)

    def responsibilities(self, x: torch.Tensor, sigma=0.0) -> torch.Tensor:
        return torch.softmax(self._component_logp(x, sigma)[0], dim=1)

    def score(self, x: torch.Tensor, sigma=0.0) -> torch.Tensor:
        """:math:`\\nabla_x\\log p_\\sigma(x)`, shape (n, d); differentiable in ``x``."""
        logp, var = self._component_logp(x, sigma)
        r = torch.softmax(logp, dim=1)
        m = self.means.to(x.dtype)
        return -((r / var)[:, :, None] * (x[:, None, :] - m[None])).sum(1)

    def denoise(self, x: torch.Tensor, sigma) -> torch.Tensor:
        """Tweedie's posterior mean :math:`E[x_0\\mid x_\\sigma=x]`."""
        return x + _sig2(sigma, x) * self.score(x, sigma)

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        k = torch.multinomial(self.weights, n, replacement=True, generator=generator)
        z = torch.randn(n, self.dim, generator=generator, dtype=self.means.dtype)
        return self.means[k] + self.stds[k, None] * z

    def mean(self) -> torch.Tensor:
        return self.weights @ self.means

    def covariance(self) -> torch.Tensor:
        mu = self.mean()
        c = (self.weights[:, None] * (self.means - mu)).T @ (self.means - mu)
        return c + torch.eye(self.dim, dtype=c.dtype) * float(self.weights @ self.stds ** 2)


class DiagonalGaussian:
    """:math:`\\mathcal N(m,\\mathrm{diag}(e^{2\\ell}))` with tensors ``mean`` and ``log_std`` (d,)."""

    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor):
        if mean.ndim != 1 or log_std.shape != mean.shape:
            raise ValueError(f"mean and log_std must be 1-d of equal shape, got "
                             f"{tuple(mean.shape)} and {tuple(log_std.shape)}")
        self.mean, self.log_std = mean, log_std

    def var(self, sigma=0.0) -> torch.Tensor:
        return torch.exp(2 * self.log_std)[None] + _sig2(sigma, self.mean)

    def score(self, x: torch.Tensor, sigma=0.0) -> torch.Tensor:
        return -(x - self.mean[None]) / self.var(sigma)

    def log_prob(self, x: torch.Tensor, sigma=0.0) -> torch.Tensor:
        v = self.var(sigma)
        return (-0.5 * (x - self.mean) ** 2 / v - 0.5 * torch.log(2 * math.pi * v)).sum(-1)

    def rsample(self, z: torch.Tensor) -> torch.Tensor:
        """The reparametrised draw :math:`m+e^{\\ell}\\odot z` (gradients flow to the parameters)."""
        return self.mean[None] + torch.exp(self.log_std)[None] * z
