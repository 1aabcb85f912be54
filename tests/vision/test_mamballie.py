import pytest
import torch

from reprobook.vision.mamballie import IRSK, LESSM, MambaLLIE, illumination_prior
from reprobook.vision.restorers import count_parameters, train_restorer


def test_prior_channels():
    x = torch.rand(2, 3, 4, 4)
    p = illumination_prior(x)
    torch.testing.assert_close(p[:, 3], x.max(1).values)
    torch.testing.assert_close(p[:, 4], x.mean(1))
    assert illumination_prior(x, "rgb") is x
    with pytest.raises(ValueError, match="prior"):
        illumination_prior(x, "retinex")


def test_lessm_without_bias_is_ss2d(one_thread):
    """Our split of SS2D's forward (scan, then bias, then gate) adds nothing when the bias is off."""
    torch.manual_seed(0)
    m = LESSM(4, d_state=4, expand=2, local_bias=False)
    f, g = torch.randn(2, 4, 6, 6), torch.randn(2, 8, 6, 6)
    torch.testing.assert_close(m(f, g), m.ss2d(f), atol=1e-5, rtol=1e-5)


def test_local_bias_reads_the_illumination(one_thread):
    torch.manual_seed(0)
    on = LESSM(4, d_state=4, expand=2, local_bias=True)
    f, g = torch.randn(1, 4, 6, 6), torch.randn(1, 8, 6, 6)
    assert (on(f, g) - on(f, g + 1.0)).abs().max() > 1e-3
    # the bias is local: a change of g at one corner leaves the far corner's bias term alone
    g2 = g.clone()
    g2[..., 0, 0] += 3.0
    y1, _ = on.global_scan(f)
    bias = lambda gg: torch.nn.functional.silu(on.local(gg))
    assert (bias(g2) - bias(g))[..., 3:, 3:].abs().max() == 0
    with pytest.raises(ValueError, match="illumination features"):
        on(f, torch.randn(1, 4, 6, 6))


def test_irsk_selection_off_is_a_plain_ffn(one_thread):
    torch.manual_seed(0)
    m = IRSK(4, expand=2)
    torch.nn.init.zeros_(m.select.weight)
    torch.nn.init.constant_(m.select.bias, -1e4)      # sigmoid -> 0: no kernel selected
    f, g = torch.randn(1, 4, 5, 5), torch.randn(1, 8, 5, 5)
    plain = m.project_out(torch.nn.functional.gelu(m.dw_out(m.project_in(f))))
    torch.testing.assert_close(m(f, g), plain)
    torch.nn.init.constant_(m.select.bias, 0.0)
    assert (m(f, g) - plain).abs().max() > 1e-4


def test_switches_and_parameters(one_thread):
    full = count_parameters(MambaLLIE(8, expand=1, d_state=4))
    nb = count_parameters(MambaLLIE(8, expand=1, d_state=4, local_bias=False))
    rgb = count_parameters(MambaLLIE(8, expand=1, d_state=4, prior="rgb"))
    # three stages of one block, widths 8, 16, 8, expand 1: a depthwise 3x3 conv with bias each
    assert full - nb == (8 + 16 + 8) * 10
    # two fewer input channels in each of the three illumination convolutions
    assert full - rgb == 2 * 9 * (8 + 16 + 8)
    x = torch.rand(2, 3, 8, 8)
    for kw in ({}, {"local_bias": False}, {"prior": "rgb"}, {"ffn": "gdfn"}):
        assert MambaLLIE(8, expand=1, d_state=4, **kw)(x).shape == x.shape
    with pytest.raises(ValueError, match="ffn"):
        MambaLLIE(8, ffn="mlp")
    with pytest.raises(ValueError, match="prior"):
        MambaLLIE(8, prior="none")
    with pytest.raises(ValueError, match="depths"):
        MambaLLIE(8, depths=(1, 0, 1))
    with pytest.raises(ValueError, match="RGB batch"):
        MambaLLIE(8)(torch.rand(1, 5, 8, 8))


def test_training_reduces_loss(one_thread):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    clean = torch.rand(32, 3, 8, 8, generator=g)
    low = 0.2 * clean
    m = MambaLLIE(4, expand=1, d_state=2)
    losses = train_restorer(m, low, clean, steps=30, batch_size=8, lr=3e-3,
                            generator=torch.Generator().manual_seed(1))
    assert sum(losses[-3:]) < 0.8 * sum(losses[:3])
