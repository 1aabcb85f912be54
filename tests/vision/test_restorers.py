import pytest
import torch

from reprobook.vision.restorers import Restormer, UNet, count_parameters, restore, train_restorer


@pytest.mark.parametrize("make", [lambda: UNet(8), lambda: Restormer(8, heads=2)])
def test_shapes_and_global_residual(make, one_thread):
    torch.manual_seed(0)
    m = make()
    x = torch.rand(2, 3, 16, 12)
    assert m(x).shape == x.shape
    for p in m.out.parameters():          # a zero output conv makes the net the identity
        torch.nn.init.zeros_(p)
    torch.testing.assert_close(m(x), x)


def test_mdta_sees_the_whole_image(one_thread):
    """Channel attention pools over all pixels: a far-away pixel changes the output everywhere."""
    torch.manual_seed(0)
    m = Restormer(8, heads=2).eval()
    x = torch.rand(1, 3, 32, 32)
    x2 = x.clone()
    x2[..., 31, 31] += 0.5
    d = (m(x2) - m(x)).abs()[0].sum(0)
    assert d[0, 0] > 0           # 31 pixels away, beyond the convolutions' reach


def test_training_learns_a_brightening(one_thread):
    g = torch.Generator().manual_seed(0)
    clean = torch.rand(64, 3, 8, 8, generator=g)
    low = 0.25 * clean
    torch.manual_seed(0)
    m = UNet(8)
    losses = train_restorer(m, low, clean, steps=60, batch_size=16, lr=3e-3,
                            generator=torch.Generator().manual_seed(1))
    assert len(losses) == 60
    assert sum(losses[-5:]) < 0.7 * sum(losses[:5])
    out = restore(m, low)
    assert out.shape == low.shape and 0 <= out.min() and out.max() <= 1


def test_counts_and_bad_inputs():
    assert count_parameters(UNet(12)) < count_parameters(UNet(16))
    with pytest.raises(ValueError, match="RGB batch"):
        UNet(8)(torch.rand(1, 1, 8, 8))
    with pytest.raises(ValueError, match="multiples of 2"):
        UNet(8)(torch.rand(1, 3, 7, 8))
    with pytest.raises(ValueError, match="divisible by heads"):
        Restormer(10, heads=4)
    with pytest.raises(ValueError, match="width"):
        UNet(0)
    with pytest.raises(ValueError, match="differ in shape"):
        train_restorer(UNet(4), torch.rand(2, 3, 8, 8), torch.rand(3, 3, 8, 8), steps=1)
