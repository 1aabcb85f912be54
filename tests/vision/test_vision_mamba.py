import pytest
import torch

from reprobook.vision.style_perturb import StylePerturbation
from reprobook.vision.vision_mamba import VisionMamba, accuracy, train_classifier


def _model():
    torch.manual_seed(0)
    return VisionMamba(image_size=8, patch=2, d_model=8, d_state=2, expand=1, dt_rank=2, depth=2)


def test_hooked_mixer_matches_ss2d(one_thread):
    m = _model()
    x = torch.randn(2, 8, 4, 4)
    mix = m.mixers[0]
    from reprobook.vision.cross_scan import SS2D
    assert torch.allclose(mix(x), SS2D.forward(mix, x), atol=1e-6)
    assert torch.allclose(mix(x, hook=lambda u, p: u), mix(x), atol=1e-6)


def test_hook_only_in_training(one_thread):
    m = _model()
    x = torch.rand(4, 1, 8, 8)
    calls = []
    m.hook = lambda u, p: (calls.append(1), u * 0)[1]
    m.eval()
    clean = m(x)
    assert not calls
    m.train()
    pert = m(x)
    assert len(calls) == 1 and not torch.allclose(pert, clean)


def test_training_learns_and_stats(one_thread):
    g = torch.Generator().manual_seed(0)
    y = torch.arange(64) % 2
    x = torch.rand(64, 1, 8, 8, generator=g) * 0.5
    x[y == 1, :, :, :4] += 0.5                                     # class 1: bright left half
    m = _model()
    m.hook = StylePerturbation("start-m", seed=0)
    hist = train_classifier(m, x, y, epochs=3, batch_size=16, lr=2e-2, seed=0)
    assert hist[-1] < hist[0]
    assert accuracy(m, x, y) > 0.7
    s = m.scan_statistics(x[:5])
    assert s["delta"].shape == (5, 2 * 8) and s["B"].shape == (5, 2 * 2) and s["feature"].shape == (5, 8)


def test_bad_input():
    m = _model()
    with pytest.raises(ValueError, match="expects images"):
        m(torch.rand(2, 3, 8, 8))
    with pytest.raises(ValueError, match="patch"):
        VisionMamba(image_size=9, patch=2)
