import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from reprobook.ood.metrics import auroc
from reprobook.vision.raw_watermark import (DCTSpreadSpectrum, Detector, HiddenLiteEncoder, _dct_matrix,
                                            conformal_threshold, detector_scores, image_quality,
                                            init_watermark, inject, perturbation, project_budget,
                                            random_crops, ring_mask, robust_threshold, smoothed_z,
                                            tpr_at_fpr, train_raw)

G = lambda s=0: torch.Generator().manual_seed(s)  # noqa: E731


def test_ring_mask():
    m = ring_mask(16, 2, 4)
    assert m.dtype == torch.bool and m.shape == (16, 16)
    assert not m[8, 8] and m[8, 10] and m[8, 11] and not m[8, 12]
    with pytest.raises(ValueError):
        ring_mask(16, 4, 2)


def test_inject_is_one_additive_pattern_and_matches_the_dft_formula():
    x = torch.rand(3, 3, 16, 16, generator=G(1), dtype=torch.float64)
    wf, ws = torch.randn(3, 16, 16, generator=G(2), dtype=torch.float64), torch.randn(3, 16, 16, generator=G(3), dtype=torch.float64)
    mask = ring_mask(16, 2, 5)
    y = inject(x, wf, ws, mask, 0.05, 0.07, clip=False)
    d = perturbation(wf, ws, mask, 0.05, 0.07)
    assert torch.allclose(y, x + d, atol=1e-12)
    assert torch.allclose(inject(x, wf, ws, mask, 0.05, 0.07), (x + d).clamp(0, 1), atol=1e-12)
    # independent numpy computation of the frequency part: channel 0's spectrum on the ring
    fw = np.fft.fftshift(np.fft.fft2(wf[0].numpy()))
    band = np.real(np.fft.ifft2(np.fft.ifftshift(np.where(mask.numpy(), fw, 0))))
    ref = 0.05 * band[None] + 0.07 * ws.numpy()
    assert np.allclose(d.numpy(), ref, atol=1e-12)
    # the frequency component is the same in every channel; other channels of w_freq are unused
    wf2 = wf.clone()
    wf2[1:] = 0
    assert torch.allclose(perturbation(wf2, ws, mask), perturbation(wf, ws, mask))


def test_budget_projection_and_psnr():
    mask = ring_mask(32, 4, 8)
    rms = 10 ** (-36 / 20)
    wf, ws = init_watermark((3, 32, 32), mask, rms, G(0))
    assert abs(float(perturbation(wf, ws, mask).pow(2).mean().sqrt()) - rms) < 1e-6
    pf, ps = project_budget(3 * wf, 3 * ws, mask, rms)
    assert abs(float(perturbation(pf, ps, mask).pow(2).mean().sqrt()) - rms) < 1e-6
    qf, qs = project_budget(wf / 2, ws / 2, mask, rms)          # inside the ball: unchanged
    assert torch.allclose(qf, wf / 2) and torch.allclose(qs, ws / 2)
    # clipping only moves pixels back towards the original: PSNR >= the budget's
    x = random_crops(8, 32, G(1))
    psnr, ssim = image_quality(inject(x, wf, ws, mask), x)
    assert np.all(psnr >= 36 - 1e-3) and np.all(ssim < 1) and np.all(ssim > 0)
    with pytest.raises(ValueError):
        project_budget(wf, ws, mask, 0.0)


def test_input_errors():
    mask = ring_mask(16, 2, 5)
    wf = torch.zeros(3, 16, 16)
    with pytest.raises(ValueError, match="images must be"):
        inject(torch.zeros(2, 3, 8, 8), wf, wf, mask)
    with pytest.raises(ValueError, match="mask"):
        inject(torch.zeros(2, 3, 16, 16), wf, wf, ring_mask(8, 1, 2))
    with pytest.raises(ValueError, match="unknown photo"):
        random_crops(2, 16, G(), photos=("lena",))
    with pytest.raises(ValueError, match="rows"):
        random_crops(2, 16, G(), rows=(0.5, 0.2))
    with pytest.raises(ValueError, match="message"):
        HiddenLiteEncoder(n_bits=4)(torch.zeros(2, 3, 16, 16), torch.zeros(2, 3))


def test_random_crops():
    x = random_crops(5, 32, G(0), rows=(0.0, 0.5))
    assert x.shape == (5, 3, 32, 32) and float(x.min()) >= 0 and float(x.max()) <= 1
    assert torch.equal(x, random_crops(5, 32, G(0), rows=(0.0, 0.5)))


def test_conformal_threshold_coverage():
    # exchangeable scores: a new one falls below tau with probability k/(n+1) <= alpha
    rng = np.random.default_rng(0)
    n, alpha, reps = 39, 0.1, 4000
    z = rng.standard_normal((reps, n + 1))
    hits = np.mean([z[i, -1] < conformal_threshold(z[i, :-1], alpha) for i in range(reps)])
    k = math.floor(alpha * (n + 1))
    assert abs(hits - k / (n + 1)) < 3 * math.sqrt(0.1 * 0.9 / reps)
    assert conformal_threshold(np.arange(5.0), 0.05) == -math.inf
    assert robust_threshold(1.0, 0.25, 0.1) == pytest.approx(-1.5)
    with pytest.raises(ValueError):
        conformal_threshold([1.0, np.nan], 0.1)


class _HalfSpace(torch.nn.Module):
    """prob = 1[<w, x> > 0] with ||w|| = 1: its Gaussian smoothing is Phi(<w, x>/sigma) exactly."""

    def __init__(self, w):
        super().__init__()
        self.w = w / w.norm()

    def prob(self, x):
        return ((x.flatten(1) @ self.w.flatten()) > 0).to(x.dtype)


def test_smoothed_z_is_the_exact_smoothing_and_lipschitz():
    torch.manual_seed(0)
    w = torch.randn(3, 8, 8)
    det = _HalfSpace(w)
    x = 0.02 * torch.randn(4, 3, 8, 8, generator=G(1))
    sigma = 0.1
    z = smoothed_z(det, x, sigma, 20000, G(2))
    exact = (x.flatten(1) @ det.w.flatten()) / sigma
    assert torch.allclose(z, exact.clamp(-6, 6), atol=0.04)
    # the removal that is worst for this detector moves z by exactly r / sigma
    r = 0.05
    z2 = smoothed_z(det, x - r * det.w, sigma, 20000, G(3))
    assert torch.allclose(z - z2, torch.full_like(z, r / sigma), atol=0.06)
    assert float(norm.cdf(0.0)) == 0.5


def test_tpr_at_fpr():
    neg = np.arange(100.0)
    pos = np.array([98.5, 99.5, 50.0, 200.0])
    assert tpr_at_fpr(pos, neg, 0.01) == 0.75       # threshold at the 99th smallest negative (98)
    assert tpr_at_fpr(pos, neg, 0.0) == 0.5
    with pytest.raises(ValueError):
        tpr_at_fpr(pos, neg, 1.0)


def test_dct_spread_spectrum():
    d = _dct_matrix(16)
    assert torch.allclose(d @ d.T, torch.eye(16), atol=1e-5)
    rms = 0.02
    ss = DCTSpreadSpectrum(32, rms, G(0))
    assert abs(float(ss.pattern.pow(2).mean().sqrt()) - rms) < 1e-6
    x = random_crops(40, 32, G(1))
    pos, neg = ss.score(ss.embed(x)), ss.score(x)
    assert float(pos.abs().max()) <= 1 and auroc(pos.numpy(), neg.numpy()) > 0.9
    with pytest.raises(ValueError):
        DCTSpreadSpectrum(32, 0.0, G(0))


def test_joint_training():
    mask = ring_mask(32, 4, 8)
    rms = 10 ** (-30 / 20)
    x = random_crops(96, 32, G(0))
    init = init_watermark((3, 32, 32), mask, rms, G(1))
    fixed = train_raw(x, mask, rms, 3, G(2), init=init, learn_watermark=False, augment=False, batch=8)
    assert torch.equal(fixed["w_freq"], init[0]) and torch.equal(fixed["w_spa"], init[1])
    out = train_raw(x, mask, rms, 25, G(2), init=init, augment=False, batch=16, lr=1e-2, width=8)
    assert not torch.equal(out["w_spa"], init[1])
    assert float(perturbation(out["w_freq"], out["w_spa"], mask).pow(2).mean().sqrt()) <= rms * (1 + 1e-5)
    test = random_crops(64, 32, G(3))
    pos = detector_scores(out["detector"], inject(test, out["w_freq"], out["w_spa"], mask))
    neg = detector_scores(out["detector"], test)
    assert auroc(pos, neg) > 0.8
    assert Detector()(test[:2]).shape == (2, 2)
    with pytest.raises(ValueError):
        train_raw(x[0], mask, rms, 1, G())
