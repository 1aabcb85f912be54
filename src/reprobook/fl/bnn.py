r"""Small Bayesian and deterministic MLPs for federated experiments.

A :class:`BayesLinear` layer holds a mean-field Gaussian posterior over its weights,
$q(w) = \prod_i N(w_i; \mu_i, \sigma_i^2)$ with $\sigma_i = \operatorname{softplus}(\rho_i)$.
The forward pass uses the *local reparameterization trick*: for an input row $x$ the pre-activation
$a_j = \sum_i w_{ji} x_i + b_j$ is Gaussian under $q$, with

$$\mathbb E[a_j] = \sum_i \mu_{ji} x_i + \mu_{b_j}, \qquad
\operatorname{Var}[a_j] = \sum_i \sigma_{ji}^2 x_i^2 + \sigma_{b_j}^2,$$

so we sample $a_j$ directly (one independent weight draw per example, lower-variance gradients).
The KL to an isotropic prior $N(0, s^2)$ is in closed form,

$$\mathrm{KL}(q\,\|\,p) = \sum_i \Big[\log\frac{s}{\sigma_i} + \frac{\sigma_i^2 + \mu_i^2}{2 s^2} - \frac12\Big].$$
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F


def _check_sizes(sizes: Sequence[int]) -> list[int]:
    sizes = list(sizes)
    if len(sizes) < 2 or any(not isinstance(s, int) or s < 1 for s in sizes):
        raise ValueError(f"sizes must be >= 2 positive ints (input, hidden..., output), got {sizes!r}")
    return sizes


def gaussian_kl(mu: torch.Tensor, sigma: torch.Tensor, prior_std: float) -> torch.Tensor:
    """Closed-form KL(N(mu, sigma^2) || N(0, prior_std^2)), summed over all entries."""
    if prior_std <= 0:
        raise ValueError(f"prior_std must be > 0, got {prior_std}")
    s2 = prior_std ** 2
    return (math.log(prior_std) - torch.log(sigma) + (sigma ** 2 + mu ** 2) / (2 * s2) - 0.5).sum()


class BayesLinear(nn.Module):
    """Mean-field Gaussian linear layer with the local reparameterization trick."""

    def __init__(self, d_in: int, d_out: int, generator: torch.Generator, init_std: float = 0.02):
        super().__init__()
        scale = 1.0 / math.sqrt(d_in)
        self.mu_w = nn.Parameter(torch.randn(d_out, d_in, generator=generator) * scale)
        self.mu_b = nn.Parameter(torch.zeros(d_out))
        rho0 = math.log(math.expm1(init_std))          # softplus^{-1}(init_std)
        self.rho_w = nn.Parameter(torch.full((d_out, d_in), rho0))
        self.rho_b = nn.Parameter(torch.full((d_out,), rho0))

    def sigmas(self) -> tuple[torch.Tensor, torch.Tensor]:
        return F.softplus(self.rho_w), F.softplus(self.rho_b)

    def forward(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Sample pre-activations; ``generator=None`` returns the mean (posterior-mean weights)."""
        mean = F.linear(x, self.mu_w, self.mu_b)
        if generator is None:
            return mean
        sw, sb = self.sigmas()
        var = F.linear(x ** 2, sw ** 2, sb ** 2)
        eps = torch.randn(mean.shape, generator=generator)
        return mean + var.sqrt() * eps

    def kl(self, prior_std: float) -> torch.Tensor:
        sw, sb = self.sigmas()
        return gaussian_kl(self.mu_w, sw, prior_std) + gaussian_kl(self.mu_b, sb, prior_std)


class BNN(nn.Module):
    """A ReLU MLP of :class:`BayesLinear` layers; ``sizes = [d_in, hidden..., n_classes]``."""

    def __init__(self, sizes: Sequence[int], generator: torch.Generator, prior_std: float = 1.0):
        super().__init__()
        self.sizes = _check_sizes(sizes)
        if prior_std <= 0:
            raise ValueError(f"prior_std must be > 0, got {prior_std}")
        self.prior_std = float(prior_std)
        self.layers = nn.ModuleList(BayesLinear(a, b, generator)
                                    for a, b in zip(self.sizes[:-1], self.sizes[1:]))

    def forward(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Logits of one (per-example) posterior sample; the posterior mean if ``generator`` is None."""
        if x.ndim != 2 or x.shape[1] != self.sizes[0]:
            raise ValueError(f"x must have shape (n, {self.sizes[0]}), got {tuple(x.shape)}")
        for i, layer in enumerate(self.layers):
            x = layer(x, generator)
            if i < len(self.layers) - 1:
                x = torch.relu(x)
        return x

    def kl(self) -> torch.Tensor:
        return sum(layer.kl(self.prior_std) for layer in self.layers)

    @torch.no_grad()
    def predict_proba(self, x: torch.Tensor, n_samples: int, generator: torch.Generator) -> torch.Tensor:
        """Monte Carlo predictive mean (1/S) sum_s softmax(f(x; w_s))."""
        if n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        return torch.stack([torch.softmax(self(x, generator), -1) for _ in range(n_samples)]).mean(0)


class MLP(nn.Module):
    """Deterministic ReLU MLP (the FedAvg baseline), initialised from ``generator``."""

    def __init__(self, sizes: Sequence[int], generator: torch.Generator):
        super().__init__()
        self.sizes = _check_sizes(sizes)
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for a, b in zip(self.sizes[:-1], self.sizes[1:]):
            self.weights.append(nn.Parameter(torch.randn(b, a, generator=generator) / math.sqrt(a)))
            self.biases.append(nn.Parameter(torch.zeros(b)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2 or x.shape[1] != self.sizes[0]:
            raise ValueError(f"x must have shape (n, {self.sizes[0]}), got {tuple(x.shape)}")
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = F.linear(x, w, b)
            if i < len(self.weights) - 1:
                x = torch.relu(x)
        return x

    @torch.no_grad()
    def predict_proba(self, x: torch.Tensor, n_samples: int = 1, generator=None) -> torch.Tensor:
        return torch.softmax(self(x), -1)
