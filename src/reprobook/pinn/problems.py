r"""Polyharmonic boundary-value problems on the unit cube, posed directly or split into a chain.

The problem :math:`\Delta^K u = f` on :math:`\Omega = [0,1]^d` with the exact solution
:math:`u^\star(x) = \prod_i \sin(\pi x_i)`, so :math:`f = (-d\pi^2)^K u^\star`, and the Navier
boundary conditions :math:`\Delta^j u = 0` on :math:`\partial\Omega` for :math:`j < K` (all of
them hold for :math:`u^\star`, whose every even derivative vanishes on the faces). ``K = 1`` is
Poisson's equation (order 2), ``K = 2`` the biharmonic equation (order 4: in one dimension the
simply supported beam :math:`u'''' = f`).

**Variable splitting** (VS-PINN) writes the order-:math:`2K` equation as a chain of lower-order
ones with one network per link. A split :math:`(k_0, \dots, k_L)` with :math:`\sum k_j = K` uses
networks :math:`u_0 = u, u_1, \dots, u_L` and the residuals

.. math:: \Delta^{k_j} u_j - u_{j+1} = 0 \ (j < L), \qquad \Delta^{k_L} u_L = f,

with boundary conditions :math:`\Delta^i u_j = 0` for :math:`i < k_j` (since
:math:`u_j = \Delta^{k_0+\dots+k_{j-1}}u`). The split ``(K,)`` is the plain PINN; ``(1, 1)``
splits the biharmonic equation into two Poisson-type equations, so that no residual differentiates
a network more than twice.

The PINN loss of each run is

.. math:: L = \sum_{\text{blocks } b} \lambda_b\,\frac{1}{N_b}\sum_{i=1}^{N_b}
          \Big(\sum_{(n,k,c)\in b} c\,\Delta^k u_n(x_{bi}) - t_b(x_{bi})\Big)^2,

interior blocks with weight 1 and boundary blocks with weight ``boundary_weight``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..seeding import rng

__all__ = ["Block", "Problem", "polyharmonic", "exact_solution", "collocation_points",
           "boundary_points", "evaluation_points"]


@dataclass(frozen=True)
class Block:
    """One residual: ``sum(c * Delta^k u_n(X) for (n, k, c) in terms) - target`` at points X."""

    name: str
    X: torch.Tensor                     # (N, d)
    terms: tuple                        # ((net index, Laplacian power k, coefficient), ...)
    target: torch.Tensor                # (N,)
    weight: float = 1.0


@dataclass(frozen=True)
class Problem:
    """A PDE posed as residual blocks over ``len(powers)`` networks (network 0 is the solution)."""

    name: str
    dim: int
    order: int                          # the PDE's order 2K
    split: tuple                        # Laplacian powers per network, summing to K
    powers: tuple                       # the ReLU power p of each network
    blocks: tuple = field(repr=False)

    @property
    def max_order(self) -> int:
        """The highest derivative order that appears in the loss (2 max(k_j))."""
        return 2 * max(self.split)


def exact_solution(X: torch.Tensor) -> torch.Tensor:
    """:math:`u^\\star(x) = \\prod_i \\sin(\\pi x_i)`, shape (N,)."""
    return torch.sin(math.pi * X).prod(-1)


def _count(name, v, low=1):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
        raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
    return int(v)


def collocation_points(n: int, dim: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    """About ``n`` interior points: a uniform grid of cell midpoints, each jittered uniformly
    within its cell (from ``reprobook.rng(seed, 101, dim)``). In d dimensions the grid has
    ``round(n ** (1/d))`` points per axis."""
    n, dim = _count("n", n), _count("dim", dim)
    per = max(1, round(n ** (1.0 / dim)))
    axes = np.meshgrid(*[np.arange(per)] * dim, indexing="ij")
    cells = np.stack([a.ravel() for a in axes], 1).astype(np.float64)
    jitter = rng(seed, 101, dim).uniform(0.0, 1.0, cells.shape)
    return torch.as_tensor((cells + jitter) / per, dtype=dtype)


def boundary_points(per_face: int, dim: int, dtype=torch.float64) -> torch.Tensor:
    """Points on the boundary of the unit cube: in 1-D the two ends; in d dimensions a uniform
    grid of ``per_face`` points per axis on each of the 2d faces (the corners counted once)."""
    per_face, dim = _count("per_face", per_face), _count("dim", dim)
    if dim == 1:
        return torch.tensor([[0.0], [1.0]], dtype=dtype)
    t = (np.arange(per_face) + 0.5) / per_face
    grids = np.meshgrid(*[t] * (dim - 1), indexing="ij")
    face = np.stack([g.ravel() for g in grids], 1)
    out = []
    for axis in range(dim):
        for side in (0.0, 1.0):
            pts = np.insert(face, axis, side, axis=1)
            out.append(pts)
    corners = np.stack(np.meshgrid(*[[0.0, 1.0]] * dim, indexing="ij"), -1).reshape(-1, dim)
    return torch.as_tensor(np.concatenate(out + [corners]), dtype=dtype)


def evaluation_points(n: int, dim: int, dtype=torch.float64) -> torch.Tensor:
    """A uniform grid of about ``n`` points on the closed cube (for the relative L2 error)."""
    n, dim = _count("n", n, 2), _count("dim", dim)
    per = max(2, round(n ** (1.0 / dim)))
    t = np.linspace(0.0, 1.0, per)
    grids = np.meshgrid(*[t] * dim, indexing="ij")
    return torch.as_tensor(np.stack([g.ravel() for g in grids], 1), dtype=dtype)


def polyharmonic(K: int, dim: int = 1, *, split=None, powers=None, n_interior: int = 128,
                 boundary_per_face: int = 16, boundary_weight: float = 1.0, seed: int = 0,
                 dtype=torch.float64) -> Problem:
    """:math:`\\Delta^K u = f` on the unit cube, posed on the networks of ``split``.

    ``split`` defaults to ``(K,)`` (the plain PINN); ``powers`` to ``2 k_j + 1`` for each link,
    the smallest power whose ``2 k_j``-th derivative is continuous (the theory's optimum
    ``p = order + 1``). The collocation points depend on ``seed`` only, so every arm built with
    the same seed sees the same points.
    """
    K, dim = _count("K", K), _count("dim", dim)
    split = (K,) if split is None else tuple(int(k) for k in split)
    if any(k < 1 for k in split) or sum(split) != K:
        raise ValueError(f"split must be positive Laplacian powers summing to K = {K}, got {split}")
    powers = tuple(2 * k + 1 for k in split) if powers is None else tuple(int(p) for p in powers)
    if len(powers) != len(split):
        raise ValueError(f"give one power per network: split {split}, powers {powers}")
    for k, p in zip(split, powers):
        if p < 2 * k:
            raise ValueError(f"a network differentiated 2k = {2 * k} times needs p >= {2 * k}, "
                             f"got p = {p}")
    if not boundary_weight > 0:
        raise ValueError(f"boundary_weight must be positive, got {boundary_weight}")
    Xi = collocation_points(n_interior, dim, seed, dtype)
    Xb = boundary_points(boundary_per_face, dim, dtype)
    f = (-dim * math.pi ** 2) ** K * exact_solution(Xi)
    zi, zb = torch.zeros(len(Xi), dtype=dtype), torch.zeros(len(Xb), dtype=dtype)
    blocks = []
    last = len(split) - 1
    for j, k in enumerate(split):
        if j < last:
            blocks.append(Block(f"link {j}", Xi, ((j, k, 1.0), (j + 1, 0, -1.0)), zi))
        else:
            blocks.append(Block("pde", Xi, ((j, k, 1.0),), f))
        for i in range(k):
            blocks.append(Block(f"bc u{j} D^{i}", Xb, ((j, i, 1.0),), zb, float(boundary_weight)))
    name = {1: "Poisson", 2: "biharmonic"}.get(K, f"polyharmonic K={K}")
    if len(split) > 1:
        name = f"{name}, split {split}"
    return Problem(name, dim, 2 * K, split, powers, tuple(blocks))
