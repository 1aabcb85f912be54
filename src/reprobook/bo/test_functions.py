r"""Standard BO test functions on the unit cube, as *maximisation* problems.

Each function :math:`g` lives on a box :math:`[a, b]^d` and is usually stated as a minimisation.
We expose :math:`h(u) = -g(a + (b - a)\,u)` for :math:`u \in [0, 1]^d`, so that

.. math:: \max_{u \in [0,1]^d} h(u) = -\min_{x \in [a,b]^d} g(x),

and every optimiser in :mod:`reprobook.bo` works on the unit cube and maximises. The formulas come
from botorch's ``test_functions.synthetic`` (Branin, Hartmann-6, Ackley); this wrapper only does the
scaling, the sign and input checking.

* Branin (:math:`d = 2`, box :math:`[-5, 10] \times [0, 15]`): minimum 0.397887 at three points.
* Hartmann-6 (:math:`[0, 1]^6`): minimum -3.32237 at (0.20169, 0.150011, 0.476874, 0.275332,
  0.311652, 0.6573).
* Ackley (:math:`[-32.768, 32.768]^d`): minimum 0 at the origin.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from botorch.test_functions import synthetic

__all__ = ["UnitCubeProblem", "make_problem", "PROBLEMS"]

DTYPE = torch.float64
PROBLEMS = ("branin", "hartmann6", "ackley")


@dataclass
class UnitCubeProblem:
    """A maximisation problem on :math:`[0, 1]^d` built from a botorch test function."""

    name: str
    dim: int
    optimal_value: float              # max of h over the unit cube
    optimizers: torch.Tensor          # (k, d) maximisers in unit-cube coordinates
    _fn: synthetic.SyntheticTestFunction

    def to_box(self, U: torch.Tensor) -> torch.Tensor:
        lo, hi = self._fn.bounds.to(U)
        return lo + (hi - lo) * U

    def to_unit(self, X: torch.Tensor) -> torch.Tensor:
        lo, hi = self._fn.bounds.to(X)
        return (X - lo) / (hi - lo)

    def __call__(self, U: torch.Tensor) -> torch.Tensor:
        """Values :math:`h(U)` for ``U`` of shape (n, d) (or (d,)) in the unit cube."""
        if not isinstance(U, torch.Tensor):
            raise TypeError(f"U must be a torch.Tensor, got {type(U).__name__}")
        squeeze = U.dim() == 1
        U2 = U[None] if squeeze else U
        if U2.dim() != 2 or U2.shape[-1] != self.dim:
            raise ValueError(f"U must have shape (n, {self.dim}) for {self.name}, got {tuple(U.shape)}")
        if (U2 < -1e-9).any() or (U2 > 1 + 1e-9).any():
            raise ValueError(f"U must lie in the unit cube [0, 1]^{self.dim}")
        out = -self._fn.evaluate_true(self.to_box(U2.to(DTYPE)))
        return out[0] if squeeze else out


def make_problem(name: str, dim: int | None = None) -> UnitCubeProblem:
    """``name`` in ``PROBLEMS``; ``dim`` only for Ackley (default 10)."""
    if name == "branin":
        fn = synthetic.Branin(dtype=DTYPE)
    elif name == "hartmann6":
        fn = synthetic.Hartmann(dim=6, dtype=DTYPE)
    elif name == "ackley":
        d = 10 if dim is None else dim
        if not isinstance(d, int) or d < 1:
            raise ValueError(f"dim must be a positive int for ackley, got {dim!r}")
        fn = synthetic.Ackley(dim=d, dtype=DTYPE)
    else:
        raise ValueError(f"name must be one of {PROBLEMS}, got {name!r}")
    if dim is not None and name != "ackley" and dim != fn.dim:
        raise ValueError(f"dim={dim} does not match {name} (dimension {fn.dim})")
    opt = torch.tensor(fn._optimizers, dtype=DTYPE)
    lo, hi = fn.bounds
    return UnitCubeProblem(name=name, dim=fn.dim, optimal_value=-float(fn.optimal_value),
                           optimizers=(opt - lo) / (hi - lo), _fn=fn)
