r"""Check SIM's gradient identity on a generator family whose score is known exactly.

Family: :math:`p_\theta=\mathcal N(m,\mathrm{diag}(e^{2\ell}))`, :math:`\theta=(m,\ell)`, drawn as
:math:`x_0=m+e^\ell\odot z`. At a noise level :math:`\sigma` the divergence with the sampling
distribution frozen at :math:`\theta_0`,

.. math:: \tilde{\mathcal D}(\theta')=E_{x_\sigma\sim p_{\theta_0,\sigma}}\Big[h\big(\sigma^2(s_{p_{\theta'},\sigma}(x_\sigma)
          -s_{q,\sigma}(x_\sigma))\big)\Big],

has the gradient that SIM claims to compute; here the score of :math:`p_{\theta'}` is analytic, so
:math:`\tilde{\mathcal D}` can be evaluated and differentiated by central finite differences with common
random numbers (:func:`finite_difference_gradient`). :func:`surrogate_gradient` computes the
gradient SIM actually uses: autograd of :func:`~.distill.generator_loss` with the exact score of
:math:`p_{\theta_0}` as the frozen fake score. ``estimator="pathwise"`` instead differentiates
:math:`E[h(\sigma^2(s_{\rm sg}-s_q)(x_\sigma(\theta)))]` through the samples only, the gradient a naive
implementation would take (it ignores how the score itself moves): a wrong method.
"""
from __future__ import annotations

import torch

from .distill import distance, generator_loss
from .gmm_score import DiagonalGaussian, GaussianMixture

__all__ = ["surrogate_gradient", "finite_difference_gradient", "relative_error", "cosine"]


def _draws(n: int, dim: int, generator: torch.Generator):
    z = torch.randn(n, dim, generator=generator, dtype=torch.float64)
    eps = torch.randn(n, dim, generator=generator, dtype=torch.float64)
    return z, eps


def _check(theta0: torch.Tensor, teacher: GaussianMixture) -> int:
    if theta0.ndim != 1 or theta0.numel() != 2 * teacher.dim:
        raise ValueError(f"theta0 must be (mean, log_std) flattened, {2 * teacher.dim} numbers; "
                         f"got shape {tuple(theta0.shape)}")
    return teacher.dim


def surrogate_gradient(theta0: torch.Tensor, teacher: GaussianMixture, sigma: float, n: int,
                       generator: torch.Generator, kind: str = "sim", c: float = 1.0,
                       estimator: str = "sim") -> torch.Tensor:
    """The gradient in :math:`\\theta` at ``theta0`` of SIM's surrogate (``estimator="sim"``) or of
    the naive pathwise loss (``"pathwise"``), from ``n`` Monte-Carlo draws (float64)."""
    if estimator not in ("sim", "pathwise"):
        raise ValueError(f"unknown estimator {estimator!r}; use 'sim' or 'pathwise'")
    d = _check(theta0, teacher)
    z, eps = _draws(n, d, generator)
    theta = theta0.detach().clone().to(torch.float64).requires_grad_(True)
    p = DiagonalGaussian(theta[:d], theta[d:])
    frozen = DiagonalGaussian(theta0[:d].detach().double(), theta0[d:].detach().double())
    sig = torch.full((n, 1), float(sigma), dtype=torch.float64)

    def fake(x, s):
        return x + s ** 2 * frozen.score(x, s)

    x0 = p.rsample(z)
    if estimator == "sim":
        loss = generator_loss(kind, x0, sig, eps, fake, teacher.denoise, c)
    else:
        xt = x0 + sig * eps
        loss = distance(kind, fake(xt, sig) - teacher.denoise(xt, sig), c).mean()
    (g,) = torch.autograd.grad(loss, theta)
    return g


def finite_difference_gradient(theta0: torch.Tensor, teacher: GaussianMixture, sigma: float, n: int,
                               generator: torch.Generator, kind: str = "sim", c: float = 1.0,
                               step: float = 1e-3) -> torch.Tensor:
    """Central differences of :math:`\\tilde{\\mathcal D}` at ``theta0`` with common random numbers."""
    d = _check(theta0, teacher)
    z, eps = _draws(n, d, generator)
    theta0 = theta0.detach().double()
    x0 = DiagonalGaussian(theta0[:d], theta0[d:]).rsample(z)
    xt = x0 + float(sigma) * eps
    s_q = teacher.score(xt, float(sigma))

    def value(theta):
        s_p = DiagonalGaussian(theta[:d], theta[d:]).score(xt, float(sigma))
        return float(distance(kind, float(sigma) ** 2 * (s_p - s_q), c).mean())

    g = torch.zeros_like(theta0)
    for i in range(theta0.numel()):
        e = torch.zeros_like(theta0)
        e[i] = step
        g[i] = (value(theta0 + e) - value(theta0 - e)) / (2 * step)
    return g


def relative_error(g: torch.Tensor, ref: torch.Tensor) -> float:
    """:math:`\\|g-g_{\\rm ref}\\|/\\|g_{\\rm ref}\\|`."""
    return float(torch.linalg.vector_norm(g - ref) / torch.linalg.vector_norm(ref))


def cosine(g: torch.Tensor, ref: torch.Tensor) -> float:
    return float(torch.dot(g, ref) / (torch.linalg.vector_norm(g) * torch.linalg.vector_norm(ref)))
