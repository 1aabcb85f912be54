"""The U-Net denoiser: its initial function, position conditioning, DSM training lowers the loss."""
import pytest
import torch

from reprobook.models.diffusion.train_images import image_dsm_loss, train_image_dsm
from reprobook.models.diffusion.unet import UNetDenoiser


def test_initial_denoiser_is_c_skip_x_and_shapes():
    net = UNetDenoiser(3, base=8, position=True, sigma_data=0.5)
    x = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    out = net(x, 0.7, torch.zeros(4))
    assert out.shape == x.shape
    assert torch.allclose(out, 0.25 / (0.49 + 0.25) * x, atol=1e-6)


def test_position_changes_the_output():
    torch.manual_seed(0)
    net = UNetDenoiser(2, base=8, position=True)
    torch.nn.init.normal_(net.out.weight)
    x = torch.randn(2, 2, 8, 8)
    assert not torch.allclose(net(x, 1.0, torch.tensor([-1.0, -1.0])), net(x, 1.0, torch.tensor([1.0, 1.0])))


def test_training_lowers_the_loss():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    base = torch.zeros(1, 1, 8, 8)
    base[..., 2:6, 2:6] = 1.0

    def sample(b, gen):
        return base.expand(b, 1, 8, 8) * torch.rand(b, 1, 1, 1, generator=gen), None
    net = UNetDenoiser(1, base=4, emb_dim=8, sigma_data=0.5)
    # a fixed evaluation batch, so the comparison is not noise from the random levels
    x0, _ = sample(32, torch.Generator().manual_seed(1))
    sig = torch.full((32,), 0.5)
    eps = torch.randn(x0.shape, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        before = float(image_dsm_loss(net, x0, sig, eps))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)           # tiny convolutions: threads only add overhead
    try:
        train_image_dsm(net, sample, steps=40, batch=8, lr=3e-3, generator=g, sigma_min=0.2,
                        sigma_max=1.0)
    finally:
        torch.set_num_threads(threads)
    with torch.no_grad():
        after = float(image_dsm_loss(net, x0, sig, eps))
    assert after < 0.7 * before


def test_bad_inputs_are_named():
    net = UNetDenoiser(1, base=8)
    with pytest.raises(ValueError, match="divisible by 4"):
        net(torch.zeros(1, 1, 6, 6), 1.0)
    with pytest.raises(ValueError, match="shape"):
        net(torch.zeros(1, 2, 8, 8), 1.0)
    with pytest.raises(ValueError, match="no position"):
        net(torch.zeros(1, 1, 8, 8), 1.0, torch.zeros(1))
    with pytest.raises(ValueError, match="position-aware"):
        UNetDenoiser(1, base=8, position=True)(torch.zeros(1, 1, 8, 8), 1.0)
    with pytest.raises(ValueError, match="one sigma"):
        image_dsm_loss(net, torch.zeros(2, 1, 8, 8), torch.ones(3), torch.zeros(2, 1, 8, 8))
