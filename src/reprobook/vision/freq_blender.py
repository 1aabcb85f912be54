r"""FreqBlender (Li et al., NeurIPS 2024) at small scale: pseudo-fakes made by blending frequency
components, a small Frequency Parsing Network (FPNet) trained without ground truth, and the
SBI-style spatial self-blend it is compared with and plugged into.

**DCT.** Images are ``(n, 1, N, N)``. The orthonormal 2-D DCT-II is ``D = C X C^T`` with the
orthonormal DCT matrix ``C`` (taken from :func:`scipy.fft.dct` of the identity), so the inverse is
``X = C^T D C`` and Parseval holds: ``||X|| = ||D||``. Frequency ``(u, v)`` has radius
``sqrt(u^2 + v^2)``.

**Frequency blending.** With a mask ``M`` in [0, 1] per frequency,

.. math:: \mathrm{blend}(R, F; M) = \mathrm{IDCT}\big(D_R \odot (1 - M) + D_F \odot M\big)
          = R + \mathrm{IDCT}\big(M \odot (D_F - D_R)\big),

linear and exactly invertible. FreqBlender's pseudo-fake puts the *structural* component of a fake
into its real partner: ``M = M_str``. ``M = 1`` everywhere returns the fake itself (no parsing).

**FPNet-lite.** A shared convolutional encoder on the log-magnitude spectra of the pair (plus the
frequency coordinates, since in the DCT plane position *is* frequency) and three 1x1 decoder heads
whose softmax gives, at every frequency, the probabilities ``(M_sem, M_str, M_noi)`` of belonging to
the semantic, structural and noise components (the paper's encoder and three decoders, shrunk).

**Label-free objectives** (our reconstruction of the paper's "inner correlations"; there is no
ground-truth partition). With ``Delta = D_F - D_R`` and a frozen classifier ``c`` that scores how fake
an image looks (a logistic regression on the log-power spectrum, fitted to real against seen fakes):

* fidelity: the semantic component is what a real/fake pair share and what the image is made of,
  ``sum M_sem^2 Delta^2 / sum Delta^2 + sum (1 - M_sem)^2 D_R^2 / sum D_R^2`` (Parseval turns the
  image-domain errors into these spectral sums);
* authenticity: the structural component decides real or fake, both ways: ``R`` with ``F``'s
  structural part is fake, ``F`` with ``R``'s structural part is real (binary cross-entropies of ``c``);
* quality-agnostic: the noise component does not decide it: ``R`` with ``F``'s noise part stays
  real and ``F`` with ``R``'s noise part stays fake;
* integrity: the three masks sum to one (the softmax) and are crisp (a small entropy penalty);
  and the structural component is the *smallest* part that decides authenticity (a penalty on its
  mean mass). Without it the authenticity term alone is minimised by ``M_str = 1``: the whole fake,
  i.e. no parsing at all.

**SBI-style self-blend** (Shiohara & Yamasaki 2022, the spatial baseline): a copy of the real image
is changed in brightness/contrast, blurred or sharpened, sometimes downscaled and re-upscaled, and
shifted by up to a pixel; it is then blended into the original through a smooth random ellipse
``m`` with a random ratio ``r``: ``R (1 - r m) + S r m``.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from scipy.fft import dct
from scipy.ndimage import gaussian_filter, shift as nd_shift, zoom
from torch import nn
from torch.nn import functional as F

COMPONENTS = ("semantic", "structural", "noise")


def _check(x: torch.Tensor, name: str = "images") -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(np.asarray(x), dtype=torch.float32)
    if x.ndim != 4 or x.shape[1] != 1 or x.shape[2] != x.shape[3]:
        raise ValueError(f"{name} must have shape (n, 1, N, N), got {tuple(x.shape)}")
    return x


def dct_matrix(n: int, dtype=torch.float32) -> torch.Tensor:
    """The orthonormal n x n DCT-II matrix ``C`` (``C @ x`` is ``scipy.fft.dct(x, norm='ortho')``)."""
    if int(n) != n or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    return _dct_matrix(int(n), dtype)


@lru_cache(maxsize=None)
def _dct_matrix(n: int, dtype) -> torch.Tensor:
    return torch.as_tensor(dct(np.eye(n), type=2, norm="ortho", axis=0), dtype=dtype)


def dct2(x: torch.Tensor) -> torch.Tensor:
    """Orthonormal 2-D DCT-II over the last two axes."""
    c = dct_matrix(x.shape[-1], x.dtype)
    return c @ x @ c.T


def idct2(d: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`dct2`."""
    c = dct_matrix(d.shape[-1], d.dtype)
    return c.T @ d @ c


def radius(n: int) -> np.ndarray:
    """The n x n grid of frequency radii sqrt(u^2 + v^2)."""
    u = np.arange(n, dtype=np.float64)
    return np.sqrt(u[:, None] ** 2 + u[None, :] ** 2)


def blend(real: torch.Tensor, fake: torch.Tensor, mask) -> torch.Tensor:
    """``IDCT(D_R (1 - M) + D_F M)``: the frequencies selected by ``mask`` (N x N or per image
    (n, 1, N, N), values in [0, 1]) taken from the fake, the rest from the real image."""
    real, fake = _check(real, "real"), _check(fake, "fake")
    if real.shape != fake.shape:
        raise ValueError(f"real and fake must have the same shape, got {tuple(real.shape)} and {tuple(fake.shape)}")
    m = torch.as_tensor(mask, dtype=real.dtype)
    if m.shape[-2:] != real.shape[-2:]:
        raise ValueError(f"mask must be {tuple(real.shape[-2:])} (or per image), got {tuple(m.shape)}")
    return real + idct2(m * (dct2(fake) - dct2(real)))


# ----------------------------------------------------------------------------- the frozen judge
class SpectrumClassifier(nn.Module):
    """Logistic regression on standardised log-power DCT spectra; logit > 0 means fake."""

    def __init__(self, weight: np.ndarray, bias: float, mu: np.ndarray, sd: np.ndarray):
        super().__init__()
        self.register_buffer("w", torch.as_tensor(weight, dtype=torch.float32))
        self.register_buffer("mu", torch.as_tensor(mu, dtype=torch.float32))
        self.register_buffer("sd", torch.as_tensor(sd, dtype=torch.float32))
        self.b = float(bias)

    @staticmethod
    def features(x: torch.Tensor) -> torch.Tensor:
        # the floor keeps the log's gradient bounded where a coefficient is near zero
        return torch.log(dct2(x) ** 2 + 1e-4).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((self.features(x) - self.mu) / self.sd) @ self.w + self.b


def fit_spectrum_classifier(real, fake, c: float = 0.05) -> SpectrumClassifier:
    """Fit the frozen judge of FPNet's objectives on real against (seen) fake images."""
    from sklearn.linear_model import LogisticRegression

    real, fake = _check(real, "real"), _check(fake, "fake")
    with torch.no_grad():
        X = torch.cat([SpectrumClassifier.features(real), SpectrumClassifier.features(fake)]).double().numpy()
    y = np.r_[np.zeros(len(real)), np.ones(len(fake))]
    mu, sd = X.mean(0), X.std(0) + 1e-6
    lr = LogisticRegression(C=c, max_iter=500).fit((X - mu) / sd, y)
    return SpectrumClassifier(lr.coef_[0], lr.intercept_[0], mu, sd).eval()


# ----------------------------------------------------------------------------- FPNet-lite
class FPNetLite(nn.Module):
    """Shared encoder on (log|D_R|, log|D_F|, u/N, v/N) and three 1x1 decoder heads; ``forward``
    returns the (n, 3, N, N) softmax masks (semantic, structural, noise)."""

    def __init__(self, n: int = 32, width: int = 8):
        super().__init__()
        self.n = int(n)
        self.encoder = nn.Sequential(nn.Conv2d(4, width, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(width, width, 3, padding=1), nn.ReLU())
        self.heads = nn.ModuleList([nn.Conv2d(width, 1, 1) for _ in COMPONENTS])
        g = torch.arange(self.n, dtype=torch.float32) / self.n
        self.register_buffer("coords", torch.stack(torch.meshgrid(g, g, indexing="ij"))[None])

    def forward(self, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
        real, fake = _check(real, "real"), _check(fake, "fake")
        if real.shape[-1] != self.n:
            raise ValueError(f"FPNetLite was built for {self.n}x{self.n} images, got {tuple(real.shape[-2:])}")
        lr = torch.log(dct2(real).abs() + 1e-3) / 4
        lf = torch.log(dct2(fake).abs() + 1e-3) / 4
        h = self.encoder(torch.cat([lr, lf, self.coords.expand(len(real), -1, -1, -1)], 1))
        return torch.softmax(torch.cat([head(h) for head in self.heads], 1), dim=1)


def fpnet_losses(masks: torch.Tensor, real: torch.Tensor, fake: torch.Tensor, judge: SpectrumClassifier,
                 entropy_weight: float = 0.05, mass_weight: float = 10.0) -> dict:
    """The label-free objectives (see the module docstring) for masks (n, 3, N, N)."""
    m_sem, m_str, m_noi = masks[:, 0:1], masks[:, 1:2], masks[:, 2:3]
    dr = dct2(real)
    delta = dct2(fake) - dr
    d2 = delta ** 2
    fidelity = ((m_sem ** 2 * d2).sum((1, 2, 3)) / (d2.sum((1, 2, 3)) + 1e-12)
                + ((1 - m_sem) ** 2 * dr ** 2).sum((1, 2, 3)) / ((dr ** 2).sum((1, 2, 3)) + 1e-12)).mean()
    one, zero = torch.ones(len(real)), torch.zeros(len(real))
    real_with_str = real + idct2(m_str * delta)
    fake_with_real_str = fake - idct2(m_str * delta)
    authenticity = (F.binary_cross_entropy_with_logits(judge(real_with_str), one)
                    + F.binary_cross_entropy_with_logits(judge(fake_with_real_str), zero))
    quality = (F.binary_cross_entropy_with_logits(judge(real + idct2(m_noi * delta)), zero)
               + F.binary_cross_entropy_with_logits(judge(fake - idct2(m_noi * delta)), one))
    entropy = -(masks * torch.log(masks + 1e-8)).sum(1).mean()
    mass = m_str.mean()
    total = fidelity + authenticity + quality + entropy_weight * entropy + mass_weight * mass
    return {"total": total, "fidelity": fidelity, "authenticity": authenticity, "quality": quality,
            "entropy": entropy, "mass": mass}


def train_fpnet(real, fake, judge: SpectrumClassifier, *, steps: int, generator: torch.Generator,
                batch_size: int = 32, lr: float = 3e-3, width: int = 8,
                mass_weight: float = 10.0) -> tuple[FPNetLite, list[dict]]:
    """Train FPNet-lite on paired real/fake images with :func:`fpnet_losses` (Adam); returns the
    net and the per-step loss terms."""
    real, fake = _check(real, "real"), _check(fake, "fake")
    if real.shape != fake.shape:
        raise ValueError("FPNet is trained on paired real and fake images of the same shape")
    if int(steps) != steps or steps < 0:
        raise ValueError(f"steps must be a non-negative integer, got {steps!r}")
    torch.manual_seed(int(torch.randint(2 ** 31, (1,), generator=generator)))   # the init
    net = FPNetLite(real.shape[-1], width)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    history = []
    for _ in range(int(steps)):
        idx = torch.randint(len(real), (min(batch_size, len(real)),), generator=generator)
        losses = fpnet_losses(net(real[idx], fake[idx]), real[idx], fake[idx], judge, mass_weight=mass_weight)
        opt.zero_grad()
        losses["total"].backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        history.append({k: float(v.detach()) for k, v in losses.items()})
    return net.eval(), history


@torch.no_grad()
def parse(net: FPNetLite, real, fake, batch_size: int = 512) -> torch.Tensor:
    """The masks (n, 3, N, N) of a trained FPNet for many pairs, in batches."""
    real, fake = _check(real, "real"), _check(fake, "fake")
    return torch.cat([net(real[i:i + batch_size], fake[i:i + batch_size])
                      for i in range(0, len(real), batch_size)])


def freq_blend(real, fake, structural: torch.Tensor) -> torch.Tensor:
    """FreqBlender's pseudo-fakes: the fake's structural frequencies blended into its real partner."""
    with torch.no_grad():
        return blend(real, fake, structural).clamp(0, 1)


# ----------------------------------------------------------------------------- broken partitions
def random_partition(n: int, mass: float, rng: np.random.Generator) -> np.ndarray:
    """A fixed N x N 0/1 mask selecting a random ``mass`` share of the frequencies (the control that
    replaces FPNet by a partition that knows nothing)."""
    if not 0 <= mass <= 1:
        raise ValueError(f"mass must be in [0, 1], got {mass}")
    m = np.zeros(n * n)
    m[rng.permutation(n * n)[:int(round(mass * n * n))]] = 1.0
    return m.reshape(n, n)


def oracle_partition(trace_energy: np.ndarray, mass: float) -> np.ndarray:
    """The 0/1 mask of the ``mass`` share of frequencies where the known trace ``E|D_F - D_R|^2`` is
    largest (an upper bound: it uses the ground truth FPNet must do without)."""
    e = np.asarray(trace_energy, dtype=np.float64)
    if e.ndim != 2 or e.shape[0] != e.shape[1]:
        raise ValueError(f"trace_energy must be an N x N map, got shape {e.shape}")
    if not 0 <= mass <= 1:
        raise ValueError(f"mass must be in [0, 1], got {mass}")
    k = int(round(mass * e.size))
    m = np.zeros(e.size)
    m[np.argsort(-e.ravel(), kind="stable")[:k]] = 1.0
    return m.reshape(e.shape)


def trace_energy(real, fake) -> np.ndarray:
    """Mean DCT power of the trace, ``E|D_F - D_R|^2`` per frequency (N x N)."""
    real, fake = _check(real, "real"), _check(fake, "fake")
    with torch.no_grad():
        return (dct2(fake - real) ** 2).mean((0, 1)).double().numpy()


def trace_capture(mask, real, fake) -> np.ndarray:
    """Per image: the share of the trace's energy inside the mask divided by the mask's share of
    the frequencies (1 for a mask that ignores where the trace is; above 1 when it finds it)."""
    real, fake = _check(real, "real"), _check(fake, "fake")
    m = torch.as_tensor(mask, dtype=torch.float32)
    m = m.expand(len(real), 1, *real.shape[-2:])
    with torch.no_grad():
        d2 = dct2(fake - real) ** 2
        share = (m * d2).sum((1, 2, 3)) / (d2.sum((1, 2, 3)) + 1e-12)
        mass = m.mean((1, 2, 3))
    return (share / mass.clamp_min(1e-12)).double().numpy()


# ----------------------------------------------------------------------------- SBI baseline
def _ellipse_mask(n: int, rng: np.random.Generator) -> np.ndarray:
    yy, xx = np.mgrid[0:n, 0:n] / (n - 1) - 0.5
    cy, cx = rng.uniform(-0.1, 0.1, size=2)
    ay, ax = rng.uniform(0.2, 0.4, size=2)
    th = rng.uniform(0, np.pi)
    y, x = yy - cy, xx - cx
    yr, xr = np.cos(th) * y + np.sin(th) * x, -np.sin(th) * y + np.cos(th) * x
    m = ((yr / ay) ** 2 + (xr / ax) ** 2 <= 1).astype(np.float64)
    m = gaussian_filter(m, rng.uniform(1.0, 3.0), mode="constant")
    return m / max(m.max(), 1e-12)


def sbi_blend(real, rng: np.random.Generator) -> np.ndarray:
    """SBI-style self-blended pseudo-fakes of ``real`` (n, 1, N, N) in [0, 1] (float32)."""
    x = np.asarray(_check(torch.as_tensor(np.asarray(real, dtype=np.float32))).numpy(), dtype=np.float64)
    n_img, _, n, _ = x.shape
    out = np.empty_like(x)
    for k in range(n_img):
        r = x[k, 0]
        s = (r - r.mean()) * rng.uniform(0.8, 1.2) + r.mean() + rng.uniform(-0.1, 0.1)   # contrast, brightness
        if rng.random() < 0.5:
            s = gaussian_filter(s, rng.uniform(0.5, 1.0), mode="reflect")
        else:
            s = s + rng.uniform(0.5, 1.0) * (s - gaussian_filter(s, 1.0, mode="reflect"))
        if rng.random() < 0.3:                    # SBI's downscale augmentation
            f = rng.uniform(0.5, 0.8)
            small = zoom(s, f, order=1, mode="nearest", grid_mode=True)
            s = zoom(small, (n / small.shape[0], n / small.shape[1]), order=1, mode="nearest", grid_mode=True)
        s = nd_shift(s, rng.uniform(-1, 1, size=2), order=1, mode="nearest")
        m = _ellipse_mask(n, rng) * rng.choice([0.25, 0.5, 0.75, 1.0, 1.0, 1.0])
        out[k, 0] = r * (1 - m) + s * m
    return np.clip(out, 0, 1).astype(np.float32)
