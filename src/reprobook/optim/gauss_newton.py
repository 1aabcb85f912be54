r"""Exact Jacobians and Gauss–Newton matrices of small networks, by automatic differentiation.

For a model :math:`f_\theta:\mathbb R^d\to\mathbb R^K` with parameters :math:`\theta\in\mathbb R^p`
and a loss :math:`\ell(f_\theta(x_i), y_i)`, the **Gauss–Newton (GN) matrix** is

.. math:: G = \frac1n\sum_{i=1}^n J_i^\top H_i J_i, \qquad J_i = \frac{\partial f_\theta(x_i)}{\partial\theta}
          \in\mathbb R^{K\times p},\quad H_i = \nabla^2_f\,\ell(f, y_i)\big|_{f=f_\theta(x_i)} .

For the mean squared error :math:`\ell = \tfrac12\lVert f-y\rVert^2`, :math:`H_i = I_K` and
:math:`G = \tfrac1n J^\top J` with :math:`J` the :math:`nK\times p` stack of the :math:`J_i`: the
outer-product part of the Hessian, which adaptive and second-order methods use as a preconditioner.

**The Gram trick.** :math:`J^\top J` (:math:`p\times p`) and :math:`JJ^\top` (:math:`nK\times nK`)
have the same nonzero eigenvalues, so :func:`gauss_newton_eigenvalues` diagonalises whichever is
smaller. The spectrum is exact up to floating-point rounding: no sampling, no Lanczos.

A model is passed as a pure function ``fn(params, x) -> (K,)`` of a dict of tensors and *one*
input vector; :func:`jacobian` maps it over the batch with ``torch.func.vmap`` of
``torch.func.jacrev``. The parameter order of the flattened :math:`\theta` is the dict's order,
each tensor flattened row-major (:func:`flatten_params`).
"""
from __future__ import annotations

from typing import Callable, Mapping

import torch
# torch.func's transforms import torch._dynamo on their first call (about two seconds on a small
# CPU); importing it here moves that one-time cost to where the caller imports this module.
import torch._dynamo  # noqa: F401,E402

__all__ = ["check_params", "flatten_params", "jacobian", "gauss_newton", "gauss_newton_eigenvalues",
           "gram_eigenvalues"]


def check_params(params: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The parameters as a dict of floating-point tensors on one device, or a clear error."""
    if not isinstance(params, Mapping) or not params:
        raise TypeError("params must be a non-empty dict of name -> torch.Tensor")
    out = {}
    for name, t in params.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"parameter {name!r} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"parameter {name!r} must be floating point, got {t.dtype}")
        out[name] = t
    devices = {t.device for t in out.values()}
    if len(devices) > 1:
        raise ValueError(f"all parameters must be on one device, got {sorted(map(str, devices))}")
    return out


def flatten_params(params: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """:math:`\\theta`: the parameters concatenated in dict order, each flattened row-major."""
    return torch.cat([t.reshape(-1) for t in check_params(params).values()])


def _inputs(params: dict, inputs: torch.Tensor) -> torch.Tensor:
    if not isinstance(inputs, torch.Tensor):
        raise TypeError(f"inputs must be a torch.Tensor of shape (n, d), got {type(inputs).__name__}")
    if inputs.ndim != 2 or inputs.shape[0] == 0:
        raise ValueError(f"inputs must have shape (n, d) with n >= 1, got {tuple(inputs.shape)}")
    first = next(iter(params.values()))
    if inputs.device != first.device:
        raise ValueError(f"inputs are on {inputs.device} but the parameters on {first.device}")
    return inputs.to(first.dtype)


def jacobian(fn: Callable, params: Mapping[str, torch.Tensor], inputs: torch.Tensor, *,
             chunk_size: int | None = None) -> torch.Tensor:
    """Per-sample Jacobians :math:`J_i=\\partial f(x_i)/\\partial\\theta`, shape ``(n, K, p)``.

    ``fn(params, x)`` maps one input vector ``x`` (d,) to the output (K,). ``chunk_size`` bounds
    how many samples ``vmap`` differentiates at once (memory); the result does not depend on it.
    """
    params = check_params(params)
    inputs = _inputs(params, inputs)
    out = fn(params, inputs[0])
    if not isinstance(out, torch.Tensor) or out.ndim != 1:
        raise ValueError("fn(params, x) must return a 1-d tensor (the K outputs for one input), got "
                         f"{getattr(out, 'shape', type(out).__name__)}")
    per_param = torch.func.vmap(torch.func.jacrev(fn, argnums=0), in_dims=(None, 0),
                                chunk_size=chunk_size)(params, inputs)
    n, k = inputs.shape[0], out.shape[0]
    return torch.cat([per_param[name].reshape(n, k, -1) for name in params], dim=2)


def gauss_newton(fn: Callable, params: Mapping[str, torch.Tensor], inputs: torch.Tensor, *,
                 output_hessian: torch.Tensor | None = None,
                 chunk_size: int | None = None) -> torch.Tensor:
    """The GN matrix :math:`\\frac1n\\sum_i J_i^\\top H_i J_i` (p × p).

    ``output_hessian``: ``None`` for the squared error (:math:`H_i=I_K`), a (K, K) matrix shared by
    every sample, or an (n, K, K) stack (for example the softmax Hessian of a cross-entropy loss).
    """
    jac = jacobian(fn, params, inputs, chunk_size=chunk_size)
    n, k, _ = jac.shape
    if output_hessian is None:
        return torch.einsum("nkp,nkq->pq", jac, jac) / n
    h = output_hessian.to(device=jac.device, dtype=jac.dtype)
    if h.shape == (k, k):
        h = h.expand(n, k, k)
    if h.shape != (n, k, k):
        raise ValueError(f"output_hessian must have shape ({k}, {k}) or ({n}, {k}, {k}), got "
                         f"{tuple(output_hessian.shape)}")
    return torch.einsum("nkp,nkl,nlq->pq", jac, h, jac) / n


def gram_eigenvalues(jac: torch.Tensor) -> torch.Tensor:
    """Eigenvalues of :math:`\\tfrac1n J^\\top J` from a Jacobian stack ``(n, K, p)``, in decreasing
    order, computed from the smaller of :math:`J^\\top J` and :math:`JJ^\\top` (length
    ``min(p, nK)``; the remaining eigenvalues of the p × p matrix are zero)."""
    if not isinstance(jac, torch.Tensor) or jac.ndim != 3:
        raise ValueError(f"jac must be a tensor of shape (n, K, p), got {getattr(jac, 'shape', jac)}")
    n = jac.shape[0]
    flat = jac.reshape(-1, jac.shape[2])
    small = flat.T @ flat if flat.shape[1] <= flat.shape[0] else flat @ flat.T
    small = (small + small.T) / 2   # symmetric to rounding; make it exactly so for eigvalsh
    return torch.linalg.eigvalsh(small / n).flip(0)


def gauss_newton_eigenvalues(fn: Callable, params: Mapping[str, torch.Tensor],
                             inputs: torch.Tensor, *, chunk_size: int | None = None) -> torch.Tensor:
    """The eigenvalues of the squared-error GN matrix (decreasing; the nonzero ones and possibly
    some zeros), by autograd and the Gram trick."""
    return gram_eigenvalues(jacobian(fn, params, inputs, chunk_size=chunk_size))
