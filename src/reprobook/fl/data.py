r"""Heterogeneous small-data federated classification with a known ground truth.

A fixed random *teacher* MLP $f^\star: \mathbb R^d \to \mathbb R^K$ gives every client the same
conditional law $p^\star(y \mid x) = \operatorname{softmax}(f^\star(x))$; what differs is $p_c(x, y)$:

* **covariate shift**: client $c$ draws $x \sim N(h\,\mu_c, I)$, with $\mu_c \sim N(0, s^2 I)$;
* **label skew**: its class proportions are $\pi_c \sim \mathrm{Dirichlet}(a(h)\mathbf 1)$, with
  $a(h) = 10^{1 - 2h}$ (from near-IID at $h = 0$ to a few dominant classes at $h = 1$), imposed by
  keeping teacher-labelled draws class by class;
* **sizes**: client $c$ holds ``sizes[c]`` training points (small), and a test set from the same law.

The public *alignment set* is unlabelled, drawn from the pooled input law (an equal mixture of the
clients' input distributions). The heterogeneity knob is $h \in [0, 1]$.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Client:
    x: torch.Tensor          # (n, d) training inputs
    y: torch.Tensor          # (n,) training labels
    x_test: torch.Tensor
    y_test: torch.Tensor
    proportions: np.ndarray  # pi_c, the client's class proportions


@dataclass
class FederatedData:
    clients: list[Client]
    public: torch.Tensor     # (n_public, d) unlabelled alignment set
    n_classes: int
    dim: int


def _teacher(dim, n_classes, hidden, rng):
    w1 = rng.normal(size=(dim, hidden)) / np.sqrt(dim)
    w2 = rng.normal(size=(hidden, n_classes)) * 3.0 / np.sqrt(hidden)
    return lambda x: np.maximum(x @ w1, 0) @ w2 * 2.0


def make_federated(sizes, n_test: int, n_public: int, heterogeneity: float, rng: np.random.Generator,
                   dim: int = 5, n_classes: int = 4, shift_scale: float = 1.5,
                   teacher_seed: int = 1234) -> FederatedData:
    """Draw the clients' data; the teacher is fixed by ``teacher_seed`` (the shared truth)."""
    sizes = [int(s) for s in np.atleast_1d(sizes)]
    if len(sizes) < 2 or min(sizes) < 1:
        raise ValueError(f"sizes must list >= 2 client sizes >= 1, got {sizes}")
    if not 0 <= heterogeneity <= 1:
        raise ValueError(f"heterogeneity must be in [0, 1], got {heterogeneity}")
    if n_test < 1 or n_public < 1:
        raise ValueError(f"n_test and n_public must be >= 1, got {n_test}, {n_public}")
    f = _teacher(dim, n_classes, 32, np.random.default_rng(teacher_seed))
    conc = 10.0 ** (1 - 2 * heterogeneity)
    means = heterogeneity * shift_scale * rng.normal(size=(len(sizes), dim))

    def draw(c, n, pi):
        # keep teacher-labelled draws until each class has its quota
        quota = rng.multinomial(n, pi)
        xs, ys = [], []
        need = quota.copy()
        while need.sum() > 0:
            x = means[c] + rng.normal(size=(4 * n + 64, dim))
            p = np.exp(f(x) - f(x).max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            y = (p.cumsum(1) > rng.random((len(x), 1))).argmax(1)
            for k in range(n_classes):
                take = np.flatnonzero(y == k)[:need[k]]
                xs.append(x[take]); ys.append(y[take]); need[k] -= len(take)
        x, y = np.concatenate(xs), np.concatenate(ys)
        order = rng.permutation(len(y))
        return (torch.tensor(x[order], dtype=torch.float32), torch.tensor(y[order], dtype=torch.long))

    clients = []
    for c, n in enumerate(sizes):
        pi = rng.dirichlet(np.full(n_classes, conc))
        pi = 0.98 * pi + 0.02 / n_classes          # every class stays (barely) possible
        x, y = draw(c, n, pi)
        xt, yt = draw(c, n_test, pi)
        clients.append(Client(x, y, xt, yt, pi))
    which = rng.integers(len(sizes), size=n_public)
    public = means[which] + rng.normal(size=(n_public, dim))
    return FederatedData(clients, torch.tensor(public, dtype=torch.float32), n_classes, dim)
