import pytest
import torch

from reprobook.kernels.selective_scan import selective_scan
from reprobook.operators.mambano import (VARIANTS, SS2D, OperatorUNet, TokenAttention, VSSBlock,
                                         count_parameters, match_width, merge_orders, scan_orders)


def test_scan_orders_round_trip():
    x = torch.randn(2, 3, 4, 5)
    xs = scan_orders(x)
    assert xs.shape == (2, 4, 3, 20)
    # rows, columns and their reversals: merging four copies of the same grid gives 4 x
    torch.testing.assert_close(merge_orders(xs, 4, 5), 4 * x)
    torch.testing.assert_close(xs[:, 1].reshape(2, 3, 5, 4).transpose(2, 3), x)


def _ss2d_by_hand(m, v):
    """Each of the four directions scanned separately with the reference loop, then merged."""
    B, _, H, W = v.shape
    d, N, r = m.d_inner, m.d_state, m.dt_rank
    x, z = m.in_proj(v).chunk(2, dim=1)
    x = m.act(m.conv(x))
    xs = scan_orders(x)
    ys = []
    for k in range(4):
        dbl = torch.einsum("bdl,cd->bcl", xs[:, k], m.x_proj[k])
        dt, Bk, Ck = dbl.split([r, N, N], dim=1)
        dt = torch.einsum("brl,dr->bdl", dt, m.dt_proj[k])
        A = -torch.exp(m.A_log[k * d:(k + 1) * d])
        ys.append(selective_scan(xs[:, k], dt, A, Bk, Ck, m.D[k * d:(k + 1) * d], delta_bias=m.dt_bias[k],
                                 delta_softplus=True, impl="reference"))
    y = merge_orders(torch.stack(ys, 1), H, W)
    y = m.out_norm(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
    return m.out_proj(y * m.gate(z))


def test_ss2d_equals_four_separate_reference_scans():
    torch.manual_seed(0)
    m = SS2D(4, d_state=3, expand=2).double()
    v = torch.randn(2, 4, 6, 6, dtype=torch.float64)
    torch.testing.assert_close(m(v), _ss2d_by_hand(m, v), atol=1e-10, rtol=1e-10)


def test_ss2d_is_global():
    # the output at the first grid point depends on the input at the last one (reverse scans)
    torch.manual_seed(1)
    m = VSSBlock(4, d_state=2, expand=1)
    for p in m.ss2d.parameters():
        if p is m.ss2d.dt_bias:
            p.data.fill_(2.0)            # long memory
    v = torch.randn(1, 4, 8, 8, requires_grad=True)
    m(v)[0, :, 0, 0].sum().backward()
    assert v.grad[0, :, -1, -1].abs().sum() > 0
    # a 3x3 conv block cannot see that far
    from reprobook.operators.cno import CNOResidualBlock
    blk = CNOResidualBlock(4, batch_norm=False)
    v2 = torch.randn(1, 4, 8, 8, dtype=torch.float32)
    # the alias-free activation is global in principle (spectral), but tiny far away
    v2.requires_grad_(True)
    blk(v2)[0, :, 0, 0].sum().backward()
    assert v2.grad[0, :, 4, 4].abs().sum() < 0.05 * v2.grad[0, :, 0, 0].abs().sum()


@pytest.mark.parametrize("variant", VARIANTS)
def test_unet_shapes_and_backward(variant):
    m = OperatorUNet(variant, 2, d_state=2, expand=1, levels=3, mixer_from=1)
    x = torch.randn(2, 3, 8, 8)
    y = m(x)
    assert y.shape == (2, 1, 8, 8)
    y.square().mean().backward()
    assert all(p.grad is not None for p in m.parameters() if p.requires_grad)


def test_variants_differ_in_the_right_places():
    mb, ssm, cno = (OperatorUNet(v, 4, levels=2) for v in VARIANTS)
    assert any(isinstance(b, VSSBlock) for b in mb.modules())
    assert any(isinstance(b, VSSBlock) for b in ssm.modules())
    assert not any(isinstance(b, VSSBlock) for b in cno.modules())
    assert isinstance(ssm.neck, torch.nn.Identity) and not isinstance(mb.neck, torch.nn.Identity)


def test_match_width_and_errors():
    target = count_parameters(OperatorUNet("mambano", 6, levels=2))
    w = match_width(lambda w: OperatorUNet("cno", w, levels=2), target)
    got = count_parameters(OperatorUNet("cno", w, levels=2))
    assert abs(got - target) / target < 0.2
    with pytest.raises(ValueError, match="variant"):
        OperatorUNet("attention")
    with pytest.raises(ValueError, match="divisible"):
        OperatorUNet("cno", 4, levels=3)(torch.randn(1, 3, 12, 12))
    with pytest.raises(ValueError, match="mixer_from"):
        OperatorUNet("cno", 4, levels=2, mixer_from=2)


def test_token_attention_shape():
    a = TokenAttention(8, heads=2)
    assert a(torch.randn(1, 8, 4, 4)).shape == (1, 8, 4, 4)
    with pytest.raises(ValueError, match="divide"):
        TokenAttention(6, heads=4)
