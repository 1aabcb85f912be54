r"""Train the factors of a scale-invariant problem :math:`f(XY^\top)` with SGD, SAM or BAR.

One loop for all three, so that they differ only in the step (same data, same minibatches, same
learning rate, same number of steps):

* ``"sgd"``: :math:`X \leftarrow X - \eta g_X`, :math:`Y \leftarrow Y - \eta g_Y`;
* ``"sam"``: the same with the gradients taken at the perturbed point (a
  :class:`~reprobook.optim.sam.PerturbationRule`; SAM's :math:`\rho g/\|g\|` by default), on the
  same minibatch;
* ``"bar"``: the factors are first rescaled by BAR (:func:`~reprobook.optim.bar.bar_rescale`, with
  the minibatch gradients at the current point), then the SGD step with those gradients.

The problem is one of :mod:`reprobook.models.factorization` (closed-form gradients), with a
leading member dimension; the cost is counted in gradient evaluations per member
(:attr:`FactorRun.grad_evals`): SGD and BAR use one per step, SAM two.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..models.factorization import factor_grads
from .bar import SCHEDULES, VARIANTS, _rescale, alpha_at, balancedness, bar_rescale
from .sam import CountingGradFn, GlobalRadius, PerturbationRule, sam_gradients

__all__ = ["METHODS", "FactorRun", "train_factors"]

METHODS = ("sgd", "sam", "bar")


@dataclass
class FactorRun:
    """A trajectory: balancedness and minibatch loss per member at the recorded steps."""

    method: str
    x: torch.Tensor
    y: torch.Tensor
    steps: list[int] = field(default_factory=list)
    balancedness: list[torch.Tensor] = field(default_factory=list)
    loss: list[torch.Tensor] = field(default_factory=list)
    grad_evals: int = 0
    step_times: list[float] = field(default_factory=list)

    def balancedness_array(self) -> torch.Tensor:
        """(records, members) tensor of :math:`\\mathcal B_t`."""
        return torch.stack(self.balancedness)

    def loss_array(self) -> torch.Tensor:
        return torch.stack(self.loss)


def _lr(lr, x):
    t = torch.as_tensor(lr, dtype=x.dtype, device=x.device)
    if t.dim() == 0:
        if not torch.isfinite(t) or t <= 0:
            raise ValueError(f"lr must be positive and finite, got {float(t)}")
        return t
    if t.shape != (x.shape[0],) or not torch.isfinite(t).all() or (t <= 0).any():
        raise ValueError(f"lr must be a positive scalar or one positive value per member "
                         f"({x.shape[0]}), got shape {tuple(t.shape)}")
    return t[:, None, None]


def train_factors(problem, x0: torch.Tensor, y0: torch.Tensor, *, method: str, steps: int,
                  lr, rho: float | torch.Tensor = 0.0, rule: PerturbationRule | None = None,
                  alpha: float | torch.Tensor = 0.0, variant: str = "nbar", schedule: str = "linear",
                  batch_size: int | None = None, generator: torch.Generator | None = None,
                  record_every: int = 1, clock=None) -> FactorRun:
    """Run ``steps`` steps of ``method`` from ``(x0, y0)`` (each (members, d, rank)).

    ``lr``, ``rho`` (SAM's radius; ignored when a ``rule`` is given) and ``alpha`` (BAR's
    :math:`\\alpha_0`) are scalars or one value per member; ``variant`` and ``schedule`` configure
    BAR. ``batch_size`` applies to problems with data (LoRA regression);
    the noisy matrix fit draws fresh noise each step from ``generator``. Records the state every
    ``record_every`` steps and after the last. With a ``clock`` (e.g. ``time.thread_time``) the
    cost of every step (minibatch, gradients, update; not the recording) is kept in
    :attr:`FactorRun.step_times`.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if isinstance(record_every, bool) or not isinstance(record_every, int) or record_every < 1:
        raise ValueError(f"record_every must be a positive int, got {record_every!r}")
    if method == "bar":
        if variant not in VARIANTS:
            raise ValueError(f"BAR variant must be one of {VARIANTS}, got {variant!r}")
        if schedule not in SCHEDULES:
            raise ValueError(f"BAR schedule must be one of {SCHEDULES}, got {schedule!r}")
    if method == "sam" and rule is None:
        rule = GlobalRadius(rho, member_dims=1)
    if rule is not None and rule.member_dims != 1:
        raise ValueError("the rule must be built with member_dims=1 (factors carry members)")
    x, y = x0.clone(), y0.clone()
    eta = _lr(lr, x)
    if method == "bar":
        alpha0 = torch.as_tensor(alpha, dtype=x.dtype, device=x.device)
        # check alpha and lr once through the public function, then use the unchecked path
        bar_rescale(x, y, x, y, alpha=alpha0, lr=eta.reshape(-1) if eta.dim() else eta,
                    variant=variant, member_dims=1)
        mu0 = alpha0 * (eta.reshape(-1) if eta.dim() else eta)
    run = FactorRun(method, x, y)

    def record(t, loss):
        run.steps.append(t)
        run.balancedness.append(balancedness(x, y, member_dims=1))
        run.loss.append(loss)

    stream = problem.batches(generator, batch_size)
    for t in range(steps):
        t0 = clock() if clock is not None else 0.0
        batch = next(stream)

        def closed_form(params, batch=batch):
            loss, gx, gy = factor_grads(problem, params[0], params[1], batch)
            return loss, [gx, gy]

        grad_fn = CountingGradFn(closed_form)
        loss, (gx, gy) = grad_fn([x, y])
        if t % record_every == 0:
            t1 = clock() if clock is not None else 0.0
            record(t, loss)
            t0 += (clock() - t1) if clock is not None else 0.0   # recording is not the step's cost
        if method == "sam":
            step = sam_gradients(grad_fn, [x, y], rule, at_w=(loss, [gx, gy]))
            gx, gy = step.sam_grads
        elif method == "bar":
            x, y = _rescale(x, y, gx, gy, mu0 * alpha_at(1.0, t, steps, schedule), variant, 1)
        x, y = x - eta * gx, y - eta * gy
        run.grad_evals += grad_fn.calls
        if clock is not None:
            run.step_times.append(clock() - t0)
    record(steps, factor_grads(problem, x, y, next(stream))[0])
    run.x, run.y = x, y
    return run
