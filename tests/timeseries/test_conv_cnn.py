import pytest
import torch

from reprobook.bench.flops import count_flops
from reprobook.timeseries.conv_cnn import ConvCNN, conv_cnn_flops, matched_width


@pytest.mark.parametrize("t,d,w", [(64, 3, 16), (100, 2, 24), (33, 1, 8)])
def test_closed_form_equals_the_counter(t, d, w):
    m = ConvCNN(3, 4, t, depth=d, width=w)
    assert count_flops(m, torch.randn(1, 3, t)) == conv_cnn_flops(3, 4, t, d, w)


def test_matched_width_is_closest():
    target = conv_cnn_flops(3, 4, 64, 3, 40) + 10
    assert matched_width(target, 3, 4, 64, 3) == 40
    with pytest.raises(ValueError, match="positive"):
        matched_width(0, 3, 4, 64, 3)


def test_shapes_and_bad_input():
    m = ConvCNN(6, 4, 100, depth=3, width=8)
    assert m(torch.randn(2, 6, 100)).shape == (2, 4)
    with pytest.raises(ValueError, match="expects x"):
        m(torch.randn(2, 6, 99))
    with pytest.raises(ValueError, match="too short"):
        ConvCNN(6, 4, 8, depth=4)
    with pytest.raises(ValueError, match="width"):
        ConvCNN(6, 4, 100, width=0)
