import pytest
import torch

from reprobook.timeseries.revin import RevIN


def test_norm_statistics_and_roundtrip():
    x = torch.randn(4, 50, 3, dtype=torch.float64) * 5 + 7
    r = RevIN()
    z = r.norm(x)
    torch.testing.assert_close(z.mean(1), torch.zeros(4, 3, dtype=torch.float64), atol=1e-10, rtol=0)
    torch.testing.assert_close(z.std(1, unbiased=False), torch.ones(4, 3, dtype=torch.float64),
                               atol=1e-5, rtol=0)
    torch.testing.assert_close(r.denorm(z), x)


def test_affine_roundtrip_and_shift_invariance():
    r = RevIN(3, affine=True)
    with torch.no_grad():
        r.weight.mul_(2.0)
        r.bias.add_(0.5)
    x = torch.randn(2, 20, 3, dtype=torch.float64)
    torch.testing.assert_close(r.denorm(r.norm(x).double()), x, atol=1e-6, rtol=0)
    # a level shift of the input does not change the normalised input
    torch.testing.assert_close(r.norm(x + 100.0), r.norm(x), atol=1e-8, rtol=0)


def test_errors():
    r = RevIN()
    with pytest.raises(RuntimeError, match="before norm"):
        r.denorm(torch.zeros(1, 2, 3))
    with pytest.raises(ValueError, match="batch, time, channels"):
        r.norm(torch.zeros(3, 4))
    r.norm(torch.randn(2, 5, 3))
    with pytest.raises(ValueError, match="matching"):
        r.denorm(torch.zeros(2, 4, 5))
    with pytest.raises(ValueError, match="n_channels"):
        RevIN(affine=True)
