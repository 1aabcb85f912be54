r"""Uncertainty-aware watermarking of a 3-D Gaussian scene (GaussianMarker, Huang et al., NeurIPS
2024), on the orthographic splatting renderer of :mod:`reprobook.render.gaussian_splat`.

**Parameters.** A scene is held *raw*: means :math:`\mu`, log-scales, quaternions, colour logits
and opacity logits (:func:`to_raw`, :func:`activate`: colours and opacities are sigmoids, scales
exponentials), so that any change of the raw tensors is a valid scene.

**Uncertainty (Laplace approximation).** Around a fitted scene :math:`\theta_0` with a squared
render loss over the training views, the posterior precision is approximately the Gauss-Newton
(Fisher) matrix :math:`H = J^\top J` plus a prior precision :math:`\lambda_0`, with :math:`J` the
Jacobian of every rendered pixel and channel of every training view with respect to the
parameters. FisherRF and GaussianMarker keep its diagonal,
:math:`H_{jj} = \sum_{v,p,c} (\partial C_{v,p,c}/\partial\theta_j)^2`.
:func:`fisher_diagonal` estimates it with Rademacher probes: for :math:`z` with independent
:math:`\pm1` entries, :math:`\mathbb E[(J^\top z)_j^2] = \sum_k J_{kj}^2 = H_{jj}` (unbiased; one
backward pass per probe instead of one per pixel). As in the official code the parameters are the
means and the (linear) colours, and a Gaussian's precision is the sum over its own entries,
:math:`H_i = \sum_{j\in i} H_{jj}`; its uncertainty is the log posterior variance
:math:`U_i = -\log(H_i + \lambda_0)` (:func:`gaussian_uncertainty`).

**The perturbation (what the watermark may change).** GaussianMarker clones the Gaussians whose
uncertainty is high (position resampled inside each one's own ellipsoid), freezes the original
scene and optimises only the clones (:func:`clone_gaussians`, ``mode="clone"`` of
:func:`embed`). The naive baseline changes every parameter of every Gaussian (``mode="all"``,
the isotropic perturbation). Masks by lowest uncertainty or at random (:func:`select`) are the
controls. All modes minimise the same objective,

.. math:: L = \lambda_r \frac1{|B|}\sum_{v\in B} \lVert C_v(\theta) - C_v(\theta_0)\rVert_1
          + w\,\big[\mathrm{BCE}(D_2(A(C_v(\theta))), m) + \mathrm{BCE}(D_3(\theta), m)\big],

over random batches :math:`B` of training views, with :math:`A` a random image distortion (or
none) so that the 2-D message survives distortions, :math:`m` the message bits, and :math:`w` the
message weight.

**Decoders.** The paper's 2-D decoder is a pretrained HiDDeN network and its 3-D decoder a
PointNet; both are fixed while the scene is watermarked. Here they are fixed random networks:
:class:`PooledFeatureDecoder` (a random CNN on the image's band-pass, averaged over the image) and :class:`PointDecoder` (a
PointNet: a shared random ReLU layer on each Gaussian's standardised attributes, mean-pooled, a
random linear read-out, centred so that the original scene decodes to random bits).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from reprobook.render.gaussian_splat import render

__all__ = ["to_raw", "activate", "render_raw", "fisher_diagonal", "gaussian_uncertainty", "select",
           "clone_gaussians", "PooledFeatureDecoder", "PointDecoder", "distort_image",
           "distort_gaussians", "IMAGE_DISTORTIONS", "GAUSSIAN_DISTORTIONS", "psnr", "bit_accuracy",
           "embed", "perturbation_sensitivity", "spearman"]

KEYS = ("means", "log_scales", "quats", "colour_logits", "opacity_logits")
IMAGE_DISTORTIONS = ("none", "noise", "blur", "jpeg", "brightness")
GAUSSIAN_DISTORTIONS = ("none", "noise", "prune")


def _logit(p: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    p = p.clamp(eps, 1 - eps)
    return torch.log(p) - torch.log1p(-p)


def to_raw(scene: dict) -> dict:
    """Raw (unconstrained) tensors of a scene given as ``means, scales, quats, colours, opacities``."""
    missing = [k for k in ("means", "scales", "quats", "colours", "opacities") if k not in scene]
    if missing:
        raise ValueError(f"scene lacks {missing}")
    return {"means": scene["means"].clone(), "log_scales": scene["scales"].log(),
            "quats": scene["quats"].clone(), "colour_logits": _logit(scene["colours"]),
            "opacity_logits": _logit(scene["opacities"])}


def activate(raw: dict) -> tuple:
    """(means, scales, quats, colours, opacities) of raw tensors."""
    return (raw["means"], raw["log_scales"].exp(), raw["quats"], torch.sigmoid(raw["colour_logits"]),
            torch.sigmoid(raw["opacity_logits"]))


def render_raw(raw: dict, views: torch.Tensor, size: int, extent: float, **kw) -> torch.Tensor:
    """:func:`~reprobook.render.gaussian_splat.render` of a raw scene."""
    return render(*activate(raw), views, size, extent, **kw)


def _cat(a: dict, b: dict) -> dict:
    return {k: torch.cat([a[k], b[k]]) for k in KEYS}


def fisher_diagonal(raw: dict, views: torch.Tensor, size: int, extent: float, n_probes: int,
                    generator: torch.Generator, **kw) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Rademacher estimate of :math:`\mathrm{diag}(J^\top J)` of the renders of ``views`` with
    respect to the means (N, 3) and the activated colours (N, 3), averaged over ``n_probes``
    probes (the views are rendered together; independent probes per view keep it unbiased)."""
    if n_probes < 1:
        raise ValueError(f"n_probes must be >= 1, got {n_probes}")
    means, scales, quats, colours, opac = (t.detach() for t in activate(raw))
    means, colours = means.clone().requires_grad_(), colours.clone().requires_grad_()
    img = render(means, scales, quats, colours, opac, views, size, extent, **kw)
    hm, hc = torch.zeros_like(means), torch.zeros_like(colours)
    for r in range(n_probes):
        z = torch.randint(0, 2, img.shape, generator=generator).to(img) * 2 - 1
        gm, gc = torch.autograd.grad(img, (means, colours), z, retain_graph=r < n_probes - 1)
        hm += gm ** 2
        hc += gc ** 2
    return hm / n_probes, hc / n_probes


def gaussian_uncertainty(fisher_means: torch.Tensor, fisher_colours: torch.Tensor,
                         prior: float = 1e-4) -> torch.Tensor:
    r"""Per-Gaussian log posterior variance :math:`U_i=-\log(H_i+\lambda_0)` with
    :math:`H_i` the summed Fisher diagonal of its mean and colour and :math:`\lambda_0` = ``prior``
    times the mean of :math:`H_i` (a weak isotropic prior, so unseen Gaussians get a finite value)."""
    if fisher_means.shape != fisher_colours.shape or fisher_means.ndim != 2:
        raise ValueError(f"Fisher diagonals must both be (N, 3), got {tuple(fisher_means.shape)} and "
                         f"{tuple(fisher_colours.shape)}")
    h = fisher_means.sum(1) + fisher_colours.sum(1)
    lam = prior * h.mean().clamp_min(1e-30)
    return -torch.log(h + lam)


def select(uncertainty: torch.Tensor, fraction: float, how: str,
           generator: torch.Generator | None = None) -> torch.Tensor:
    """Boolean mask of ``round(fraction * N)`` Gaussians (at least one): the most uncertain
    (``"high"``, GaussianMarker), the least (``"low"``) or uniformly at random (``"random"``)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction!r}")
    n = uncertainty.shape[0]
    k = max(1, round(fraction * n))
    if how == "high":
        idx = torch.argsort(uncertainty, descending=True, stable=True)[:k]
    elif how == "low":
        idx = torch.argsort(uncertainty, stable=True)[:k]
    elif how == "random":
        if generator is None:
            raise ValueError("how='random' needs a generator")
        idx = torch.randperm(n, generator=generator)[:k]
    else:
        raise ValueError(f"unknown selection {how!r}; use 'high', 'low' or 'random'")
    mask = torch.zeros(n, dtype=torch.bool)
    mask[idx] = True
    return mask


def clone_gaussians(raw: dict, mask: torch.Tensor, generator: torch.Generator) -> dict:
    """Copies of the masked Gaussians with their means resampled inside their own ellipsoid
    (mean + R(q) diag(s) eps, eps ~ N(0, I)), as GaussianMarker's densification does."""
    if mask.dtype != torch.bool or mask.shape != raw["means"].shape[:1]:
        raise ValueError(f"mask must be a bool tensor of shape {tuple(raw['means'].shape[:1])}")
    from reprobook.render.gaussian_splat import quat_to_rotmat
    sub = {k: raw[k][mask].detach().clone() for k in KEYS}
    eps = torch.randn(sub["means"].shape, generator=generator).to(sub["means"])
    rot = quat_to_rotmat(sub["quats"])
    sub["means"] = sub["means"] + (rot @ (sub["log_scales"].exp() * eps)[..., None])[..., 0]
    return sub


class PooledFeatureDecoder(torch.nn.Module):
    r"""Fixed random 2-D decoder that reads *where-ever* the mark is: a bias-free random CNN
    (two 3x3 convolutions with ReLU) on the image's high-pass residual :math:`I - G_\sigma * I`,
    averaged over all pixels and normalised to unit length,
    :math:`\phi(I)=\bar h/\lVert\bar h\rVert`. Averaging makes it translation-invariant (a mark
    on the object's surface is read from any view that sees it, as HiDDeN's global pooling does),
    and the normalisation makes it blind to a global brightness scale. Logits
    :math:`= b_0 + \kappa\,(\phi(I)-\phi_0)\,W` with :math:`\phi_0` the mean feature of the
    original scene's renders (``reference``), :math:`b_0\sim N(0, 1)` (the original decodes to
    random bits) and :math:`\kappa` set so that the original's own logits vary across the reference
    views with unit standard deviation: a message must stand out from the scene's variation."""

    def __init__(self, n_bits: int, reference: torch.Tensor, generator: torch.Generator,
                 width: int = 32, sigma: float = 1.0, view_spread: float = 0.25):
        super().__init__()
        if reference.ndim != 4 or reference.shape[1] != 3 or reference.shape[0] < 2:
            raise ValueError(f"reference must be >= 2 images (V, 3, H, W), got {tuple(reference.shape)}")
        dt = reference.dtype
        self.sigma = sigma
        self.register_buffer("c1", torch.randn(width, 3, 3, 3, generator=generator).to(dt) / math.sqrt(27))
        self.register_buffer("c2", torch.randn(width, width, 3, 3, generator=generator).to(dt)
                             / math.sqrt(9 * width))
        self.register_buffer("w", torch.randn(width, n_bits, generator=generator).to(dt))
        self.register_buffer("b0", torch.randn(n_bits, generator=generator).to(dt))
        with torch.no_grad():
            f = self.features(reference)
            self.register_buffer("phi0", f.mean(0))
            spread = ((f - self.phi0) @ self.w).std(0).mean()
        self.kappa = float(view_spread / spread.clamp_min(1e-12))

    def features(self, img: torch.Tensor) -> torch.Tensor:
        import kornia
        if img.ndim != 4 or img.shape[1] != 3:
            raise ValueError(f"expected images (B, 3, H, W), got {tuple(img.shape)}")
        def blur(x, s):
            k = 2 * math.ceil(3 * s) + 1
            return kornia.filters.gaussian_blur2d(x, (k, k), (s, s), border_type="reflect")
        bp = blur(img, self.sigma) - blur(img, 2 * self.sigma)
        h = torch.relu(F.conv2d(bp.to(self.c1), self.c1, padding=1))
        h = torch.relu(F.conv2d(h, self.c2, padding=1)).mean((-1, -2))
        return h / h.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return self.b0 + self.kappa * (self.features(img) - self.phi0) @ self.w


def point_features(raw: dict) -> torch.Tensor:
    """Per-Gaussian attributes the 3-D decoder reads: mean, colour, opacity, log-scales (N, 10)."""
    means, scales, _, colours, opac = activate(raw)
    return torch.cat([means, colours, opac[:, None], scales.log()], 1)


class PointDecoder(torch.nn.Module):
    r"""Fixed random PointNet: :math:`h_i=\mathrm{ReLU}(W_1 \hat f_i + b_1)` on the standardised
    attributes :math:`\hat f_i` of each Gaussian (statistics of the original scene), mean-pooled,
    logits :math:`= b_0 + \kappa\,(\bar h - \bar h_0) W_2` with :math:`\bar h_0` the original
    scene's pooled feature and :math:`b_0\sim N(0,1)`: the original decodes to random bits."""

    def __init__(self, n_bits: int, reference: dict, generator: torch.Generator, width: int = 64,
                 gain: float = 10.0):
        super().__init__()
        f = point_features(reference).detach().double()
        self.register_buffer("mu", f.mean(0))
        self.register_buffer("sd", f.std(0).clamp_min(1e-6))
        self.register_buffer("w1", torch.randn(f.shape[1], width, generator=generator, dtype=torch.float64)
                             / math.sqrt(f.shape[1]))
        self.register_buffer("b1", torch.randn(width, generator=generator, dtype=torch.float64))
        self.register_buffer("w2", torch.randn(width, n_bits, generator=generator, dtype=torch.float64)
                             / math.sqrt(width))
        self.register_buffer("b0", torch.randn(n_bits, generator=generator, dtype=torch.float64))
        self.gain = gain
        self.register_buffer("h0", self._pooled(f))

    def _pooled(self, f: torch.Tensor) -> torch.Tensor:
        return torch.relu(((f.to(self.mu) - self.mu) / self.sd) @ self.w1 + self.b1).mean(0)

    def forward(self, raw: dict) -> torch.Tensor:
        h = self._pooled(point_features(raw))
        return self.b0 + self.gain * (h - self.h0) @ self.w2


def distort_image(img: torch.Tensor, kind: str, generator: torch.Generator | None = None) -> torch.Tensor:
    """A 2-D attack on renders (B, 3, H, W) in [0, 1]: ``noise`` (Gaussian, sigma 0.03), ``blur``
    (Gaussian, sigma 0.7), ``jpeg`` (quality 50, kornia's differentiable codec; sides must be
    multiples of 16), ``brightness`` (x 0.9) or ``none``."""
    import kornia
    if kind == "none":
        return img
    if kind == "noise":
        g = generator if generator is not None else torch.Generator().manual_seed(0)
        return img + 0.03 * torch.randn(img.shape, generator=g).to(img)
    if kind == "blur":
        return kornia.filters.gaussian_blur2d(img, (5, 5), (0.7, 0.7), border_type="reflect")
    if kind == "jpeg":
        if img.shape[-1] % 16 or img.shape[-2] % 16:
            raise ValueError(f"jpeg needs sides that are multiples of 16, got {tuple(img.shape[-2:])}")
        q = torch.full((img.shape[0],), 50.0, dtype=img.dtype, device=img.device)
        return kornia.enhance.jpeg_codec_differentiable(img.clamp(0, 1), q)
    if kind == "brightness":
        return 0.9 * img
    raise ValueError(f"unknown image distortion {kind!r}; use one of {IMAGE_DISTORTIONS}")


def distort_gaussians(raw: dict, kind: str, generator: torch.Generator) -> dict:
    """A 3-D attack on a raw scene: ``noise`` (N(0, 0.01^2) added to means, log-scales, colour and
    opacity logits), ``prune`` (a random 10% of the Gaussians removed) or ``none``."""
    if kind == "none":
        return raw
    if kind == "noise":
        return {k: (raw[k] + 0.01 * torch.randn(raw[k].shape, generator=generator).to(raw[k])
                    if k != "quats" else raw[k]) for k in KEYS}
    if kind == "prune":
        n = raw["means"].shape[0]
        keep = torch.randperm(n, generator=generator)[: n - round(0.1 * n)]
        return {k: raw[k][keep] for k in KEYS}
    raise ValueError(f"unknown Gaussian distortion {kind!r}; use one of {GAUSSIAN_DISTORTIONS}")


def psnr(x: torch.Tensor, ref: torch.Tensor) -> float:
    """PSNR (dB, data range 1) of all of ``x`` against ``ref`` (one MSE over every pixel)."""
    if x.shape != ref.shape:
        raise ValueError(f"shapes differ: {tuple(x.shape)} and {tuple(ref.shape)}")
    mse = float(((x.clamp(0, 1) - ref.clamp(0, 1)) ** 2).mean())
    return 10 * math.log10(1 / max(mse, 1e-20))


def bit_accuracy(logits: torch.Tensor, message: torch.Tensor) -> float:
    """Share of bits with ``logits > 0`` equal to ``message`` (broadcast over leading dims)."""
    return float(((logits > 0) == message.bool()).float().mean())


def embed(raw0: dict, views: torch.Tensor, size: int, extent: float, message: torch.Tensor,
          decoder2d, decoder3d, *, mode: str, mask: torch.Tensor | None, weight: float, steps: int,
          lr: float, generator: torch.Generator, batch_views: int = 2, render_weight: float = 10.0,
          augment=("none", "noise", "blur", "brightness"), targets: torch.Tensor | None = None,
          **kw) -> dict:
    """Watermark ``raw0`` with ``message`` (see the module docstring). ``mode="all"`` perturbs
    every parameter of every Gaussian; ``mode="clone"`` appends clones of the ``mask`` Gaussians
    and optimises only them. Returns the watermarked raw scene (detached). ``targets`` are the
    original renders of ``views`` (computed if not given)."""
    if mode not in ("all", "clone"):
        raise ValueError(f"unknown mode {mode!r}; use 'all' or 'clone'")
    if mode == "clone" and (mask is None or not bool(mask.any())):
        raise ValueError("mode='clone' needs a non-empty mask")
    base = {k: raw0[k].detach() for k in KEYS}
    if targets is None:
        with torch.no_grad():
            targets = render_raw(base, views, size, extent, **kw)
    if mode == "all":
        params = {k: base[k].clone().requires_grad_() for k in KEYS}
        scene = lambda: params  # noqa: E731
    else:
        params = {k: v.requires_grad_() for k, v in clone_gaussians(base, mask, generator).items()}
        scene = lambda: _cat(base, params)  # noqa: E731
    opt = torch.optim.Adam(list(params.values()), lr=lr)
    msg = message.to(targets.dtype)
    n_views = views.shape[0]
    for _ in range(steps):
        idx = torch.randperm(n_views, generator=generator)[:batch_views]
        cur = scene()
        img = render_raw(cur, views[idx], size, extent, **kw)
        rec = (img - targets[idx]).abs().mean()
        kind = augment[int(torch.randint(len(augment), (1,), generator=generator))] if augment else "none"
        logits2 = decoder2d(distort_image(img, kind, generator))
        loss2 = F.binary_cross_entropy_with_logits(logits2, msg.expand_as(logits2))
        logits3 = decoder3d(cur)
        loss3 = F.binary_cross_entropy_with_logits(logits3, msg.to(logits3))
        loss = render_weight * rec + weight * (loss2 + loss3.to(loss2))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.detach() for k, v in scene().items()}


def perturbation_sensitivity(raw: dict, index: torch.Tensor, views: torch.Tensor, size: int,
                             extent: float, step: float, generator: torch.Generator, **kw) -> torch.Tensor:
    r"""For each Gaussian in ``index``, :math:`\Delta_i=\sum_v\lVert C_v(\theta+\delta_i)-C_v(\theta)\rVert^2`
    on ``views``, with :math:`\delta_i` a random direction of norm ``step`` in that Gaussian's
    mean and (linear) colour only (the parameters the uncertainty is computed on)."""
    means, scales, quats, colours, opac = (t.detach() for t in activate(raw))
    with torch.no_grad():
        ref = render(means, scales, quats, colours, opac, views, size, extent, **kw)
        out = []
        for i in index.tolist():
            d = torch.randn(6, generator=generator).to(means)
            d = step * d / d.norm()
            m, c = means.clone(), colours.clone()
            m[i] += d[:3]
            c[i] += d[3:]
            img = render(m, scales, quats, c, opac, views, size, extent, **kw)
            out.append(float(((img - ref) ** 2).sum()))
    return torch.tensor(out, dtype=torch.float64)


def spearman(x, y) -> float:
    """Spearman rank correlation (average ranks for ties)."""
    from scipy.stats import spearmanr
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 3:
        raise ValueError(f"need two 1-D arrays of equal length >= 3, got {x.shape} and {y.shape}")
    return float(spearmanr(x, y).statistic)
