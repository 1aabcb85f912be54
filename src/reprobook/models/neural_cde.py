r"""A small neural controlled differential equation (Kidger et al., 2020), the continuous-time
baseline of the Rough Transformer comparison, solved by explicit Euler on the observation grid.

The hidden state follows :math:`dh_t = f_\theta(h_t)\,dX_t` along the piecewise-linear
interpolant :math:`X` of the observed points :math:`(t_i, x_i)`, with
:math:`f_\theta:\mathbb R^{H}\to\mathbb R^{H\times d}` an MLP ending in :math:`\tanh`. One Euler
step per segment,

.. math:: h_{i+1} = h_i + f_\theta(h_i)\,(X_{t_{i+1}} - X_{t_i}),\qquad h_0 = \ell_\theta(X_{t_0}),

then logits :math:`= W h_n`. A padded point that repeats the last observation has a zero increment
and leaves :math:`h` unchanged, so batches of different lengths need no mask. The cost is
:math:`n` *sequential* steps per sample: linear in the length but not parallel over time.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["NeuralCDE"]


class NeuralCDE(nn.Module):
    def __init__(self, in_dim: int, n_classes: int, *, hidden: int = 32, width: int = 64):
        super().__init__()
        if in_dim < 1 or n_classes < 2 or hidden < 1 or width < 1:
            raise ValueError(f"invalid NeuralCDE sizes in_dim={in_dim}, n_classes={n_classes}, "
                             f"hidden={hidden}, width={width}")
        self.in_dim, self.hidden = int(in_dim), int(hidden)
        self.register_buffer("scale", torch.ones(in_dim))
        self.init = nn.Linear(in_dim, hidden)
        self.field = nn.Sequential(nn.Linear(hidden, width), nn.ReLU(), nn.Linear(width, hidden * in_dim),
                                   nn.Tanh())
        self.readout = nn.Linear(hidden, n_classes)

    @torch.no_grad()
    def fit_scaling(self, path: torch.Tensor, lengths=None, eps: float = 1e-6):
        """Scale each channel by the standard deviation of its training increments (unit steps)."""
        self.scale.copy_(path.diff(dim=1).reshape(-1, self.in_dim).double().std(0).clamp_min(eps)
                         * path.shape[1] ** 0.5)
        return self

    def forward(self, path: torch.Tensor, lengths=None) -> torch.Tensor:
        if path.ndim != 3 or path.shape[-1] != self.in_dim:
            raise ValueError(f"expected path [batch, points, {self.in_dim}], got {tuple(path.shape)}")
        X = (path / self.scale).to(self.init.weight.dtype)
        dX = X.diff(dim=1)
        h = self.init(X[:, 0])
        B = X.shape[0]
        for i in range(dX.shape[1]):
            h = h + torch.bmm(self.field(h).view(B, self.hidden, self.in_dim), dX[:, i, :, None])[..., 0]
        return self.readout(h)
