r"""WeiPer (Granz, Heurich & Landgraf, NeurIPS 2024): OOD scores from perturbed class projections.

A classifier ends in a linear layer :math:`f(x) = W z(x) + b` with class rows :math:`w_c\in\mathbb
R^D` acting on the penultimate features :math:`z\in\mathbb R^D`. WeiPer draws :math:`R` perturbed
copies of :math:`W`, each class row moved by a random direction of fixed relative length
:math:`\delta`,

.. math:: \tilde w_{r,c} = w_c + \delta\,\lVert w_c\rVert\,u_{r,c},\qquad
          u_{r,c} = g_{r,c}/\lVert g_{r,c}\rVert,\ g_{r,c}\sim\mathcal N(0, I_D),

and stacks them into :math:`\tilde W\in\mathbb R^{RC\times D}` (the bias is repeated unchanged).
The perturbed logits :math:`\tilde f(x)=\tilde W z(x)+[b;\dots;b]` are :math:`RC` projections of
:math:`z` on a cone around each class direction: they see more of the feature distribution than
the :math:`C` logits do.

**WeiPer+MSP** averages the maximum softmax over the :math:`R` blocks of :math:`C` perturbed
logits, :math:`\mathrm{MSP}_W(x)=\tfrac1R\sum_r\max_c\mathrm{softmax}(\tilde f_r(x))_c`. With
:math:`\delta=0` every block is :math:`f(x)`, so it is MSP.

**WeiPer+KLD** compares per-sample empirical densities with the training set's. For one sample, the
:math:`D` coordinates of :math:`z(x)` form a 1-D histogram over ``n_bins`` equal bins spanning the
training features' global range (padded by one average gap, ``(max - min) / n_train``, at both
ends; values outside fall in two overflow bins that are dropped), each bin holding the fraction of
the coordinates that fall in it; likewise the :math:`RC` perturbed logits over their own training
range. The sample's histogram :math:`q` is smoothed by a uniform moving average of ``smoothing``
bins (replicate padding), :math:`\epsilon` is added and it is renormalised; the training reference
:math:`p` is the mean of the training samples' (unsmoothed) histograms, plus :math:`\epsilon`,
renormalised. The discrepancy is the symmetric KL divergence
:math:`\mathrm{KL}(p\Vert q)+\mathrm{KL}(q\Vert p)`, and the score (higher = more ID) is

.. math:: s(x) = -\bigl(d_{\mathrm{KL}}^{z}(x) + \lambda_1 d_{\mathrm{KL}}^{\tilde f}(x)
          - \lambda_2\,\mathrm{MSP}_W(x)\bigr).

Defaults follow the official code (``delta=2.1``, ``R=100``, 100 bins, smoothing 20 and 20,
:math:`\epsilon=0.01` for the features and 0.025 for the perturbed logits,
:math:`\lambda_1=\lambda_2=1`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["perturbation_directions", "perturbed_weights", "weiper_logits", "weiper_msp",
           "coordinate_histograms", "smooth_uniform", "symmetric_kl", "WeiPerKLD"]


def _int(name, v, low=1):
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
    return v


def _weight(weight) -> torch.Tensor:
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or weight.shape[0] < 2:
        raise ValueError("weight must be a (classes >= 2, dim) tensor, got "
                         f"{tuple(getattr(weight, 'shape', ()))}")
    return weight


def perturbation_directions(n_classes: int, dim: int, repeats: int,
                            generator: torch.Generator, dtype=torch.float64) -> torch.Tensor:
    """Unit random directions :math:`u_{r,c}`, shape (repeats, n_classes, dim)."""
    _int("n_classes", n_classes, 2), _int("dim", dim), _int("repeats", repeats)
    if not isinstance(generator, torch.Generator):
        raise TypeError("generator must be a torch.Generator (seeded from reprobook.rng)")
    g = torch.randn(repeats, n_classes, dim, generator=generator, dtype=dtype)
    return F.normalize(g, dim=-1)


def perturbed_weights(weight: torch.Tensor, delta: float, directions: torch.Tensor, *,
                      class_directions: bool = True) -> torch.Tensor:
    """The stacked perturbed class projections :math:`\\tilde W`, shape (repeats * C, D).

    Row ``r * C + c`` is :math:`w_c + \\delta\\lVert w_c\\rVert u_{r,c}`. With
    ``class_directions=False`` the :math:`w_c` term is dropped (the official code's noise-only
    ablation): random projections of the same lengths, no longer tied to the classes.
    """
    weight = _weight(weight)
    if not delta >= 0:
        raise ValueError(f"delta must be >= 0, got {delta}")
    if directions.dim() != 3 or directions.shape[1:] != weight.shape:
        raise ValueError(f"directions must be (repeats, {weight.shape[0]}, {weight.shape[1]}), "
                         f"got {tuple(directions.shape)}")
    w = weight.to(directions.dtype)
    scale = delta * w.norm(dim=1)[None, :, None]
    base = w[None] if class_directions else torch.zeros_like(w)[None]
    return (base + scale * directions).reshape(-1, w.shape[1])


def weiper_logits(features: torch.Tensor, w_tilde: torch.Tensor,
                  bias: torch.Tensor | None = None) -> torch.Tensor:
    """Perturbed logits :math:`z\\tilde W^\\top + [b;\\dots;b]`, shape (n, repeats * C)."""
    if features.dim() != 2 or features.shape[1] != w_tilde.shape[1]:
        raise ValueError(f"features must be (n, {w_tilde.shape[1]}), got {tuple(features.shape)}")
    out = features.to(w_tilde.dtype) @ w_tilde.T
    if bias is not None:
        if bias.dim() != 1 or w_tilde.shape[0] % bias.shape[0]:
            raise ValueError(f"bias must be (C,) with C dividing {w_tilde.shape[0]}, got "
                             f"{tuple(bias.shape)}")
        out = out + bias.to(out.dtype).repeat(w_tilde.shape[0] // bias.shape[0])
    return out


def weiper_msp(perturbed: torch.Tensor, n_classes: int) -> torch.Tensor:
    """:math:`\\mathrm{MSP}_W`: mean over the repeats of each block's max softmax, shape (n,)."""
    _int("n_classes", n_classes, 2)
    if perturbed.dim() != 2 or perturbed.shape[1] % n_classes:
        raise ValueError(f"perturbed logits must be (n, repeats * {n_classes}), got "
                         f"{tuple(perturbed.shape)}")
    blocks = perturbed.reshape(perturbed.shape[0], -1, n_classes)
    return torch.softmax(blocks, dim=-1).amax(dim=-1).mean(dim=-1)


def coordinate_histograms(values: torch.Tensor, low: float, high: float,
                          n_bins: int) -> torch.Tensor:
    """Each row's histogram of its own coordinates over ``n_bins`` bins of [low, high).

    Returns (n, n_bins): the fraction of the row's ``m`` values in each bin. Values outside
    [low, high) are counted in the total but in no bin (the dropped overflow bins), so a row sums
    to the fraction of its values in range.
    """
    _int("n_bins", n_bins)
    if values.dim() != 2 or values.shape[1] < 1:
        raise ValueError(f"values must be (n, m >= 1), got {tuple(values.shape)}")
    if not high > low:
        raise ValueError(f"need high > low, got [{low}, {high})")
    n, m = values.shape
    pos = (values.to(torch.float64) - low) / (high - low) * n_bins
    idx = torch.floor(pos).long()
    inside = (idx >= 0) & (idx < n_bins)
    # index n_bins collects everything out of range, then is cut off
    idx = torch.where(inside, idx, torch.full_like(idx, n_bins))
    flat = idx + (n_bins + 1) * torch.arange(n)[:, None]
    counts = torch.bincount(flat.reshape(-1), minlength=n * (n_bins + 1)).reshape(n, n_bins + 1)
    return counts[:, :n_bins].to(torch.float64) / m


def smooth_uniform(density: torch.Tensor, width: int) -> torch.Tensor:
    """Moving average of ``width`` bins along the last axis, same length, replicate padding.

    The window of bin ``i`` is ``[i - (width - 1) // 2, i + width // 2]`` (torch's ``'same'``
    convention for an even kernel).
    """
    _int("width", width)
    if density.dim() != 2:
        raise ValueError(f"density must be (n, bins), got {tuple(density.shape)}")
    left = (width - 1) // 2
    padded = F.pad(density[:, None, :], (left, width - 1 - left), mode="replicate")
    return F.avg_pool1d(padded, width, stride=1)[:, 0, :]


def _prob(x: torch.Tensor, eps: float) -> torch.Tensor:
    x = x + eps
    return x / x.sum(dim=-1, keepdim=True)


def symmetric_kl(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """:math:`\\mathrm{KL}(p\\Vert q)+\\mathrm{KL}(q\\Vert p)` along the last axis (strictly
    positive probability vectors; ``p`` broadcasts against ``q``)."""
    if (p <= 0).any() or (q <= 0).any():
        raise ValueError("symmetric_kl needs strictly positive densities (add eps first)")
    return ((p - q) * (p.log() - q.log())).sum(dim=-1)


@dataclass
class _Space:
    low: float
    high: float
    reference: torch.Tensor        # the mean training histogram, (n_bins,)


class WeiPerKLD:
    """WeiPer+KLD (and WeiPer+MSP) on top of a classifier's last layer (see the module).

    ``WeiPerKLD(weight, bias, directions, ...).fit(train_features)`` stores the training ranges
    and mean histograms; ``components(features)`` returns the three terms of the score and
    ``score(features)`` combines them. ``directions`` come from :func:`perturbation_directions`,
    so that one draw can be reused across ``delta`` values.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None,
                 directions: torch.Tensor, *, delta: float = 2.1, n_bins: int = 100,
                 smoothing: int = 20, smoothing_perturbed: int = 20, eps: float = 0.01,
                 eps_perturbed: float = 0.025, lambda1: float = 1.0, lambda2: float = 1.0,
                 class_directions: bool = True):
        weight = _weight(weight)
        self.n_classes = weight.shape[0]
        self.w_tilde = perturbed_weights(weight, delta, directions,
                                         class_directions=class_directions)
        # the noise-only ablation drops the bias with the class rows, as the official code does
        self.bias = bias if class_directions else None
        self.n_bins = _int("n_bins", n_bins)
        self.smoothing = _int("smoothing", smoothing)
        self.smoothing_perturbed = _int("smoothing_perturbed", smoothing_perturbed)
        for name, v in (("eps", eps), ("eps_perturbed", eps_perturbed)):
            if not v > 0:
                raise ValueError(f"{name} must be > 0, got {v}")
        self.eps, self.eps_perturbed = float(eps), float(eps_perturbed)
        self.lambda1, self.lambda2 = float(lambda1), float(lambda2)
        self._spaces: dict[str, _Space] | None = None

    def perturbed_logits(self, features: torch.Tensor) -> torch.Tensor:
        return weiper_logits(features, self.w_tilde, self.bias)

    def _space(self, x: torch.Tensor) -> _Space:
        lo, hi = float(x.min()), float(x.max())
        gap = (hi - lo) / x.shape[0]
        lo, hi = lo - gap, hi + gap
        if not hi > lo:
            raise ValueError("the training values are all equal: no range to bin")
        return _Space(lo, hi, coordinate_histograms(x, lo, hi, self.n_bins).mean(dim=0))

    def fit(self, train_features: torch.Tensor) -> "WeiPerKLD":
        z = train_features.to(torch.float64)
        self._spaces = {"latent": self._space(z), "weiper": self._space(self.perturbed_logits(z))}
        return self

    def _kl(self, x: torch.Tensor, space: _Space, width: int, eps: float) -> torch.Tensor:
        q = smooth_uniform(coordinate_histograms(x, space.low, space.high, self.n_bins), width)
        return symmetric_kl(_prob(space.reference, eps), _prob(q, eps))

    def components(self, features: torch.Tensor) -> dict[str, torch.Tensor]:
        """``kl_latent``, ``kl_weiper`` and ``msp_weiper`` of every row, each shape (n,)."""
        if self._spaces is None:
            raise RuntimeError("call fit(train_features) before scoring")
        z = features.to(torch.float64)
        t = self.perturbed_logits(z)
        return {"kl_latent": self._kl(z, self._spaces["latent"], self.smoothing, self.eps),
                "kl_weiper": self._kl(t, self._spaces["weiper"], self.smoothing_perturbed,
                                      self.eps_perturbed),
                "msp_weiper": weiper_msp(t, self.n_classes)}

    @staticmethod
    def combine(parts: dict[str, torch.Tensor], lambda1: float, lambda2: float) -> torch.Tensor:
        """The WeiPer+KLD score from :meth:`components` for given :math:`\\lambda_1,\\lambda_2`."""
        return -(parts["kl_latent"] + lambda1 * parts["kl_weiper"]
                 - lambda2 * parts["msp_weiper"])

    def score(self, features: torch.Tensor) -> torch.Tensor:
        """WeiPer+KLD score of every row (higher = more in-distribution), shape (n,)."""
        return self.combine(self.components(features), self.lambda1, self.lambda2)
