import pytest
import torch

from reprobook.models.inverted import InvertedForecaster, TokenMLP


def test_revin_makes_level_shift_equivariant():
    torch.manual_seed(0)
    m = InvertedForecaster(16, 4, TokenMLP, d_model=8, d_ff=8).double().eval()
    x = torch.randn(2, 16, 3, dtype=torch.float64)
    torch.testing.assert_close(m(x + 50.0), m(x) + 50.0)
    torch.testing.assert_close(m(3.0 * x), 3.0 * m(x), atol=1e-4, rtol=1e-4)


def test_tokens_shape_and_errors():
    m = InvertedForecaster(16, 4, TokenMLP, d_model=8, d_ff=8, n_blocks=3)
    assert m.tokens(torch.randn(2, 16, 5)).shape == (2, 5, 8)
    assert len(m.layers) == 3
    with pytest.raises(ValueError, match="lookback"):
        InvertedForecaster(0, 4, TokenMLP)
