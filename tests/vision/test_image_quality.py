import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from reprobook.vision.image_quality import psnr, ssim


def _pair(seed=0, shape=(2, 3, 24, 20)):
    g = torch.Generator().manual_seed(seed)
    ref = torch.rand(shape, generator=g)
    x = (ref + 0.1 * torch.randn(shape, generator=g)).clamp(0, 1)
    return x, ref


def test_psnr_matches_skimage():
    x, ref = _pair()
    ours = psnr(x, ref)
    for b in range(2):
        theirs = peak_signal_noise_ratio(ref[b].numpy(), x[b].numpy(), data_range=1.0)
        assert ours[b].item() == pytest.approx(theirs, abs=1e-3)


def test_ssim_matches_skimage():
    x, ref = _pair(1)
    ours = ssim(x, ref)
    for b in range(2):
        theirs = structural_similarity(ref[b].numpy(), x[b].numpy(), data_range=1.0, channel_axis=0,
                                       gaussian_weights=True, sigma=1.5, use_sample_covariance=False)
        assert ours[b].item() == pytest.approx(theirs, abs=1e-4)


def test_ssim_identity_and_ordering():
    x, ref = _pair(2)
    assert torch.allclose(ssim(ref, ref), torch.ones(2), atol=1e-5)
    worse = (ref + 0.3 * torch.randn(ref.shape, generator=torch.Generator().manual_seed(3))).clamp(0, 1)
    assert (ssim(worse, ref) < ssim(x, ref)).all()
    assert (psnr(worse, ref) < psnr(x, ref)).all()


def test_ssim_is_differentiable():
    x, ref = _pair(4)
    x.requires_grad_(True)
    ssim(x, ref).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_bad_inputs_named():
    x, ref = _pair()
    with pytest.raises(ValueError, match="differ in shape"):
        psnr(x, ref[:, :1])
    with pytest.raises(ValueError, match="B, C, H, W"):
        ssim(x[0], ref[0])
    with pytest.raises(ValueError, match="smaller than"):
        ssim(x[..., :8, :8], ref[..., :8, :8])
    with pytest.raises(ValueError, match="data_range"):
        psnr(x, ref, data_range=0)
