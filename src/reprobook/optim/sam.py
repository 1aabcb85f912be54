r"""Sharpness-aware minimisation (SAM) with pluggable perturbation rules.

One SAM step (Foret et al., 2021) at parameters :math:`w` with loss :math:`L` (a minibatch loss:
both gradients below are taken on the *same* minibatch):

.. math::
    g = \nabla L(w), \qquad \varepsilon = \mathrm{rule}(g, w), \qquad
    \tilde g = \nabla L(w + \varepsilon),

after which a base optimiser steps from :math:`w` (not from :math:`w+\varepsilon`) with
:math:`\tilde g`. A step costs two gradient evaluations where SGD costs one.

Everything here is functional: a *gradient function* ``grad_fn(params) -> (loss, grads)`` maps a
list of tensors to the loss and its gradients there (:func:`autograd_grad_fn` builds one from a loss
function; a problem with a closed-form gradient passes its own), and :func:`sam_gradients` never
mutates its inputs. The parameters are a list of tensors, one per *layer* (a weight matrix, a LoRA
factor); every rule acts on that list.

**Members.** A rule built with ``member_dims=1`` treats the first dimension of every tensor as an
index over independent models (one per hyperparameter setting or seed, trained side by side):
every norm is then taken per member, so member :math:`i` is perturbed exactly as it would be alone.
``rho`` may then be a tensor with one radius per member.

The rules (:math:`\|\cdot\|` is the Frobenius norm of a layer, :math:`\|g\|^2 = \sum_l \|g_l\|^2`):

* :class:`GlobalRadius` (SAM): :math:`\varepsilon = \rho\, g/\|g\|`. At a fixed :math:`\rho` this is
  "naive" SAM; with :math:`\rho = \rho_0 (n/n_0)^{-1/2}` it is the *global* width scaling of Haas et
  al. (2024).
* :class:`Layerwise`: with per-layer scales :math:`s_l`, :math:`v_l = s_l g_l` and

  .. math:: \varepsilon_l = \rho\, v_l / \|v\| \quad(\texttt{normalise="joint"}), \qquad
            \varepsilon_l = \rho\, s_l\, g_l / \|g_l\| \quad(\texttt{normalise="layer"}).

  With :math:`s_l = (n/n_0)^{-d_l}` from a width parameterisation this is the layerwise
  perturbation scaling of μP² (see :mod:`reprobook.models.parametrization`). With every
  :math:`s_l = 1` and ``"joint"`` it is :class:`GlobalRadius`.
* :class:`Unnormalised` (USAM, Andriushchenko & Flammarion 2022): :math:`\varepsilon = \rho g`.
* :class:`Masked`: another rule's perturbation kept only in some layers (e.g. the last: the
  "last-layer SAM" that global SAM reduces to at large width).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

__all__ = [
    "GradFn", "PerturbationRule", "GlobalRadius", "Layerwise", "Unnormalised", "Masked",
    "SamStep", "sam_gradients", "autograd_grad_fn", "CountingGradFn", "member_sqnorm",
    "SAM",
]

#: ``grad_fn(params) -> (loss, grads)``: the loss (a scalar tensor) and one gradient per tensor.
GradFn = Callable[[Sequence[torch.Tensor]], "tuple[torch.Tensor, list[torch.Tensor]]"]

_TINY = 1e-30  # a zero gradient gives a zero perturbation rather than a 0/0


def _check_tensors(name: str, xs) -> list[torch.Tensor]:
    if isinstance(xs, torch.Tensor) or not isinstance(xs, Sequence) or not xs:
        raise TypeError(f"{name} must be a non-empty list of tensors (one per layer), got "
                        f"{type(xs).__name__}")
    out = list(xs)
    for i, x in enumerate(out):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}[{i}] must be a torch.Tensor, got {type(x).__name__}")
    return out


def _member_dims(m) -> int:
    if m not in (0, 1) or isinstance(m, bool):
        raise ValueError(f"member_dims must be 0 (one model) or 1 (a stack of members), got {m!r}")
    return int(m)


def member_sqnorm(t: torch.Tensor, member_dims: int = 0) -> torch.Tensor:
    """Squared Frobenius norm of ``t`` over every dimension but the first ``member_dims``.

    Returns a 0-d tensor for ``member_dims=0`` and a tensor of shape ``(G,)`` for ``1``.
    """
    if member_dims == 0:
        return t.pow(2).sum()
    if t.dim() < 1:
        raise ValueError("with member_dims=1 every tensor needs a leading member dimension")
    return t.pow(2).reshape(t.shape[0], -1).sum(dim=1)


def _bcast(per_member: torch.Tensor, like: torch.Tensor, member_dims: int) -> torch.Tensor:
    """Reshape a per-member quantity so that it broadcasts against a layer tensor."""
    if member_dims == 0 or per_member.dim() == 0:
        return per_member
    return per_member.reshape(per_member.shape[0], *([1] * (like.dim() - 1)))


def _radius(rho, grads, member_dims: int) -> torch.Tensor:
    """``rho`` as a tensor: a scalar, or one value per member (checked against the stack)."""
    ref = grads[0]
    r = torch.as_tensor(rho, dtype=ref.dtype, device=ref.device)
    if r.dim() == 0:
        if not torch.isfinite(r) or r < 0:
            raise ValueError(f"rho must be finite and >= 0, got {float(r)}")
        return r
    if member_dims == 0 or r.dim() != 1 or r.shape[0] != ref.shape[0]:
        raise ValueError(f"rho must be a scalar, or (with member_dims=1) one value per member "
                         f"({ref.shape[0] if member_dims else 'no members'}); got shape "
                         f"{tuple(r.shape)}")
    if not torch.isfinite(r).all() or (r < 0).any():
        raise ValueError("every rho must be finite and >= 0")
    return r


class PerturbationRule:
    """Maps the gradients at ``params`` (one tensor per layer) to a perturbation of each layer."""

    member_dims: int = 0

    def __call__(self, grads: Sequence[torch.Tensor],
                 params: Sequence[torch.Tensor] | None = None) -> list[torch.Tensor]:
        raise NotImplementedError


@dataclass(frozen=True)
class GlobalRadius(PerturbationRule):
    r"""SAM's rule: :math:`\varepsilon = \rho\, g / \|g\|` with one norm over all layers."""

    rho: float | torch.Tensor
    member_dims: int = 0

    def __post_init__(self):
        object.__setattr__(self, "member_dims", _member_dims(self.member_dims))

    def __call__(self, grads, params=None):
        grads = _check_tensors("grads", grads)
        rho = _radius(self.rho, grads, self.member_dims)
        total = sum(member_sqnorm(g, self.member_dims) for g in grads)
        scale = rho / total.sqrt().clamp_min(_TINY)
        return [_bcast(scale, g, self.member_dims) * g for g in grads]


@dataclass(frozen=True)
class Layerwise(PerturbationRule):
    r"""Layerwise perturbation scaling: scales :math:`s_l` per layer, joint or per-layer norm.

    ``scales`` has one positive number per layer. ``normalise="joint"`` divides the scaled
    gradient :math:`v = (s_l g_l)_l` by its norm :math:`\|v\|`; ``"layer"`` divides each layer by
    its own gradient norm, so that :math:`\|\varepsilon_l\| = \rho\, s_l` exactly.
    """

    rho: float | torch.Tensor
    scales: tuple[float, ...]
    normalise: str = "joint"
    member_dims: int = 0

    def __post_init__(self):
        object.__setattr__(self, "member_dims", _member_dims(self.member_dims))
        try:
            scales = tuple(float(s) for s in self.scales)
        except TypeError as exc:
            raise TypeError(f"scales must be a sequence of numbers, got {self.scales!r}") from exc
        if not scales or any(not math.isfinite(s) or s <= 0 for s in scales):
            raise ValueError(f"scales must be positive finite numbers, one per layer; got {scales}")
        object.__setattr__(self, "scales", scales)
        if self.normalise not in ("joint", "layer"):
            raise ValueError(f"normalise must be 'joint' or 'layer', got {self.normalise!r}")

    def __call__(self, grads, params=None):
        grads = _check_tensors("grads", grads)
        if len(grads) != len(self.scales):
            raise ValueError(f"Layerwise rule has {len(self.scales)} scales but got "
                             f"{len(grads)} layers")
        rho = _radius(self.rho, grads, self.member_dims)
        md = self.member_dims
        if self.normalise == "joint":
            total = sum(s * s * member_sqnorm(g, md) for s, g in zip(self.scales, grads))
            scale = rho / total.sqrt().clamp_min(_TINY)
            return [_bcast(scale, g, md) * s * g for s, g in zip(self.scales, grads)]
        out = []
        for s, g in zip(self.scales, grads):
            scale = rho * s / member_sqnorm(g, md).sqrt().clamp_min(_TINY)
            out.append(_bcast(scale, g, md) * g)
        return out


@dataclass(frozen=True)
class Unnormalised(PerturbationRule):
    r"""USAM: :math:`\varepsilon = \rho g` (no normalisation)."""

    rho: float | torch.Tensor
    member_dims: int = 0

    def __post_init__(self):
        object.__setattr__(self, "member_dims", _member_dims(self.member_dims))

    def __call__(self, grads, params=None):
        grads = _check_tensors("grads", grads)
        rho = _radius(self.rho, grads, self.member_dims)
        return [_bcast(rho, g, self.member_dims) * g for g in grads]


@dataclass(frozen=True)
class Masked(PerturbationRule):
    """Another rule's perturbation, kept only in the layers listed in ``keep`` (zero elsewhere).

    The base rule still sees every layer's gradient, so its normalisation is unchanged: with
    ``keep=(-1,)`` and a :class:`GlobalRadius` base this is SAM with every layer's perturbation
    but the last removed.
    """

    base: PerturbationRule
    keep: tuple[int, ...]

    def __post_init__(self):
        if not isinstance(self.base, PerturbationRule):
            raise TypeError(f"base must be a PerturbationRule, got {type(self.base).__name__}")
        keep = tuple(self.keep)
        if not keep or not all(isinstance(k, int) and not isinstance(k, bool) for k in keep):
            raise ValueError(f"keep must be a non-empty tuple of layer indices, got {self.keep!r}")
        object.__setattr__(self, "keep", keep)

    @property
    def member_dims(self) -> int:  # type: ignore[override]
        return self.base.member_dims

    def __call__(self, grads, params=None):
        grads = _check_tensors("grads", grads)
        n = len(grads)
        bad = [k for k in self.keep if not -n <= k < n]
        if bad:
            raise ValueError(f"layer indices {bad} out of range for {n} layers")
        kept = {k % n for k in self.keep}
        eps = self.base(grads, params)
        return [e if i in kept else torch.zeros_like(e) for i, e in enumerate(eps)]


# --------------------------------------------------------------------------------- the SAM step
@dataclass
class SamStep:
    """What one SAM step computed: the loss and gradient at ``w``, the perturbation, and the loss
    and gradient at ``w + eps`` (the gradient the base optimiser uses)."""

    loss: torch.Tensor
    grads: list[torch.Tensor]
    eps: list[torch.Tensor]
    sam_loss: torch.Tensor
    sam_grads: list[torch.Tensor]


class CountingGradFn:
    """Wraps a gradient function and counts its calls (gradient evaluations: the cost unit)."""

    def __init__(self, grad_fn: GradFn):
        if not callable(grad_fn):
            raise TypeError("grad_fn must be callable: grad_fn(params) -> (loss, grads)")
        self.grad_fn = grad_fn
        self.calls = 0

    def __call__(self, params):
        self.calls += 1
        return self.grad_fn(params)


def autograd_grad_fn(loss_fn: Callable[[Sequence[torch.Tensor]], torch.Tensor]) -> GradFn:
    """A gradient function from ``loss_fn(params) -> scalar loss`` by reverse-mode autodiff.

    The parameters passed in are detached copies, so the caller's tensors are never touched.
    """
    if not callable(loss_fn):
        raise TypeError("loss_fn must be callable: loss_fn(params) -> scalar tensor")

    def grad_fn(params):
        ps = [p.detach().requires_grad_(True) for p in _check_tensors("params", params)]
        with torch.enable_grad():
            loss = loss_fn(ps)
            if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
                raise ValueError("loss_fn must return a scalar tensor (sum member losses if you "
                                 "train a stack of members)")
            grads = torch.autograd.grad(loss, ps, allow_unused=True)
        return loss.detach(), [torch.zeros_like(p) if g is None else g for p, g in zip(ps, grads)]

    return grad_fn


def sam_gradients(grad_fn: GradFn, params: Sequence[torch.Tensor], rule: PerturbationRule,
                  *, at_w: tuple[torch.Tensor, list[torch.Tensor]] | None = None) -> SamStep:
    """One SAM gradient: ``g = grad_fn(w)``, ``eps = rule(g, w)``, ``grad_fn(w + eps)``.

    ``at_w`` passes an already computed ``(loss, grads)`` at ``w`` (saving one evaluation when the
    caller needs it anyway). Nothing is mutated.
    """
    params = _check_tensors("params", params)
    if not isinstance(rule, PerturbationRule):
        raise TypeError(f"rule must be a PerturbationRule, got {type(rule).__name__}")
    loss, grads = grad_fn(params) if at_w is None else at_w
    grads = _check_tensors("grads", grads)
    if len(grads) != len(params) or any(g.shape != p.shape for g, p in zip(grads, params)):
        raise ValueError("grad_fn must return one gradient per parameter, of the same shape")
    eps = rule(grads, params)
    sam_loss, sam_grads = grad_fn([p + e for p, e in zip(params, eps)])
    return SamStep(loss, list(grads), eps, sam_loss, list(sam_grads))


# ----------------------------------------------------------------- a torch.optim-style wrapper
class SAM(torch.optim.Optimizer):
    """SAM around any ``torch.optim`` optimiser, for ``nn.Module`` training loops.

    ``rule`` receives the parameters' ``.grad`` in the order of the parameter list (one entry per
    tensor, so a :class:`Layerwise` rule needs one scale per tensor). Call ``step(closure)`` with a
    closure that zeroes the gradients, computes the loss, calls ``backward()`` and returns the
    loss; the closure is called twice (at ``w`` and at ``w + eps``), and :attr:`grad_evals` counts
    the calls.
    """

    def __init__(self, params, base_optimizer_cls, rule: PerturbationRule, **base_kwargs):
        if not isinstance(rule, PerturbationRule):
            raise TypeError(f"rule must be a PerturbationRule, got {type(rule).__name__}")
        if getattr(rule, "member_dims", 0) != 0:
            raise ValueError("the SAM optimiser wrapper perturbs one model; use member_dims=0")
        params = list(params)
        self.base = base_optimizer_cls(params, **base_kwargs)
        super().__init__(self.base.param_groups, dict(self.base.defaults))
        self.param_groups = self.base.param_groups
        self.rule = rule
        self.grad_evals = 0

    def _params(self):
        return [p for group in self.param_groups for p in group["params"]]

    @torch.no_grad()
    def step(self, closure=None):
        if closure is None:
            raise ValueError("SAM.step needs a closure that recomputes the loss and its gradients")
        closure = torch.enable_grad()(closure)
        params = self._params()
        loss = closure()
        self.grad_evals += 1
        grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in params]
        eps = self.rule(grads, params)
        saved = [p.detach().clone() for p in params]
        for p, e in zip(params, eps):
            p.add_(e)
        closure()
        self.grad_evals += 1
        for p, w in zip(params, saved):
            p.copy_(w)  # back to w exactly (w + eps - eps is not w in floating point)
        self.base.step()
        return loss
