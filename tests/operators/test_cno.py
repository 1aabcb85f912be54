import math

import pytest
import torch

from reprobook.operators.cno import AliasFree, CNOBlock, CNOResidualBlock, fourier_resample


def _trig(n, kx=3, ky=2):
    g = torch.arange(n, dtype=torch.float64) / n
    X, Y = torch.meshgrid(g, g, indexing="ij")
    return (torch.cos(2 * math.pi * kx * X) * torch.sin(2 * math.pi * ky * Y) + 0.3)[None, None]


def test_resample_is_exact_on_band_limited_functions():
    up = fourier_resample(_trig(16), 32)
    torch.testing.assert_close(up, _trig(32), atol=1e-12, rtol=0)
    torch.testing.assert_close(fourier_resample(_trig(32), 16), _trig(16), atol=1e-12, rtol=0)


def test_downsampling_is_a_low_pass_projection():
    x = torch.randn(2, 1, 32, 32, dtype=torch.float64)
    y = fourier_resample(fourier_resample(x, 16), 32)
    # a projection: applying it twice changes nothing
    torch.testing.assert_close(fourier_resample(fourier_resample(y, 16), 32), y, atol=1e-12, rtol=0)
    assert not torch.allclose(y, x)


def test_alias_free_activation_is_resolution_consistent():
    # on a band-limited input the alias-free LReLU at 32 equals the one at 64 low-passed to 32
    act = AliasFree("lrelu", up=4)
    a32 = act(_trig(32, 2, 1))
    a64 = fourier_resample(act(_trig(64, 2, 1)), 32)
    naive = torch.nn.functional.leaky_relu(_trig(32, 2, 1), 0.01)
    gap_af = (a32 - a64).abs().max()
    gap_naive = (naive - fourier_resample(torch.nn.functional.leaky_relu(_trig(64, 2, 1), 0.01), 32)).abs().max()
    assert gap_af < gap_naive / 2


def test_blocks_shapes_and_errors():
    x = torch.randn(2, 3, 16, 16)
    assert CNOBlock(3, 5)(x).shape == (2, 5, 16, 16)
    assert CNOBlock(3, 5, scale=0.5)(x).shape == (2, 5, 8, 8)
    assert CNOBlock(3, 5, scale=2.0)(x).shape == (2, 5, 32, 32)
    assert CNOResidualBlock(3)(x).shape == x.shape
    with pytest.raises(ValueError, match="even"):
        fourier_resample(torch.randn(1, 1, 15, 15), 8)
    with pytest.raises(ValueError, match="size"):
        fourier_resample(x, 7)
    with pytest.raises(ValueError, match="activation"):
        AliasFree("tanh")
