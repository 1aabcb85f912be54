r"""Train a stack of independent classifiers ("members") with SGD or SAM, each with its own
hyperparameters, in one batched loop.

Member :math:`g` has its own weights, learning rate per layer, SAM radius and data order; the
batched loss is the *sum* over members of each member's mean cross-entropy, so every member's
gradient is exactly what it would be alone. The step is SGD with heavy-ball momentum,

.. math:: b^l \leftarrow \mu b^l + \tilde g^l, \qquad W^l \leftarrow W^l - \eta^l_g\, b^l,

with :math:`\tilde g` the plain gradient (SGD) or the gradient at the perturbed point (SAM, any
:class:`~reprobook.optim.sam.PerturbationRule` built with ``member_dims=1``; both gradients on the
same minibatch). Members that share a data seed see the same minibatches, so a grid over
:math:`(\eta, \rho)` at one seed uses common random numbers.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .sam import CountingGradFn, PerturbationRule, autograd_grad_fn, sam_gradients

__all__ = ["MemberRun", "member_losses", "train_members", "accuracy"]


@dataclass
class MemberRun:
    """Final weights, each member's mean minibatch loss per epoch (at ``w``), and the gradient
    evaluations per member."""

    params: list[torch.Tensor]
    epoch_loss: list[torch.Tensor] = field(default_factory=list)
    grad_evals: int = 0


def member_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Each member's mean cross-entropy, a (G,) tensor; logits (G, B, C), labels (G, B)."""
    g, b, c = logits.shape
    per = F.cross_entropy(logits.reshape(g * b, c), labels.reshape(g * b), reduction="none")
    return per.reshape(g, b).mean(dim=1)


def _orders(member_seeds, n, epochs, device):
    # one permutation per distinct seed and epoch, shared by the members with that seed
    seeds = sorted(set(member_seeds))
    perms = {}
    for s in seeds:
        gen = torch.Generator().manual_seed(int(s))
        perms[s] = torch.stack([torch.randperm(n, generator=gen) for _ in range(epochs)])
    return torch.stack([perms[s] for s in member_seeds]).to(device)   # (G, epochs, n)


def train_members(params0: Sequence[torch.Tensor],
                  forward: Callable[[Sequence[torch.Tensor], torch.Tensor], torch.Tensor],
                  x: torch.Tensor, y: torch.Tensor, *, layer_lrs: Sequence[torch.Tensor],
                  member_seeds: Sequence[int], epochs: int, batch_size: int,
                  momentum: float = 0.9, rule: PerturbationRule | None = None) -> MemberRun:
    """Train the members from ``params0`` (one (G, ...) tensor per layer) for ``epochs`` epochs.

    ``forward(params, xb)`` maps inputs (G, B, d) to logits (G, B, C); ``x`` (n, d) and ``y`` (n,)
    are the training set; ``layer_lrs`` holds one (G,) tensor of learning rates per layer;
    ``member_seeds`` one data-order seed per member; ``rule`` None for SGD, else SAM's rule.
    Every epoch walks through ``n // batch_size`` full minibatches.
    """
    params = [p.detach().clone() for p in params0]
    G = params[0].shape[0]
    if any(p.shape[0] != G for p in params):
        raise ValueError("every layer must carry the same number of members (first dimension)")
    if len(layer_lrs) != len(params) or any(torch.as_tensor(lr).shape != (G,) for lr in layer_lrs):
        raise ValueError(f"layer_lrs must hold one ({G},) tensor per layer ({len(params)})")
    if len(member_seeds) != G:
        raise ValueError(f"member_seeds must have one seed per member ({G}), got "
                         f"{len(member_seeds)}")
    if x.dim() != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"x must be (n, d) and y (n,), got {tuple(x.shape)} and {tuple(y.shape)}")
    for name, v in (("epochs", epochs), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if batch_size > x.shape[0]:
        raise ValueError(f"batch_size {batch_size} exceeds the {x.shape[0]} training examples")
    if not 0 <= momentum < 1:
        raise ValueError(f"momentum must be in [0, 1), got {momentum}")
    if rule is not None and rule.member_dims != 1:
        raise ValueError("SAM's rule must be built with member_dims=1")
    lrs = [torch.as_tensor(lr, dtype=params[0].dtype, device=params[0].device).reshape(
        G, *[1] * (p.dim() - 1)) for lr, p in zip(layer_lrs, params)]
    bufs = [torch.zeros_like(p) for p in params]
    orders = _orders(list(member_seeds), x.shape[0], epochs, x.device)
    run = MemberRun(params)
    steps = x.shape[0] // batch_size
    for e in range(epochs):
        total = torch.zeros(G, dtype=params[0].dtype, device=params[0].device)
        for k in range(steps):
            idx = orders[:, e, k * batch_size:(k + 1) * batch_size]
            xb, yb = x[idx], y[idx]
            seen = []

            def loss_fn(p, xb=xb, yb=yb, seen=seen):
                per = member_losses(forward(p, xb), yb)
                seen.append(per.detach())          # the first call is at w: that loss is kept
                return per.sum()

            grad_fn = CountingGradFn(autograd_grad_fn(loss_fn))
            if rule is None:
                _, grads = grad_fn(params)
            else:
                grads = sam_gradients(grad_fn, params, rule).sam_grads
            for p, b, g, lr in zip(params, bufs, grads, lrs):
                b.mul_(momentum).add_(g)
                p.sub_(lr * b)
            run.grad_evals += grad_fn.calls
            total += seen[0]
        run.epoch_loss.append(total / steps)
    run.params = params
    return run


@torch.no_grad()
def accuracy(params: Sequence[torch.Tensor],
             forward: Callable[[Sequence[torch.Tensor], torch.Tensor], torch.Tensor],
             x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Accuracy of every member on the same data ``x`` (n, d), ``y`` (n,): a (G,) tensor."""
    G = params[0].shape[0]
    logits = forward(params, x.unsqueeze(0).expand(G, *x.shape))
    return (logits.argmax(dim=-1) == y.unsqueeze(0)).to(params[0].dtype).mean(dim=1)
