import pytest
import torch

from reprobook.models.token_smoothing import high_frequency_gain, high_frequency_share, token_cosine


def test_identical_tokens_are_fully_smoothed():
    x = torch.randn(3, 1, 6).expand(3, 5, 6)
    assert torch.allclose(token_cosine(x), torch.tensor(1.0), atol=1e-6)
    assert high_frequency_share(x).abs() < 1e-10


def test_orthogonal_tokens_and_a_hand_computed_case():
    x = torch.eye(4).unsqueeze(0)
    assert token_cosine(x).abs() < 1e-7
    # tokens (1,0) and (1,1): cosine 1/sqrt(2); mean (1, .5), energy outside it .5 of 3
    y = torch.tensor([[[1.0, 0.0], [1.0, 1.0]]])
    assert torch.allclose(token_cosine(y), torch.tensor(2 ** -0.5))
    assert torch.allclose(high_frequency_share(y), torch.tensor(0.5 / 3))


def test_share_equals_non_dc_fourier_energy():
    x = torch.randn(2, 9, 4, dtype=torch.float64)
    f = torch.fft.fft(x, dim=1)
    share = (f[:, 1:].abs() ** 2).sum(dim=(1, 2)) / (f.abs() ** 2).sum(dim=(1, 2))
    assert torch.allclose(high_frequency_share(x), share.mean())


def test_gain_of_identity_averaging_and_a_high_pass():
    x = torch.randn(4, 6, 3, dtype=torch.float64)
    n = 6
    assert torch.allclose(high_frequency_gain(torch.eye(n, dtype=torch.float64), x),
                          torch.ones(4, dtype=torch.float64))
    avg = torch.full((n, n), 1 / n, dtype=torch.float64)
    assert high_frequency_gain(avg, x).abs().max() < 1e-12
    # 2I - avg doubles the non-DC part
    assert torch.allclose(high_frequency_gain(2 * torch.eye(n, dtype=torch.float64) - avg, x),
                          torch.full((4,), 2.0, dtype=torch.float64))
    # scaling a filter scales both gains alike: the relative gain does not move
    m = 0.3 * torch.eye(n, dtype=torch.float64) + 0.7 * avg
    assert torch.allclose(high_frequency_gain(0.5 * m, x, relative=True),
                          high_frequency_gain(m, x, relative=True))
    assert torch.allclose(high_frequency_gain(m, x), torch.full((4,), 0.3, dtype=torch.float64))


def test_bad_input():
    with pytest.raises(ValueError, match="tokens"):
        token_cosine(torch.zeros(2, 1, 3))
    with pytest.raises(ValueError, match="same n"):
        high_frequency_gain(torch.eye(3), torch.zeros(4, 3))
