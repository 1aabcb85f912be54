r"""Data-consistency steps for slice-wise linear inverse problems :math:`y_z=Ax_z+\text{noise}`.

Volumes are ``(V, Z, n, n)`` (V volumes of Z slices), sinograms ``(V, Z, m)``; :math:`A` is a dense
``(m, n*n)`` matrix (:func:`~reprobook.imaging.ct.radon_matrix`) applied to every slice.

* :func:`conjugate_gradient` -- a few CG iterations on a symmetric positive-definite system, one
  independent solve per volume (the inner products run over a whole volume);
* :func:`data_consistency` -- decomposed diffusion sampling's step (DDS, Chung et al. 2024): from
  a denoised estimate :math:`\hat x_0`, a few CG iterations on

  .. math:: (A^\top A+\lambda I)\,x=A^\top y+\lambda\hat x_0,

  i.e. :math:`\arg\min_x\|Ax-y\|^2+\lambda\|x-\hat x_0\|^2` started at :math:`\hat x_0`. It couples no
  slices: every slice is corrected by its own measurements.
* :func:`data_consistency_tv_z` -- DiffusionMBIR's step (Chung et al. 2023): the same objective plus a
  hand-crafted cross-slice prior :math:`\mu\,\mathrm{TV}_z(x)=\mu\|D_zx\|_1` (:math:`D_z` the forward
  difference along z), solved by ADMM with the splitting :math:`d=D_zx`:

  .. math:: x\leftarrow\big(A^\top A+\lambda I+\rho D_z^\top D_z\big)^{-1}
            \big(A^\top y+\lambda\hat x_0+\rho D_z^\top(d-u)\big)\ \text{(a few CG iterations)},\quad
            d\leftarrow\operatorname{soft}(D_zx+u,\mu/\rho),\quad u\leftarrow u+D_zx-d.
"""
from __future__ import annotations

from typing import Callable

import torch

__all__ = ["conjugate_gradient", "data_consistency", "data_consistency_tv_z", "diff_z",
           "diff_z_adjoint", "tv_z"]


def _check(A: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> int:
    if A.ndim != 2:
        raise ValueError(f"A must be a 2-d matrix, got shape {tuple(A.shape)}")
    n2 = A.shape[1]
    if x.ndim != 4 or x.shape[-1] * x.shape[-2] != n2:
        raise ValueError(f"volumes must have shape (V, Z, n, n) with n*n = {n2}, got {tuple(x.shape)}")
    if y.shape != (*x.shape[:2], A.shape[0]):
        raise ValueError(f"sinograms must have shape {(*x.shape[:2], A.shape[0])}, got {tuple(y.shape)}")
    return n2


def conjugate_gradient(matvec: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor,
                       x0: torch.Tensor, iters: int) -> torch.Tensor:
    """``iters`` CG iterations for ``matvec(x) = b``, batched over the first axis of ``b``."""
    if iters < 0:
        raise ValueError(f"iters must be >= 0, got {iters}")
    if b.shape != x0.shape:
        raise ValueError(f"b and x0 must have the same shape, got {tuple(b.shape)}, {tuple(x0.shape)}")
    dims = tuple(range(1, b.ndim))
    shape = (-1,) + (1,) * (b.ndim - 1)
    x = x0.clone()
    r = b - matvec(x)
    p = r.clone()
    rs = (r * r).sum(dims)
    for _ in range(iters):
        q = matvec(p)
        pq = (p * q).sum(dims)
        # a converged volume has rs = 0 = pq: leave it where it is instead of dividing by zero
        alpha = torch.where(pq > 0, rs / torch.where(pq > 0, pq, torch.ones_like(pq)),
                            torch.zeros_like(pq))
        x = x + alpha.reshape(shape) * p
        r = r - alpha.reshape(shape) * q
        rs_new = (r * r).sum(dims)
        beta = torch.where(rs > 0, rs_new / torch.where(rs > 0, rs, torch.ones_like(rs)),
                           torch.zeros_like(rs))
        p = r + beta.reshape(shape) * p
        rs = rs_new
    return x


def _normal(A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """:math:`A^\\top A` slice by slice on (V, Z, n, n)."""
    flat = x.reshape(*x.shape[:2], -1)
    return ((flat @ A.T) @ A).reshape(x.shape)


def _adjoint(A: torch.Tensor, y: torch.Tensor, shape) -> torch.Tensor:
    return (y @ A).reshape(shape)


def data_consistency(A: torch.Tensor, y: torch.Tensor, x_hat: torch.Tensor, lam: float,
                     iters: int) -> torch.Tensor:
    """DDS's step: ``iters`` CG iterations on :math:`(A^\\top A+\\lambda I)x=A^\\top y+\\lambda\\hat x_0`
    started at :math:`\\hat x_0` (see the module docstring)."""
    _check(A, x_hat, y)
    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    A = A.to(x_hat.dtype)
    b = _adjoint(A, y.to(x_hat.dtype), x_hat.shape) + lam * x_hat
    return conjugate_gradient(lambda v: _normal(A, v) + lam * v, b, x_hat, iters)


def diff_z(x: torch.Tensor) -> torch.Tensor:
    """Forward difference along the slice axis: (V, Z, ...) -> (V, Z-1, ...)."""
    return x[:, 1:] - x[:, :-1]


def diff_z_adjoint(d: torch.Tensor) -> torch.Tensor:
    """The adjoint :math:`D_z^\\top` of :func:`diff_z`: (V, Z-1, ...) -> (V, Z, ...)."""
    zero = torch.zeros_like(d[:, :1])
    return torch.cat([zero, d], 1) - torch.cat([d, zero], 1)


def tv_z(x: torch.Tensor) -> torch.Tensor:
    """Anisotropic total variation along z of each volume, :math:`\\|D_zx\\|_1`: shape (V,)."""
    return diff_z(x).abs().flatten(1).sum(1)


def data_consistency_tv_z(A: torch.Tensor, y: torch.Tensor, x_hat: torch.Tensor, lam: float,
                          mu: float, rho: float, admm_iters: int, cg_iters: int) -> torch.Tensor:
    """DiffusionMBIR's step: ADMM on :math:`\\|Ax-y\\|^2+\\lambda\\|x-\\hat x_0\\|^2+2\\mu\\,\\mathrm{TV}_z(x)`
    (the factor 2 matches the halved quadratic in the module docstring), started at :math:`\\hat x_0`."""
    _check(A, x_hat, y)
    if lam < 0 or mu < 0 or rho <= 0:
        raise ValueError(f"need lam >= 0, mu >= 0, rho > 0, got {lam}, {mu}, {rho}")
    if x_hat.shape[1] < 2:
        raise ValueError("TV along z needs at least 2 slices")
    A = A.to(x_hat.dtype)
    base = _adjoint(A, y.to(x_hat.dtype), x_hat.shape) + lam * x_hat
    x = x_hat.clone()
    d = diff_z(x)
    u = torch.zeros_like(d)
    op = lambda v: _normal(A, v) + lam * v + rho * diff_z_adjoint(diff_z(v))  # noqa: E731
    for _ in range(admm_iters):
        x = conjugate_gradient(op, base + rho * diff_z_adjoint(d - u), x, cg_iters)
        dz = diff_z(x) + u
        d = torch.sign(dz) * torch.clamp(dz.abs() - mu / rho, min=0.0)
        u = u + diff_z(x) - d
    return x
