r"""Post-hoc OOD scores of a classifier (higher = more in-distribution).

From the logits :math:`f(x)\in\mathbb R^C`:

* MSP (Hendrycks & Gimpel 2017): :math:`\max_c \mathrm{softmax}(f(x))_c`;
* max-logit (Hendrycks et al. 2022): :math:`\max_c f_c(x)`;
* energy (Liu et al. 2020), negated free energy at temperature :math:`T`:
  :math:`T\log\sum_c e^{f_c(x)/T}`.

From the penultimate features :math:`z(x)\in\mathbb R^D`:

* kNN (Sun et al. 2022): with :math:`\hat z = z/\lVert z\rVert`, the negated Euclidean distance
  from :math:`\hat z(x)` to its :math:`k`-th nearest normalised training feature. On unit vectors
  this is a monotone function of the cosine similarity, :math:`\lVert a-b\rVert^2 = 2-2a^\top b`.
"""
from __future__ import annotations

import torch

__all__ = ["msp", "max_logit", "energy", "KNNScore"]


def _logits(logits) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or logits.shape[1] < 2:
        raise ValueError(f"logits must be a (n, classes >= 2) tensor, got "
                         f"{tuple(getattr(logits, 'shape', ())) or type(logits).__name__}")
    return logits


def msp(logits: torch.Tensor) -> torch.Tensor:
    """Maximum softmax probability of each row, shape (n,)."""
    return torch.softmax(_logits(logits), dim=1).amax(dim=1)


def max_logit(logits: torch.Tensor) -> torch.Tensor:
    """Largest logit of each row, shape (n,)."""
    return _logits(logits).amax(dim=1)


def energy(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Negated free energy :math:`T\\,\\mathrm{logsumexp}(f/T)` of each row, shape (n,)."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    return temperature * torch.logsumexp(_logits(logits) / temperature, dim=1)


def _normalise(z: torch.Tensor) -> torch.Tensor:
    # a zero feature vector (a dead ReLU layer) has no direction: keep it at the origin
    return z / z.norm(dim=1, keepdim=True).clamp_min(1e-12)


class KNNScore:
    """The kNN score: negated distance to the ``k``-th nearest normalised training feature.

    ``KNNScore(train_features, k)(features)`` scores new features, shape (n,). Distances are
    computed in blocks of ``block`` rows so that memory stays (block, n_train).
    """

    def __init__(self, train_features: torch.Tensor, k: int = 10, block: int = 1024):
        if not isinstance(train_features, torch.Tensor) or train_features.dim() != 2:
            raise ValueError("train_features must be a (n_train, dim) tensor, got "
                             f"{tuple(getattr(train_features, 'shape', ()))}")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= len(train_features):
            raise ValueError(f"k must be an int in [1, {len(train_features)}], got {k!r}")
        self.bank, self.k, self.block = _normalise(train_features), k, int(block)

    def __call__(self, features: torch.Tensor) -> torch.Tensor:
        if (not isinstance(features, torch.Tensor) or features.dim() != 2
                or features.shape[1] != self.bank.shape[1]):
            raise ValueError(f"features must be (n, {self.bank.shape[1]}), got "
                             f"{tuple(getattr(features, 'shape', ()))}")
        q = _normalise(features.to(self.bank.dtype))
        out = []
        for rows in q.split(self.block):
            # squared distances of unit vectors, clamped at 0 against round-off
            d2 = (2.0 - 2.0 * rows @ self.bank.T).clamp_min(0.0)
            out.append(-d2.kthvalue(self.k, dim=1).values.sqrt())
        return torch.cat(out)
