"""The optimisation loop every GP fit in :mod:`reprobook.gp` shares, so that all methods train by one rule."""
from __future__ import annotations

__all__ = ["train_until_converged"]


def train_until_converged(loss_fn, optimizers, steps: int, tol: float | None = None,
                          patience: int = 20) -> int:
    """Minimise ``loss_fn()`` with ``optimizers`` (each stepped every iteration); return the steps taken.

    Without ``tol``: exactly ``steps`` steps. With ``tol``: stop early once the loss has not gone
    below ``best - tol`` for ``patience`` consecutive steps (a plateau), never after ``steps``.
    """
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    if tol is not None and not tol >= 0:
        raise ValueError(f"tol must be None or >= 0, got {tol!r}")
    if not isinstance(patience, int) or patience < 1:
        raise ValueError(f"patience must be a positive int, got {patience!r}")
    best, stale = float("inf"), 0
    for step in range(steps):
        for opt in optimizers:
            opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        for opt in optimizers:
            opt.step()
        value = loss.item()
        if tol is None:
            continue
        if value < best - tol:
            best, stale = value, 0
        else:
            stale += 1
            if stale >= patience:
                return step + 1
    return steps
