r"""Image manipulations and attacks for testing the robustness of an image watermark.

Images are float tensors ``(B, C, H, W)`` in :math:`[0, 1]`. Every operation is differentiable
(kornia's differentiable JPEG codec, Gaussian blur, affine warps), so the same code serves as a
training augmentation, as an evaluation manipulation and inside an adversary's gradient.

**Manipulations** (:data:`MANIPULATIONS`, :func:`manipulate`), each at one fixed evaluation strength
and, in :func:`random_augment`, at a strength drawn per image from a training range:

========== ===================================== ===================================
kind        evaluation strength                  training range
========== ===================================== ===================================
jpeg        quality 50 (kornia's codec)           quality 50 ... 90
noise       additive Gaussian, sigma 0.05         sigma 0 ... 0.05 (see ``noise_max``)
blur        Gaussian blur, sigma 1.0              sigma 0.1 ... 1.0
brightness  pixel values times 0.8                factor 0.8 ... 1.2
crop        central 80% crop resized back         kept fraction 0.8 ... 1.0 (random place)
rotate      rotation by 10 degrees (zero border)  -10 ... 10 degrees
========== ===================================== ===================================

All but ``noise`` are clamped back to :math:`[0, 1]` (a saved image is).

**The removal adversary** (:func:`pgd_l2`): :math:`\ell_2` projected gradient descent on a score
:math:`s`, :math:`\delta_{t+1}=\Pi_{\lVert\delta\rVert_2\le r,\;x+\delta\in[0,1]}
\big(\delta_t - \eta\,\nabla s(x+\delta_t)/\lVert\nabla s(x+\delta_t)\rVert_2\big)` per image (a
normalised step, as in Madry et al.'s :math:`\ell_2` attack), with ``direction=+1`` for the opposite
goal (forging a mark). When the score is random (a smoothed detector evaluated with fresh noise at
every call), each step averages the gradient over ``eot`` calls: expectation over transformation
(Athalye et al.), which is what makes the attack adaptive to randomised smoothing.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch

__all__ = ["MANIPULATIONS", "manipulate", "random_augment", "pgd_l2"]

MANIPULATIONS = ("jpeg", "noise", "blur", "brightness", "crop", "rotate")


def _check(x: torch.Tensor) -> None:
    if not torch.is_tensor(x) or x.ndim != 4 or x.shape[1] not in (1, 3):
        raise ValueError(f"expected images (B, C, H, W) with C in (1, 3), got "
                         f"{tuple(x.shape) if torch.is_tensor(x) else type(x).__name__}")


def _jpeg(x: torch.Tensor, quality: torch.Tensor) -> torch.Tensor:
    import kornia
    if x.shape[-1] % 16 or x.shape[-2] % 16:
        raise ValueError(f"jpeg needs sides that are multiples of 16, got {tuple(x.shape[-2:])}")
    if x.shape[1] == 1:
        return _jpeg(x.expand(-1, 3, -1, -1), quality)[:, :1]
    return kornia.enhance.jpeg_codec_differentiable(x.clamp(0, 1), quality.to(x))


def _blur(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    import kornia
    s = sigma.to(x)[:, None].expand(-1, 2)
    k = 2 * math.ceil(3 * float(sigma.max())) + 1
    return kornia.filters.gaussian_blur2d(x, (k, k), s, border_type="reflect")


def _crop(x: torch.Tensor, keep: torch.Tensor, cy: torch.Tensor, cx: torch.Tensor) -> torch.Tensor:
    # an axis-aligned square of side keep * H at fractional offset (cy, cx) of the free margin,
    # resized back to H x W (bilinear): a zoom-in, the "resized crop" of the training recipes
    from kornia.geometry.transform import crop_and_resize
    b, _, h, w = x.shape
    side_h, side_w = keep.to(x) * (h - 1), keep.to(x) * (w - 1)
    y0, x0 = cy.to(x) * (h - 1 - side_h), cx.to(x) * (w - 1 - side_w)
    boxes = torch.stack([torch.stack([x0, y0], 1), torch.stack([x0 + side_w, y0], 1),
                         torch.stack([x0 + side_w, y0 + side_h], 1), torch.stack([x0, y0 + side_h], 1)], 1)
    return crop_and_resize(x, boxes, (h, w), align_corners=True)


def _rotate(x: torch.Tensor, degrees: torch.Tensor) -> torch.Tensor:
    from kornia.geometry.transform import rotate
    return rotate(x, degrees.to(x), align_corners=True)


def _apply(x: torch.Tensor, kind: str, strength: torch.Tensor, generator: torch.Generator | None,
           extra: tuple = ()) -> torch.Tensor:
    if kind == "jpeg":
        return _jpeg(x, strength)
    if kind == "noise":
        if generator is None:
            raise ValueError("noise needs a generator")
        return x + strength.to(x)[:, None, None, None] * torch.randn(x.shape, generator=generator).to(x)
    if kind == "blur":
        return _blur(x, strength).clamp(0, 1)
    if kind == "brightness":
        return (x * strength.to(x)[:, None, None, None]).clamp(0, 1)
    if kind == "crop":
        cy, cx = extra if extra else (torch.full_like(strength, 0.5), torch.full_like(strength, 0.5))
        return _crop(x, strength, cy, cx).clamp(0, 1)
    if kind == "rotate":
        return _rotate(x, strength).clamp(0, 1)
    raise ValueError(f"unknown manipulation {kind!r}; use one of {MANIPULATIONS}")


#: the fixed evaluation strength of each manipulation
EVAL_STRENGTH = {"jpeg": 50.0, "noise": 0.05, "blur": 1.0, "brightness": 0.8, "crop": 0.8, "rotate": 10.0}


def manipulate(x: torch.Tensor, kind: str, generator: torch.Generator | None = None) -> torch.Tensor:
    """``x`` after one manipulation at its fixed evaluation strength (table above); ``"none"``
    returns ``x``. ``noise`` needs a ``generator``."""
    _check(x)
    if kind == "none":
        return x
    if kind not in EVAL_STRENGTH:
        raise ValueError(f"unknown manipulation {kind!r}; use 'none' or one of {MANIPULATIONS}")
    return _apply(x, kind, torch.full((x.shape[0],), EVAL_STRENGTH[kind]), generator)


def random_augment(x: torch.Tensor, generator: torch.Generator, kinds=MANIPULATIONS, p_none: float = 0.25,
                   noise_max: float = 0.05) -> torch.Tensor:
    """Each image gets one manipulation drawn uniformly from ``kinds`` (or none, with probability
    ``p_none``) at a strength drawn from its training range (table above; the noise level is uniform
    on ``[0, noise_max]``). Used on both classes while training a detector, so that it learns the
    mark and not the manipulation."""
    _check(x)
    unknown = [k for k in kinds if k not in MANIPULATIONS]
    if unknown:
        raise ValueError(f"unknown manipulations {unknown}; use {MANIPULATIONS}")
    if not 0 <= p_none <= 1:
        raise ValueError(f"p_none must lie in [0, 1], got {p_none}")
    b = x.shape[0]
    u = lambda lo, hi: lo + (hi - lo) * torch.rand(b, generator=generator)  # noqa: E731
    draws = {"jpeg": u(50, 90), "noise": u(0, noise_max), "blur": u(0.1, 1.0),
             "brightness": u(0.8, 1.2), "crop": u(0.8, 1.0), "rotate": u(-10, 10)}
    extra = (torch.rand(b, generator=generator), torch.rand(b, generator=generator))
    which = torch.randint(len(kinds), (b,), generator=generator)
    none = torch.rand(b, generator=generator) < p_none
    out = x.clone()
    for i, kind in enumerate(kinds):
        idx = torch.nonzero((which == i) & ~none).flatten()
        if idx.numel():
            ex = (extra[0][idx], extra[1][idx]) if kind == "crop" else ()
            out[idx] = _apply(x[idx], kind, draws[kind][idx], generator, ex)
    return out


def pgd_l2(score: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, radius: float, steps: int,
           step_size: float | None = None, eot: int = 1, direction: int = -1) -> torch.Tensor:
    """The attacked images ``x + delta`` with ``||delta_i||_2 <= radius`` per image and pixels in
    [0, 1], after ``steps`` normalised gradient steps that lower (``direction=-1``: removal) or raise
    (``+1``: forgery) ``score(x)`` (one value per image), each gradient averaged over ``eot`` calls
    of ``score``. ``step_size`` defaults to ``2.5 * radius / steps`` (Madry et al.'s choice)."""
    _check(x)
    if radius < 0 or steps < 0 or eot < 1:
        raise ValueError(f"need radius >= 0, steps >= 0, eot >= 1; got {radius}, {steps}, {eot}")
    if direction not in (-1, 1):
        raise ValueError(f"direction must be -1 (removal) or +1 (forgery), got {direction}")
    if radius == 0 or steps == 0:
        return x.detach().clone()
    eta = 2.5 * radius / steps if step_size is None else step_size
    x = x.detach()
    delta = torch.zeros_like(x)
    for _ in range(steps):
        delta.requires_grad_(True)
        total = sum(score(x + delta).sum() for _ in range(eot)) / eot
        (grad,) = torch.autograd.grad(total, delta)
        with torch.no_grad():
            g = grad.flatten(1)
            g = g / g.norm(dim=1, keepdim=True).clamp_min(1e-12)
            delta = delta + direction * eta * g.view_as(x)
            delta = (x + delta).clamp(0, 1) - x                      # stay a valid image
            norm = delta.flatten(1).norm(dim=1).clamp_min(1e-12)
            delta = delta * (radius / norm).clamp(max=1.0)[:, None, None, None]
    return (x + delta).detach()
