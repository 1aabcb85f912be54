import math

import pytest
import torch

from reprobook.operators.fno import FNO2d, SpectralConv2d, fno_parameters
from reprobook.operators.mambano import count_parameters


def test_spectral_conv_is_resolution_invariant_on_band_limited_inputs():
    torch.manual_seed(0)
    K = SpectralConv2d(2, 3, 4)
    g16 = torch.arange(16, dtype=torch.float32) / 16
    g32 = torch.arange(32, dtype=torch.float32) / 32

    def f(g):
        X, Y = torch.meshgrid(g, g, indexing="ij")
        return torch.stack([torch.sin(2 * math.pi * X) * torch.cos(4 * math.pi * Y),
                            torch.cos(2 * math.pi * (X + 2 * Y))])[None]
    y16, y32 = K(f(g16)), K(f(g32))
    torch.testing.assert_close(y32[..., ::2, ::2], y16, atol=1e-5, rtol=0)


def test_spectral_conv_drops_high_modes():
    K = SpectralConv2d(1, 1, 2)
    g = torch.arange(16, dtype=torch.float32) / 16
    X, Y = torch.meshgrid(g, g, indexing="ij")
    x = torch.cos(2 * math.pi * 5 * X)[None, None]
    assert K(x).abs().max() < 1e-6


def test_fno_parameters_closed_form_and_errors():
    m = FNO2d(3, 6, 4, 2)
    assert count_parameters(m) == fno_parameters(3, 6, 4, 2)
    assert m(torch.randn(2, 3, 16, 16)).shape == (2, 1, 16, 16)
    with pytest.raises(ValueError, match="too coarse"):
        m(torch.randn(1, 3, 6, 6))
    with pytest.raises(ValueError, match="FNO2d expects"):
        m(torch.randn(1, 2, 16, 16))
