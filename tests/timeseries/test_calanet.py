import pytest
import torch

from reprobook.bench.flops import count_flops, flops_by_module
from reprobook.timeseries.calanet import CALANet, block_flops, channel_shuffle, pool_schedule


def test_pool_schedule_matches_the_official_rule():
    assert pool_schedule(48, 8) == []
    assert pool_schedule(64, 8) == [3]          # one pool, splits 4 + 4
    assert pool_schedule(128, 8) == [2, 5]      # splits 3, 3, 2
    assert pool_schedule(512, 8) == [1, 3, 5, 6]
    with pytest.raises(ValueError, match="depth"):
        pool_schedule(64, 0)


def test_channel_shuffle_interleaves_groups():
    x = torch.arange(6.).view(1, 6, 1)
    assert channel_shuffle(x, 2).flatten().tolist() == [0, 3, 1, 4, 2, 5]
    with pytest.raises(ValueError, match="groups"):
        channel_shuffle(x, 4)
    with pytest.raises(ValueError, match="shape"):
        channel_shuffle(torch.zeros(6, 1), 2)


@pytest.mark.parametrize("c,t,L", [(32, 48, 4), (64, 32, 8), (32, 100, 4)])
def test_every_block_costs_the_closed_form(c, t, L):
    m = CALANet(3, 5, t, depth=L, width=c)
    fb = flops_by_module(m, torch.randn(1, 3, t))
    for i, (ci, co, tt) in enumerate(m.shapes):
        assert fb[f"CALANet.blocks.{i}"] == block_flops(ci, co, L, tt, 5)


def test_depth_is_free_without_pooling_and_not_without_groups():
    x = torch.randn(1, 3, 48)
    cheap = [count_flops(CALANet(3, 4, 48, depth=L, width=32), x) for L in (2, 4, 8)]
    assert max(cheap) == min(cheap)
    dense = [count_flops(CALANet(3, 4, 48, depth=L, width=32, groups=1), x) for L in (2, 4, 8)]
    assert dense[2] > 3 * dense[0]


def test_last_layer_readout_is_flop_and_parameter_matched():
    x = torch.randn(1, 6, 100)
    a, b = CALANet(6, 4, 100, depth=4, width=32), CALANet(6, 4, 100, depth=4, width=32, readout="last")
    assert a.feature_dim == b.feature_dim
    assert count_flops(a, x) == count_flops(b, x)
    assert sum(p.numel() for p in a.parameters()) == sum(p.numel() for p in b.parameters())
    # the ablation's classifier input depends on the last block only
    assert sum(blk.lctm is not None for blk in b.blocks) == 1


def test_shapes_and_bad_input():
    m = CALANet(6, 4, 100, depth=4, width=32)
    assert m(torch.randn(3, 6, 100)).shape == (3, 4)
    with pytest.raises(ValueError, match="expects x"):
        m(torch.randn(3, 5, 100))
    with pytest.raises(ValueError, match="readout"):
        CALANet(6, 4, 100, readout="mean")
    with pytest.raises(ValueError, match="multiple of depth"):
        CALANet(6, 4, 100, depth=3, width=32)
    with pytest.raises(ValueError, match="divide into 3 groups"):
        CALANet(6, 4, 100, depth=4, width=32, groups=3)
