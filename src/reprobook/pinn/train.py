r"""Full-batch gradient descent on PINN losses, many runs at once, with closed-form gradients.

Each run ``s`` has its own initial networks (from its seed) and its own learning rate
:math:`\eta_s`, and follows plain gradient descent
:math:`\theta_{t+1} = \theta_t - \eta_s \nabla L_s(\theta_t)`, the time discretisation of the
gradient flow the theory analyses. Runs never interact: the batch is only a way to use one
vectorised kernel for many seeds and step sizes. A run whose loss becomes non-finite or exceeds
``blowup`` times its initial loss is marked *diverged* and stopped: it keeps its last iterate
before the blow-up, and its final loss and error are that iterate's (so a diverged run counts as
a run that did not converge, with finite numbers).

:func:`tune_learning_rate` picks one step size per arm from a grid by the geometric mean of the
final (normalised) loss over pilot seeds, the same grid and the same budget for every arm.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..threads import single_threaded_torch
from .problems import Problem, exact_solution, evaluation_points
from .relu_power import (ReLUPowerNet, RhoPowers, apply_coefficients, init_net, laplacian_coefficients,
                         laplacian_power, laplacian_power_vjp)

__all__ = ["PINNRuns", "pinn_loss", "pinn_loss_and_grad", "train_pinn", "tune_learning_rate",
           "loss_checkpoints"]


def _nets_for(problem: Problem, width: int, seeds, dtype, device,
              init_stream: int = 0) -> list[ReLUPowerNet]:
    # network j draws from stream init_stream + j: arms that share a seed share initial networks
    return [init_net(width, problem.dim, p, seeds, stream=init_stream + j, dtype=dtype,
                     device=device)
            for j, p in enumerate(problem.powers)]


def pinn_loss(problem: Problem, nets: list[ReLUPowerNet]) -> torch.Tensor:
    """The loss of every run, shape (S,), from the closed-form derivatives."""
    total = 0.0
    for blk in problem.blocks:
        X = blk.X.to(nets[0].W)
        r = -blk.target.to(X)[None, :]
        for n, k, c in blk.terms:
            r = r + c * laplacian_power(nets[n], X, k)
        total = total + blk.weight * (r * r).mean(1)
    return total


def pinn_loss_and_grad(problem: Problem, nets: list[ReLUPowerNet]):
    """The loss of every run and its gradient with respect to every network's ``(W, b, a)``,
    all in closed form (:func:`~reprobook.pinn.relu_power.laplacian_power_vjp`)."""
    grads = [[torch.zeros_like(t) for t in (net.W, net.b, net.a)] for net in nets]
    coefs = {}
    total = 0.0
    for blk in problem.blocks:
        X = blk.X.to(nets[0].W)
        rhos = {n: RhoPowers(nets[n].preactivation(X)) for n, _, _ in blk.terms}
        r = -blk.target.to(X)[None, :]
        for n, k, c in blk.terms:
            if (n, k) not in coefs:
                coefs[n, k] = laplacian_coefficients(nets[n], k)
            r = r + c * apply_coefficients(rhos[n](nets[n].p - 2 * k), coefs[n, k])
        total = total + blk.weight * (r * r).mean(1)
        g = (2.0 * blk.weight / X.shape[0]) * r
        for n, k, c in blk.terms:
            dW, db, da = laplacian_power_vjp(nets[n], X, k, c * g, rho=rhos[n])
            grads[n][0] += dW
            grads[n][1] += db
            grads[n][2] += da
    return total, grads


def loss_checkpoints(steps: int, n: int = 40) -> np.ndarray:
    """About ``n`` log-spaced steps in ``0..steps`` (0 and ``steps`` included) for loss curves."""
    if steps < 1:
        return np.array([0])
    return np.unique(np.r_[0, np.geomspace(1, steps, n).round().astype(int), steps])


@dataclass
class PINNRuns:
    """What :func:`train_pinn` returns, one entry per run (arrays of shape (S,))."""

    problem: str
    width: int
    seeds: np.ndarray
    lrs: np.ndarray
    initial_loss: np.ndarray            # L_0
    zero_loss: float                    # the loss of u = 0 (every network zero): the PDE's scale
    final_loss: np.ndarray              # L_T (of the last iterate before a blow-up, if diverged)
    diverged: np.ndarray
    error: np.ndarray                   # relative L2 error of network 0 against u*
    steps: np.ndarray                   # the checkpoints of ``history``
    history: np.ndarray                 # (S, len(steps)) loss at the checkpoints (nan once diverged)
    points: np.ndarray                  # (n_test, d) evaluation points of the error
    solution: np.ndarray                # (S, n_test) network 0 at the evaluation points

    @property
    def normalized_loss(self) -> np.ndarray:
        """:math:`L_T / L_0`."""
        return self.final_loss / self.initial_loss

    @property
    def relative_loss(self) -> np.ndarray:
        """:math:`L_T / L(u\\equiv0)`: the loss as a fraction of the loss of the zero function."""
        return self.final_loss / self.zero_loss


def _zero_loss(problem: Problem) -> float:
    return float(sum(blk.weight * (blk.target ** 2).mean() for blk in problem.blocks))


def train_pinn(problem: Problem, width: int, seeds, lrs, steps: int, *, train_outer: bool = False,
               init_stream: int = 0, blowup: float = 1e3, n_test: int = 1000, checkpoints=None,
               max_elements: float = 4e6, dtype=torch.float64, device="cpu") -> PINNRuns:
    """Full-batch GD on ``problem`` for every ``(seed, lr)`` pair (``seeds`` and ``lrs`` of equal
    length), ``steps`` steps each, at network width ``width``.

    Only the inner weights ``(W, b)`` are trained unless ``train_outer`` (the theory trains the
    inner layer). ``init_stream`` shifts the random streams of the initial networks (an
    independent replicate of the same seeds). Runs are processed in chunks of at most ``max_elements`` entries of the
    (runs, points, width) preactivation tensor, which bounds the memory used.
    """
    seeds = np.atleast_1d(np.asarray(seeds, dtype=np.int64))
    lrs = np.atleast_1d(np.asarray(lrs, dtype=np.float64))
    if seeds.shape != lrs.shape:
        raise ValueError(f"seeds and lrs must pair up one to one, got {seeds.size} and {lrs.size}")
    if not np.all(lrs > 0):
        raise ValueError("every learning rate must be positive")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    if not blowup > 1:
        raise ValueError(f"blowup must be > 1, got {blowup}")
    ck = loss_checkpoints(steps) if checkpoints is None else np.asarray(checkpoints, dtype=int)
    n_points = max(len(b.X) for b in problem.blocks)
    chunk = max(1, int(max_elements // (n_points * width)))
    with single_threaded_torch():
        parts = [_train_chunk(problem, width, seeds[i:i + chunk], lrs[i:i + chunk], int(steps),
                              train_outer, init_stream, blowup, ck, n_test, dtype, device)
                 for i in range(0, len(seeds), chunk)]
    cat = lambda k: np.concatenate([p[k] for p in parts])  # noqa: E731
    return PINNRuns(problem.name, int(width), seeds, lrs, cat("L0"), _zero_loss(problem),
                    cat("LT"), cat("div"), cat("err"), ck, np.concatenate([p["hist"] for p in parts]),
                    evaluation_points(n_test, problem.dim, dtype).numpy(),
                    np.concatenate([p["u"] for p in parts]))


def _train_chunk(problem, width, seeds, lrs, steps, train_outer, init_stream, blowup, ck, n_test,
                 dtype, device):
    nets = _nets_for(problem, width, seeds, dtype, device, init_stream)
    lr = torch.as_tensor(lrs, dtype=dtype, device=device)
    alive = torch.ones(len(seeds), dtype=torch.bool, device=device)
    hist = np.full((len(seeds), len(ck)), np.nan)
    want = {int(s): i for i, s in enumerate(ck)}
    L0 = last = prev = None
    for t in range(steps + 1):
        L, grads = pinn_loss_and_grad(problem, nets)
        if L0 is None:
            L0 = L.clone()
        ok = torch.isfinite(L) & (L <= blowup * L0)
        blew = alive & ~ok
        if bool(blew.any()):
            # put the runs that just blew up back on their previous iterate, and stop them there
            for net, old in zip(nets, prev):
                for name, t_old in zip(("W", "b", "a"), old):
                    getattr(net, name)[blew] = t_old[blew]
            L = torch.where(blew, last, L)
            alive &= ok
        if t in want:
            hist[:, want[t]] = torch.where(alive, L, torch.nan).cpu().numpy()
        if t == steps:
            break
        last = L
        prev = [(net.W.clone(), net.b.clone(), net.a.clone()) for net in nets]
        step = lr * alive                                       # a stopped run does not move
        for net, (dW, db, da) in zip(nets, grads):
            net.W -= step[:, None, None] * torch.nan_to_num(dW)
            net.b -= step[:, None] * torch.nan_to_num(db)
            if train_outer:
                net.a -= step[:, None] * torch.nan_to_num(da)
    Xt = evaluation_points(n_test, problem.dim, dtype).to(device)
    u = laplacian_power(nets[0], Xt, 0)
    us = exact_solution(Xt)[None, :]
    err = ((u - us).norm(dim=1) / us.norm()).cpu().numpy()
    return {"L0": L0.cpu().numpy(), "LT": L.cpu().numpy(), "div": (~alive).cpu().numpy(),
            "err": err, "hist": hist, "u": u.cpu().numpy()}


def tune_learning_rate(problem: Problem, width: int, pilot_seeds, grid, steps: int, *,
                       refine: bool = True, **kw):
    """The step size with the smallest geometric mean of the final loss :math:`L_T/L_0` over the
    pilot seeds (ties: the larger step), searched on ``grid`` and then, if ``refine``, at the two
    geometric midpoints between the best grid value and its neighbours in the grid. Returns
    ``(lr, table)``: ``table`` maps every step size tried to its geometric mean.

    A geometric mean, not a median: with three pilot seeds the median is the second best, and it
    picks step sizes at the edge of stability where one seed in three blows up; the mean of the
    logs counts that seed. Within one arm the initial networks do not depend on the step size, so
    normalising by :math:`L_0` does not change the choice. Every arm gets the same grid and the
    same number of tries (``len(grid)`` plus at most two)."""
    grid = np.asarray(sorted(set(float(g) for g in grid), reverse=True))
    pilot = np.atleast_1d(np.asarray(pilot_seeds, dtype=np.int64))
    if grid.size == 0 or pilot.size == 0:
        raise ValueError("tune_learning_rate needs a non-empty grid and pilot seeds")
    if not np.all(grid > 0):
        raise ValueError("every step size in the grid must be positive")

    def score(lrs):
        runs = train_pinn(problem, width, np.tile(pilot, len(lrs)), np.repeat(lrs, pilot.size),
                          steps, **kw)
        logs = np.log10(runs.normalized_loss.reshape(len(lrs), pilot.size)).mean(axis=1)
        return {float(lr): float(10 ** v) for lr, v in zip(lrs, logs)}

    table = score(grid)
    if refine and grid.size > 1:
        i = int(np.argmin([table[g] for g in grid]))
        mids = [float(np.sqrt(grid[i] * grid[j])) for j in (i - 1, i + 1) if 0 <= j < grid.size]
        table.update(score(np.array(mids)))
    best = min(sorted(table, reverse=True), key=lambda lr: table[lr])
    return best, dict(sorted(table.items(), reverse=True))
