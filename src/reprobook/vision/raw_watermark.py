r"""RAW (Xian, Wang, Bi, Srinivasa, Kundu, Hong & Ding, NeurIPS 2024): a learnable image-space
watermark trained jointly with its detector, conformal thresholds with a false-positive guarantee,
randomised smoothing for a guarantee under attack; and the baselines it is compared with.

**Injection** (the official ``wm_method``). With :math:`\mathcal F` the centred 2-D DFT
(``fftshift(fft2(.))``), a fixed boolean frequency mask :math:`M` (here a mid-frequency ring,
:func:`ring_mask`), a frequency watermark :math:`v` whose first channel's spectrum is used for every
channel, a spatial watermark :math:`u` and strengths :math:`c_1, c_2`,

.. math:: E_w(x) = \mathrm{clip}_{[0,1]}\Big(\Re\,\mathcal F^{-1}\big(\mathcal F(x) + c_1\,M\odot
          \mathcal F(v_0)\big) + c_2\,u\Big) = \mathrm{clip}_{[0,1]}(x + \delta_w),
   \qquad \delta_w = c_1\,\Re\,\mathcal F^{-1}(M\odot\mathcal F(v_0)) + c_2\,u .

The DFT is linear, so the mark is one additive pattern :math:`\delta_w` (:func:`perturbation`),
the same for every image: encoding costs two FFTs (or one addition) per image.

**Budget.** The paper fixes :math:`c_1=c_2=0.05` but does not say how large the learned :math:`v,u`
become. To compare methods at equal visibility we fix the energy of the mark instead: after every
update :func:`project_budget` rescales :math:`(v,u)` so that the root-mean-square of
:math:`\delta_w` is at most ``rms`` (e.g. :math:`10^{-36/20}` for a PSNR of 36 dB before clipping).
Every baseline gets the same RMS.

**Joint training** (:func:`train_raw`): minimise over the watermark and a CNN detector
:math:`f_\theta` (:class:`Detector`, two logits) the cross-entropy of clean images (label 0) and
watermarked ones (label 1), both passed through the same random manipulations (JPEG, noise, blur,
brightness, crop, rotation: :func:`reprobook.vision.image_attacks.random_augment`) and, as in
randomised-smoothing training (Cohen et al.), Gaussian noise of the smoothing level. With
``learn_watermark=False`` the watermark stays at its random initial draw and only the detector
learns: the fixed-pattern baseline (the ablation of learnability).

**Detection with a false-positive guarantee** (the paper's null hypothesis is *watermarked*; a false
positive is a watermarked image declared clean). With scores :math:`z_1..z_n` of watermarked
calibration images, exchangeable with a new watermarked image, the conformal threshold
:math:`\tau=z_{(k)}`, :math:`k=\lfloor\alpha(n+1)\rfloor` (:func:`conformal_threshold`) gives
:math:`P(z_{\rm new}<\tau)\le k/(n+1)\le\alpha`, whatever the score and the distribution.

**Under attack** (:func:`smoothed_z`). The smoothed score :math:`g(x)=\mathbb E_\eta[p_\theta(x+\eta)]`,
:math:`\eta\sim N(0,\sigma^2I)`, :math:`p_\theta` the detector's watermark probability, makes
:math:`z=\Phi^{-1}(g)` :math:`(1/\sigma)`-Lipschitz (Salman et al. 2019). A removal attack with
:math:`\lVert\delta\rVert_2\le r` can then lower :math:`z` by at most :math:`r/\sigma`, so declaring
"clean" only when :math:`z(x)<\tau-r/\sigma` (:func:`robust_threshold`) keeps the false-positive rate
at most :math:`\alpha` under any such attack. :math:`g` is estimated by Monte Carlo, so the bound
holds up to that estimate's error.

**Baselines.**

* :class:`DCTSpreadSpectrum`: a classical zero-bit spread-spectrum mark (Cox et al. 1997): a
  pseudo-random :math:`\pm1` key on a mid-frequency band of the orthonormal 2-D DCT, added to every
  channel at the same RMS budget; detected blind by the normalised correlation of the image's
  band with the key.
* :class:`HiddenLiteEncoder`: the encoder half of a HiDDeN-style encoder-decoder (convolutions over
  the image and the message broadcast as planes), for the encoding-time comparison only.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from reprobook.vision.image_attacks import random_augment

__all__ = ["rgb_photo", "random_crops", "ring_mask", "perturbation", "inject", "project_budget",
           "init_watermark", "Detector", "train_raw", "detector_scores", "smoothed_z",
           "conformal_threshold", "robust_threshold", "tpr_at_fpr", "image_quality",
           "DCTSpreadSpectrum", "HiddenLiteEncoder", "PHOTOS_RGB"]

#: photographs that ship in scikit-image and scikit-learn (``camera`` is grey: copied to 3 channels)
PHOTOS_RGB = ("astronaut", "coffee", "chelsea", "camera", "rocket", "china", "flower")


@lru_cache(maxsize=None)
def rgb_photo(name: str) -> np.ndarray:
    """A photograph as a read-only float32 ``(3, H, W)`` array in [0, 1] (decoded once, cached)."""
    if name in ("china", "flower"):
        from sklearn.datasets import load_sample_image
        img = np.asarray(load_sample_image(f"{name}.jpg"))
    elif name in PHOTOS_RGB:
        import skimage.data
        img = np.asarray(getattr(skimage.data, name)())
    else:
        raise ValueError(f"unknown photo {name!r}; choose from {PHOTOS_RGB}")
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=2)
    out = np.ascontiguousarray(img[..., :3].transpose(2, 0, 1), dtype=np.float32) / 255.0
    out.setflags(write=False)
    return out


def random_crops(n: int, size: int, generator: torch.Generator, *, rows: tuple[float, float] = (0.0, 1.0),
                 zoom: int = 2, photos=PHOTOS_RGB) -> torch.Tensor:
    """``n`` crops ``(n, 3, size, size)``: a ``zoom * size`` square cut at a uniform place from a
    photo drawn uniformly from ``photos``, averaged down by ``zoom`` (so a crop holds more scene
    than ``size`` raw pixels), with its top row in the fraction range ``rows`` of the photo's valid
    top rows (disjoint ranges give disjoint training and test regions)."""
    lo, hi = rows
    if not 0.0 <= lo < hi <= 1.0:
        raise ValueError(f"rows must be a fraction range 0 <= lo < hi <= 1, got {rows}")
    if int(n) != n or n < 1 or int(size) != size or size < 4 or zoom < 1:
        raise ValueError(f"need n >= 1, size >= 4, zoom >= 1; got {n}, {size}, {zoom}")
    side = size * zoom
    which = torch.randint(len(photos), (n,), generator=generator)
    out = torch.empty(n, 3, side, side)
    for i in range(n):
        img = rgb_photo(photos[int(which[i])])
        h, w = img.shape[1:]
        if h < side or w < side:
            raise ValueError(f"photo {photos[int(which[i])]} ({h}x{w}) is smaller than a {side} crop")
        r0, r1 = int(lo * (h - side)), max(int(lo * (h - side)) + 1, int(hi * (h - side)))
        y = int(torch.randint(r0, r1, (1,), generator=generator))
        x = int(torch.randint(0, w - side + 1, (1,), generator=generator))
        out[i] = torch.from_numpy(np.array(img[:, y:y + side, x:x + side]))
    return F.avg_pool2d(out, zoom) if zoom > 1 else out


def ring_mask(size: int, inner: float, outer: float) -> torch.Tensor:
    """Boolean ``(size, size)`` mask of the centred DFT grid with ``inner <= radius < outer``
    (radius in frequency bins from the centre, after ``fftshift``)."""
    if not 0 <= inner < outer:
        raise ValueError(f"need 0 <= inner < outer, got {inner}, {outer}")
    c = torch.arange(size) - size // 2
    r = torch.sqrt(c[:, None].double() ** 2 + c[None, :].double() ** 2)
    return (r >= inner) & (r < outer)


def _check_wm(w_freq, w_spa, mask):
    if w_freq.ndim != 3 or w_freq.shape != w_spa.shape:
        raise ValueError(f"watermarks must both be (C, H, W), got {tuple(w_freq.shape)}, {tuple(w_spa.shape)}")
    if mask.dtype != torch.bool or mask.shape != w_freq.shape[1:]:
        raise ValueError(f"mask must be a bool tensor of shape {tuple(w_freq.shape[1:])}")


def _centred_dft(x: torch.Tensor) -> torch.Tensor:
    return torch.fft.fftshift(torch.fft.fft2(x, dim=(-2, -1)), dim=(-2, -1))


def _inverse_centred_dft(f: torch.Tensor) -> torch.Tensor:
    return torch.fft.ifft2(torch.fft.ifftshift(f, dim=(-2, -1)), dim=(-2, -1)).real


def inject(x: torch.Tensor, w_freq: torch.Tensor, w_spa: torch.Tensor, mask: torch.Tensor,
           c_freq: float = 0.05, c_spa: float = 0.05, clip: bool = True) -> torch.Tensor:
    """:math:`E_w(x)` of the module docstring, computed as the official code does: the image's
    centred DFT plus ``c_freq`` times the first channel's watermark spectrum on ``mask``, back to
    pixels (real part), plus ``c_spa * w_spa``, clipped to [0, 1]. ``x`` is ``(B, C, H, W)``."""
    _check_wm(w_freq, w_spa, mask)
    if x.ndim != 4 or x.shape[1:] != w_freq.shape:
        raise ValueError(f"images must be (B, {', '.join(map(str, w_freq.shape))}), got {tuple(x.shape)}")
    fw = _centred_dft(w_freq)
    fw = fw[:1].expand_as(fw)                        # channel 0's spectrum for every channel
    fx = _centred_dft(x)
    fx = fx + c_freq * torch.where(mask, fw, torch.zeros_like(fw))
    out = _inverse_centred_dft(fx) + c_spa * w_spa
    return out.clamp(0, 1) if clip else out


def perturbation(w_freq: torch.Tensor, w_spa: torch.Tensor, mask: torch.Tensor, c_freq: float = 0.05,
                 c_spa: float = 0.05) -> torch.Tensor:
    """The additive pattern :math:`\\delta_w` ``(C, H, W)``: ``inject(x) == clip(x + delta_w)``."""
    _check_wm(w_freq, w_spa, mask)
    fw = _centred_dft(w_freq[:1])
    band = _inverse_centred_dft(torch.where(mask, fw, torch.zeros_like(fw)))
    return c_freq * band.expand_as(w_spa) + c_spa * w_spa


def project_budget(w_freq: torch.Tensor, w_spa: torch.Tensor, mask: torch.Tensor, rms: float,
                   c_freq: float = 0.05, c_spa: float = 0.05) -> tuple[torch.Tensor, torch.Tensor]:
    """``(w_freq, w_spa)`` scaled by one common factor so that the RMS of :func:`perturbation` is at
    most ``rms`` (unchanged when it already is): the projection onto the budget's ball along the ray."""
    if not rms > 0:
        raise ValueError(f"rms must be positive, got {rms}")
    with torch.no_grad():
        cur = float(perturbation(w_freq, w_spa, mask, c_freq, c_spa).pow(2).mean().sqrt())
    s = min(1.0, rms / max(cur, 1e-20))
    return w_freq * s, w_spa * s


def init_watermark(shape: tuple, mask: torch.Tensor, rms: float, generator: torch.Generator,
                   c_freq: float = 0.05, c_spa: float = 0.05) -> tuple[torch.Tensor, torch.Tensor]:
    """A random watermark pair (standard normal entries) scaled to exactly the RMS budget."""
    wf, ws = torch.randn(shape, generator=generator), torch.randn(shape, generator=generator)
    cur = float(perturbation(wf, ws, mask, c_freq, c_spa).pow(2).mean().sqrt())
    return wf * (rms / cur), ws * (rms / cur)


class Detector(torch.nn.Module):
    """A small CNN with a two-way output (clean, watermarked): four 3x3 convolutions (the last
    three with stride 2) with ReLU, global average pooling and a linear layer. The paper uses a
    ResNet-18 at 512 x 512; this is its scaled-down stand-in for 32 x 32 crops."""

    def __init__(self, channels: int = 3, width: int = 16):
        super().__init__()
        w = width
        self.convs = torch.nn.ModuleList([
            torch.nn.Conv2d(channels, w, 3, padding=1), torch.nn.Conv2d(w, 2 * w, 3, stride=2, padding=1),
            torch.nn.Conv2d(2 * w, 2 * w, 3, stride=2, padding=1),
            torch.nn.Conv2d(2 * w, 4 * w, 3, stride=2, padding=1)])
        self.head = torch.nn.Linear(4 * w, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4:
            raise ValueError(f"expected images (B, C, H, W), got {tuple(x.shape)}")
        h = x
        for conv in self.convs:
            h = F.relu(conv(h))
        return self.head(h.mean((-2, -1)))

    def prob(self, x: torch.Tensor) -> torch.Tensor:
        """Watermark probability (softmax of the second logit), one per image."""
        return torch.softmax(self(x), dim=1)[:, 1]


def train_raw(images: torch.Tensor, mask: torch.Tensor, rms: float, steps: int, generator: torch.Generator,
              *, batch: int = 32, lr: float = 3e-3, lr_watermark: float = 0.05, learn_watermark: bool = True,
              augment: bool = True, smooth_sigma: float = 0.0, width: int = 16, c_freq: float = 0.05,
              c_spa: float = 0.05, init: tuple | None = None) -> dict:
    """Jointly train the watermark (unless ``learn_watermark=False``) and a :class:`Detector` on
    ``images`` ``(N, C, H, W)`` (module docstring). Each step draws ``batch`` images, watermarks a
    copy, passes both halves through :func:`random_augment` (if ``augment``) and adds Gaussian noise
    of level ``smooth_sigma`` to half of each (the smoothing noise; 0: none), and takes one Adam step
    on the cross-entropy; the watermark is projected back onto the RMS budget after every step.
    Returns ``{"w_freq", "w_spa", "detector", "init"}`` (``init``: the watermark before training)."""
    if images.ndim != 4:
        raise ValueError(f"images must be (N, C, H, W), got {tuple(images.shape)}")
    if steps < 0 or batch < 2:
        raise ValueError(f"need steps >= 0 and batch >= 2, got {steps}, {batch}")
    shape = tuple(images.shape[1:])
    wf0, ws0 = init if init is not None else init_watermark(shape, mask, rms, generator, c_freq, c_spa)
    wf, ws = wf0.clone().requires_grad_(learn_watermark), ws0.clone().requires_grad_(learn_watermark)
    torch.manual_seed(int(torch.randint(2 ** 62, (1,), generator=generator)))   # detector init
    det = Detector(shape[0], width)
    opt = torch.optim.Adam(det.parameters(), lr=lr)
    opt_w = torch.optim.Adam([wf, ws], lr=lr_watermark * float(wf0.abs().mean())) if learn_watermark else None
    labels = torch.cat([torch.zeros(batch, dtype=torch.long), torch.ones(batch, dtype=torch.long)])
    for _ in range(steps):
        idx = torch.randint(images.shape[0], (batch,), generator=generator)
        x = images[idx]
        xw = inject(x, wf, ws, mask, c_freq, c_spa)
        both = torch.cat([x, xw])
        if augment:
            both = random_augment(both, generator)
        if smooth_sigma > 0:
            noisy = torch.rand(2 * batch, generator=generator) < 0.5
            both = both + smooth_sigma * noisy[:, None, None, None] * torch.randn(both.shape, generator=generator)
        loss = F.cross_entropy(det(both), labels)
        opt.zero_grad()
        if opt_w is not None:
            opt_w.zero_grad()
        loss.backward()
        opt.step()
        if opt_w is not None:
            opt_w.step()
            with torch.no_grad():
                pf, ps = project_budget(wf, ws, mask, rms, c_freq, c_spa)
                wf.copy_(pf)
                ws.copy_(ps)
    det.eval()
    return {"w_freq": wf.detach(), "w_spa": ws.detach(), "detector": det, "init": (wf0, ws0)}


def detector_scores(detector: torch.nn.Module, x: torch.Tensor, batch: int = 512) -> np.ndarray:
    """The detector's watermark probability of each image, as a float64 array."""
    with torch.no_grad():
        return np.concatenate([detector.prob(x[i:i + batch]).double().numpy()
                               for i in range(0, x.shape[0], batch)])


def smoothed_z(detector: torch.nn.Module, x: torch.Tensor, sigma: float, n_samples: int,
               generator: torch.Generator | None, grad: bool = False, clip: float = 6.0) -> torch.Tensor:
    r""":math:`z(x)=\Phi^{-1}(\hat g(x))`, :math:`\hat g` the mean watermark probability over
    ``n_samples`` Gaussian perturbations of level ``sigma`` (drawn from ``generator``), clipped to
    :math:`[-{\rm clip}, {\rm clip}]` (a monotone clip keeps the Lipschitz bound). Differentiable when
    ``grad`` (for an adaptive attack)."""
    if sigma <= 0 or n_samples < 1:
        raise ValueError(f"need sigma > 0 and n_samples >= 1, got {sigma}, {n_samples}")
    ctx = torch.enable_grad() if grad else torch.no_grad()
    with ctx:
        reps = x.repeat_interleave(n_samples, 0)
        noise = torch.randn(reps.shape, generator=generator).to(x)
        g = detector.prob(reps + sigma * noise).view(x.shape[0], n_samples).mean(1)
        eps = torch.finfo(g.dtype).eps
        z = math.sqrt(2.0) * torch.erfinv(2 * g.clamp(eps, 1 - eps) - 1)
        return z.clamp(-clip, clip)


def conformal_threshold(calibration: np.ndarray, alpha: float) -> float:
    """:math:`\\tau=z_{(k)}`, the ``k``-th smallest calibration score with
    :math:`k=\\lfloor\\alpha(n+1)\\rfloor` (``-inf`` when :math:`k=0`: too few calibration scores to
    reject anything at level ``alpha``). A new exchangeable score falls below :math:`\\tau` with
    probability at most :math:`k/(n+1)\\le\\alpha`."""
    z = np.sort(np.asarray(calibration, dtype=np.float64).ravel())
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if z.size == 0 or not np.isfinite(z).all():
        raise ValueError("need finite calibration scores")
    k = math.floor(alpha * (z.size + 1))
    return -math.inf if k == 0 else float(z[k - 1])


def robust_threshold(tau: float, radius: float, sigma: float) -> float:
    """The threshold that keeps the conformal guarantee under an l2 removal attack of norm at most
    ``radius`` on a :math:`(1/\\sigma)`-Lipschitz score: :math:`\\tau - r/\\sigma`."""
    if radius < 0 or sigma <= 0:
        raise ValueError(f"need radius >= 0 and sigma > 0, got {radius}, {sigma}")
    return tau - radius / sigma


def tpr_at_fpr(score_pos, score_neg, fpr: float = 0.01) -> float:
    """Share of positives scored strictly above the threshold that lets through at most ``fpr`` of
    the negatives (the ``ceil((1 - fpr) n)``-th smallest negative score)."""
    a = np.asarray(score_pos, dtype=np.float64).ravel()
    b = np.sort(np.asarray(score_neg, dtype=np.float64).ravel())
    if a.size == 0 or b.size == 0:
        raise ValueError("need positive and negative scores")
    if not 0 <= fpr < 1:
        raise ValueError(f"fpr must lie in [0, 1), got {fpr}")
    k = min(b.size, math.ceil((1 - fpr) * b.size - 1e-9))
    return float(np.mean(a > b[k - 1]))


def image_quality(x: torch.Tensor, ref: torch.Tensor, window: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """Per-image PSNR (dB, range 1) and mean SSIM (kornia, Gaussian ``window``) of ``x`` against ``ref``."""
    import kornia
    if x.shape != ref.shape or x.ndim != 4:
        raise ValueError(f"need two (B, C, H, W) batches of equal shape, got {tuple(x.shape)}, {tuple(ref.shape)}")
    with torch.no_grad():
        mse = (x - ref).pow(2).flatten(1).mean(1)
        psnr = 10 * torch.log10(1.0 / mse.clamp_min(1e-20))
        ssim = kornia.metrics.ssim(x, ref, window).flatten(1).mean(1)
    return psnr.double().numpy(), ssim.double().numpy()


def _dct_matrix(n: int) -> torch.Tensor:
    k = torch.arange(n, dtype=torch.float64)
    m = torch.cos(math.pi * (2 * k[None, :] + 1) * k[:, None] / (2 * n)) * math.sqrt(2.0 / n)
    m[0] /= math.sqrt(2.0)
    return m.float()


class DCTSpreadSpectrum:
    """Zero-bit spread-spectrum watermark in the orthonormal 2-D DCT (module docstring): a
    :math:`\\pm1` key on the coefficients :math:`(i, j)` with ``lo <= i + j < hi``, scaled so the
    pixel pattern has RMS ``rms`` and added to every channel; the score is the normalised
    correlation of the luminance's band coefficients with the key."""

    def __init__(self, size: int, rms: float, generator: torch.Generator, band: tuple[int, int] | None = None):
        if not rms > 0:
            raise ValueError(f"rms must be positive, got {rms}")
        lo, hi = band if band is not None else (size // 4, size // 2)
        i = torch.arange(size)
        self.band = ((i[:, None] + i[None, :]) >= lo) & ((i[:, None] + i[None, :]) < hi)
        if not bool(self.band.any()):
            raise ValueError(f"empty DCT band {band} for size {size}")
        self.D = _dct_matrix(size)
        key = torch.where(torch.rand(size, size, generator=generator) < 0.5, -1.0, 1.0) * self.band
        pattern = self.D.T @ key @ self.D                       # inverse orthonormal DCT
        self.key = key
        self.pattern = pattern * (rms / float(pattern.pow(2).mean().sqrt()))

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return (x + self.pattern.to(x)).clamp(0, 1)

    def score(self, x: torch.Tensor) -> torch.Tensor:
        lum = x.mean(1) if x.shape[1] > 1 else x[:, 0]
        coef = self.D.to(x) @ lum @ self.D.T.to(x)
        c = coef[:, self.band]
        k = self.key[self.band].to(x)
        return (c * k).sum(1) / (c.norm(dim=1) * k.norm()).clamp_min(1e-12)


class HiddenLiteEncoder(torch.nn.Module):
    """The encoder of a HiDDeN-style encoder-decoder (Zhu et al. 2018), scaled to small images: four
    3x3 conv-BN-ReLU blocks on the image, the message broadcast as ``n_bits`` planes and concatenated
    with the features and the image, one more block and a 1x1 convolution to the residual. Used only
    to time encoding against RAW's additive injection (its weights do not matter for that)."""

    def __init__(self, n_bits: int = 30, width: int = 64, channels: int = 3):
        super().__init__()
        def block(i, o):
            return torch.nn.Sequential(torch.nn.Conv2d(i, o, 3, padding=1), torch.nn.BatchNorm2d(o), torch.nn.ReLU())
        self.n_bits = n_bits
        self.features = torch.nn.Sequential(block(channels, width), *[block(width, width) for _ in range(3)])
        self.after = block(width + n_bits + channels, width)
        self.out = torch.nn.Conv2d(width, channels, 1)

    def forward(self, x: torch.Tensor, message: torch.Tensor) -> torch.Tensor:
        if message.shape != (x.shape[0], self.n_bits):
            raise ValueError(f"message must be ({x.shape[0]}, {self.n_bits}), got {tuple(message.shape)}")
        m = message.to(x)[:, :, None, None].expand(-1, -1, *x.shape[-2:])
        h = self.after(torch.cat([self.features(x), m, x], 1))
        return x + self.out(h)
