import numpy as np
import pytest
import torch
from scipy.fft import dctn

from reprobook.vision.freq_blender import (FPNetLite, blend, dct2, fit_spectrum_classifier, fpnet_losses, idct2,
                                           oracle_partition, random_partition, sbi_blend, trace_capture,
                                           trace_energy, train_fpnet)
from reprobook.data.forgery_families import make_fakes, real_crops


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def pair():
    real = real_crops(64, np.random.default_rng(0), rows=(0.0, 0.6))
    fake = make_fakes(real, "nearest", np.random.default_rng(0))
    return torch.as_tensor(real), torch.as_tensor(fake)


def test_dct2_is_scipys_orthonormal_dct_and_inverts():
    x = torch.rand(3, 1, 16, 16, dtype=torch.float64)
    d = dct2(x)
    np.testing.assert_allclose(d.numpy(), dctn(x.numpy(), type=2, norm="ortho", axes=(2, 3)), atol=1e-12)
    np.testing.assert_allclose(idct2(d).numpy(), x.numpy(), atol=1e-12)
    assert abs(float((d ** 2).sum() - (x ** 2).sum())) < 1e-9       # Parseval


def test_blend_is_exact_and_linear(pair):
    real, fake = pair
    assert torch.allclose(blend(real, fake, torch.zeros(32, 32)), real, atol=1e-5)
    assert torch.allclose(blend(real, fake, torch.ones(32, 32)), fake, atol=1e-5)
    m = torch.as_tensor(random_partition(32, 0.3, np.random.default_rng(0)), dtype=torch.float32)
    half = blend(real, fake, 0.5 * m)
    assert torch.allclose(half, 0.5 * (real + blend(real, fake, m)), atol=1e-5)
    with pytest.raises(ValueError, match="same shape"):
        blend(real, fake[:3], m)
    with pytest.raises(ValueError, match="mask"):
        blend(real, fake, torch.ones(16, 16))


def test_partitions_and_capture(pair):
    real, fake = pair
    m = random_partition(32, 0.25, np.random.default_rng(1))
    assert m.sum() == 256 and set(np.unique(m)) <= {0.0, 1.0}
    e = trace_energy(real, fake)
    o = oracle_partition(e, 0.25)
    assert o.sum() == 256 and e[o == 1].min() >= e[o == 0].max()
    assert abs(trace_capture(torch.ones(32, 32), real, fake).mean() - 1) < 1e-5
    assert trace_capture(o, real, fake).mean() > 2.0                  # the oracle finds the trace
    assert abs(trace_capture(m, real, fake).mean() - 1) < 0.5          # a blind mask does not
    with pytest.raises(ValueError, match="mass"):
        random_partition(32, 1.5, np.random.default_rng(0))


def test_fpnet_masks_are_a_partition_and_check_size(pair):
    real, fake = pair
    torch.manual_seed(0)
    m = FPNetLite(32)(real[:4], fake[:4])
    assert m.shape == (4, 3, 32, 32)
    assert torch.allclose(m.sum(1), torch.ones(4, 32, 32), atol=1e-6)
    with pytest.raises(ValueError, match="built for"):
        FPNetLite(16)(real[:2], fake[:2])


def test_judge_separates_and_losses_reward_structural_trace(pair):
    real, fake = pair
    judge = fit_spectrum_classifier(real, fake)
    with torch.no_grad():
        acc = ((judge(fake) > 0).float().mean() + (judge(real) <= 0).float().mean()) / 2
    assert acc > 0.9
    # all frequencies structural: the authenticity term is small; none structural: it is large
    n = len(real)
    all_str = torch.zeros(n, 3, 32, 32)
    all_str[:, 1] = 1
    no_str = torch.zeros(n, 3, 32, 32)
    no_str[:, 0] = 1
    with torch.no_grad():
        a = fpnet_losses(all_str, real, fake, judge)
        b = fpnet_losses(no_str, real, fake, judge)
    assert a["authenticity"] < b["authenticity"] and a["mass"] == 1 and b["mass"] == 0


def test_fpnet_training_lowers_its_objective(pair):
    real, fake = pair
    judge = fit_spectrum_classifier(real, fake)
    _, hist = train_fpnet(real, fake, judge, steps=15, generator=torch.Generator().manual_seed(0),
                          batch_size=16)
    assert np.mean([h["total"] for h in hist[-5:]]) < np.mean([h["total"] for h in hist[:5]])
    with pytest.raises(ValueError, match="paired"):
        train_fpnet(real, fake[:3], judge, steps=1, generator=torch.Generator())


def test_sbi_blend(pair):
    real = pair[0].numpy()
    out = sbi_blend(real, np.random.default_rng(0))
    assert out.shape == real.shape and out.dtype == np.float32 and 0 <= out.min() and out.max() <= 1
    np.testing.assert_array_equal(out, sbi_blend(real, np.random.default_rng(0)))
    diff = np.abs(out - real)
    assert diff.mean() > 1e-3
    # the blend sits in the middle: the corners are (almost) the real image
    assert diff[:, :, :3, :3].mean() < diff[:, :, 12:20, 12:20].mean()
    with pytest.raises(ValueError, match="shape"):
        sbi_blend(real[:, 0], np.random.default_rng(0))
