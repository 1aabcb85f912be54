r"""Shifted test marginals for halfspace learning under Gaussian training data, with the exact error
of any halfspace on each.

A :class:`Marginal` is a finite mixture of components :math:`x = \mu_k + A_k z`, where :math:`z` is

* ``"gaussian"``: :math:`N(0, I)`, so the component is :math:`N(\mu_k, A_kA_k^\top)`
  (:math:`A_k = 0` is a point mass at :math:`\mu_k`);
* ``"student"``: :math:`N(0, I)\sqrt{\nu/\chi^2_\nu}`, a multivariate Student :math:`t_\nu` (centred);
* ``"shell"``: uniform on the sphere of radius :math:`\sqrt d` (centred).

The error of a halfspace :math:`\hat w` against the target :math:`w^\star` on a marginal,
:math:`P(\operatorname{sign}\langle\hat w, x\rangle \ne \operatorname{sign}\langle w^\star, x\rangle)`,
is exact (:meth:`Marginal.disagreement`): a Gaussian component by the bivariate normal orthant
probability; a centred Student or shell component by the same formula with :math:`\mu = 0` and
covariance :math:`A_kA_k^\top`, because the sign of a linear form does not see the radius, and
:math:`z/\lVert z\rVert` has the same law in all three cases.

The families (:func:`benign_shifts`, :func:`adversarial_shifts`) are the test marginals of the
chapter on TDS learning: benign shifts move mass but keep it away from the target's boundary;
adversarial ones put mass exactly where :math:`\hat w` and :math:`w^\star` disagree.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..learning.halfspaces import gaussian_disagreement, unit

__all__ = ["Component", "Marginal", "benign_shifts", "adversarial_shifts", "disagreement_plane"]

_KINDS = ("gaussian", "student", "shell")


@dataclass(frozen=True)
class Component:
    """One mixture component ``x = mean + factor @ z`` (see the module for ``kind``)."""

    weight: float
    mean: np.ndarray
    factor: np.ndarray
    kind: str = "gaussian"
    dof: float = 5.0

    def __post_init__(self):
        mean = np.asarray(self.mean, dtype=np.float64)
        factor = np.asarray(self.factor, dtype=np.float64)
        d = mean.size
        if mean.ndim != 1 or factor.shape != (d, d):
            raise ValueError(f"mean must be (d,) and factor (d, d), got {mean.shape}, {factor.shape}")
        if self.kind not in _KINDS:
            raise ValueError(f"unknown component kind {self.kind!r}; use one of {_KINDS}")
        if self.kind != "gaussian" and np.any(mean != 0):
            raise ValueError(f"a {self.kind} component must be centred (its exact error uses "
                             "the invariance of a sign to the radius)")
        if not self.weight > 0 or not self.dof > 0:
            raise ValueError("weight and dof must be positive")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "factor", factor)

    @property
    def covariance_shape(self) -> np.ndarray:
        return self.factor @ self.factor.T


class Marginal:
    """A named finite mixture of :class:`Component` (weights normalised to one)."""

    def __init__(self, name: str, components: list[Component]):
        if not components:
            raise ValueError("a marginal needs at least one component")
        d = {c.mean.size for c in components}
        if len(d) != 1:
            raise ValueError(f"components of different dimensions: {sorted(d)}")
        self.name, self.components, self.dim = name, list(components), d.pop()
        w = np.array([c.weight for c in components])
        self.weights = w / w.sum()

    def sample(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """``m`` i.i.d. points, shape ``(m, d)``."""
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise ValueError(f"m must be a positive int, got {m!r}")
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy Generator (reprobook.rng(seed, ...))")
        counts = rng.multinomial(m, self.weights)
        parts = []
        for c, k in zip(self.components, counts):
            if k == 0:
                continue
            z = rng.standard_normal((k, self.dim))
            if c.kind == "student":
                z *= np.sqrt(c.dof / rng.chisquare(c.dof, size=k))[:, None]
            elif c.kind == "shell":
                z *= math.sqrt(self.dim) / np.linalg.norm(z, axis=1, keepdims=True)
            parts.append(c.mean + z @ c.factor.T)
        x = np.concatenate(parts)
        return x[rng.permutation(m)]

    def disagreement(self, w1, w2) -> float:
        """The exact probability that the halfspaces of ``w1`` and ``w2`` disagree (the module)."""
        return float(sum(p * gaussian_disagreement(w1, w2, c.mean, c.covariance_shape)
                         for p, c in zip(self.weights, self.components)))

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """The mixture's mean and covariance (Student components have ``dof/(dof-2)`` times their
        shape; shells exactly their shape)."""
        mean = sum(p * c.mean for p, c in zip(self.weights, self.components))
        second = 0
        for p, c in zip(self.weights, self.components):
            inflate = c.dof / (c.dof - 2) if c.kind == "student" else 1.0
            if c.kind == "student" and c.dof <= 2:
                inflate = math.inf
            second = second + p * (inflate * c.covariance_shape + np.outer(c.mean, c.mean))
        return mean, second - np.outer(mean, mean)


def _iso(d):
    return Component(1.0, np.zeros(d), np.eye(d))


def _scaled_off(w_star, along: float, across: float) -> np.ndarray:
    """A factor with standard deviation ``along`` along ``w_star`` and ``across`` orthogonally."""
    w = unit(w_star)
    p = np.outer(w, w)
    return along * p + across * (np.eye(w.size) - p)


def _orthonormal_to(w, rng_free_index: int = 0) -> np.ndarray:
    """A fixed unit vector orthogonal to ``w`` (Gram-Schmidt on a coordinate axis)."""
    d = w.size
    for i in range(d):
        e = np.zeros(d)
        e[(i + rng_free_index) % d] = 1.0
        v = e - (e @ w) * w
        if np.linalg.norm(v) > 1e-6:
            return unit(v)
    raise ValueError("d must be at least 2")


def benign_shifts(w_star, *, scale: float = 3.0, shift: float = 2.0, dof: float = 5.0,
                  rotation_deg: float = 30.0, stretch: float = 3.0) -> list[Marginal]:
    r"""The test marginals that move mass but not towards :math:`w^\star`'s boundary:

    * ``same as training``: :math:`N(0, I)`;
    * ``wider off-target``: variance ``scale`` orthogonally to :math:`w^\star`, 1 along it;
    * ``shifted along ±w*``: :math:`\tfrac12 N(\pm\text{shift}\,w^\star, I)`, away from the boundary;
    * ``Student t``: a multivariate :math:`t_\text{dof}` (heavier radial tails, same directions);
    * ``sphere shell``: uniform on the sphere of radius :math:`\sqrt d` (same mean and covariance as
      :math:`N(0, I)`: a global moment test cannot see it);
    * ``rotated stretch``: variance ``stretch`` along a direction at ``rotation_deg`` from the
      boundary plane, in a plane containing :math:`w^\star`.
    """
    w = unit(w_star)
    d = w.size
    if d < 2:
        raise ValueError("the shift families need d >= 2")
    u = _orthonormal_to(w)
    angle = math.radians(rotation_deg)
    v = math.cos(angle) * u + math.sin(angle) * w
    stretch_factor = np.eye(d) + (math.sqrt(stretch) - 1) * np.outer(v, v)
    zero, eye = np.zeros(d), np.eye(d)
    return [
        Marginal("same as training", [_iso(d)]),
        Marginal("wider off-target", [Component(1.0, zero, _scaled_off(w, 1.0, math.sqrt(scale)))]),
        Marginal("shifted along ±w*", [Component(0.5, shift * w, eye),
                                       Component(0.5, -shift * w, eye)]),
        Marginal("Student t", [Component(1.0, zero, eye, kind="student", dof=dof)]),
        Marginal("sphere shell", [Component(1.0, zero, eye, kind="shell")]),
        Marginal("rotated stretch", [Component(1.0, zero, stretch_factor)]),
    ]


def disagreement_plane(w_hat, w_star) -> tuple[np.ndarray, np.ndarray, float]:
    r"""An orthonormal pair :math:`(e_1, e_2)` with :math:`e_1 = \hat w` and
    :math:`w^\star = \cos\alpha\,e_1 + \sin\alpha\,e_2` (:math:`\alpha > 0`), and :math:`\alpha`."""
    e1, w = unit(w_hat), unit(w_star)
    rest = w - (w @ e1) * e1
    if np.linalg.norm(rest) < 1e-15:
        raise ValueError("w_hat and w_star coincide: they disagree nowhere")
    e2 = unit(rest)
    return e1, e2, float(math.atan2(w @ e2, w @ e1))


def adversarial_shifts(w_hat, w_star, *, mass: float = 0.2, small_mass: float = 0.05,
                       radius: float = 2.0, thickness: float = 1e-4) -> list[Marginal]:
    r"""The test marginals that put mass where :math:`\hat w` and :math:`w^\star` disagree. With
    :math:`e_1, e_2, \alpha` from :func:`disagreement_plane`, the disagreement region meets the plane
    in the wedges between the two boundary lines, bisected by
    :math:`b = -\sin(\alpha/2)e_1 + \cos(\alpha/2)e_2`:

    * ``wedge, q``: mass ``q`` split between point masses at :math:`\pm\,\text{radius}\cdot b` (both
      misclassified by :math:`\hat w`), the rest :math:`N(0, I)`; for ``small_mass`` and ``mass``;
    * ``wedge, moments matched``: the same with mass ``mass`` and the rest
      :math:`N(0, (I - q r^2 bb^\top)/(1-q))`, so the mixture has mean 0 and covariance :math:`I`
      exactly: a global moment tester cannot tell it from :math:`N(0, I)` (needs :math:`qr^2 < 1`);
    * ``thin slab``: mass ``mass`` in :math:`N(0, I - (1 - t^2)w^\star w^{\star\top})`, a slab of
      thickness ``thickness`` around :math:`w^\star`'s boundary (about half of it misclassified).
    """
    e1, e2, alpha = disagreement_plane(w_hat, w_star)
    d = e1.size
    if not 0 < mass < 1 or not 0 < small_mass < 1:
        raise ValueError("the adversarial masses must be in (0, 1)")
    if mass * radius**2 >= 1:
        raise ValueError(f"moment matching needs mass * radius^2 < 1, got {mass * radius ** 2}")
    b = -math.sin(alpha / 2) * e1 + math.cos(alpha / 2) * e2
    zero, eye = np.zeros(d), np.eye(d)

    def wedge(q, rest):
        point = radius * b
        return [Component(q / 2, point, np.zeros((d, d))), Component(q / 2, -point, np.zeros((d, d))),
                Component(1 - q, zero, rest)]

    matched = np.linalg.cholesky((eye - mass * radius**2 * np.outer(b, b)) / (1 - mass))
    w = unit(w_star)
    return [
        Marginal(f"wedge, q = {small_mass:g}", wedge(small_mass, eye)),
        Marginal(f"wedge, q = {mass:g}", wedge(mass, eye)),
        Marginal("wedge, moments matched", wedge(mass, matched)),
        Marginal("thin slab", [Component(mass, zero, _scaled_off(w, thickness, 1.0)),
                               Component(1 - mass, zero, eye)]),
    ]
