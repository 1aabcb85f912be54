import pytest
import torch
import torch.nn.functional as F

from reprobook.timeseries.csode import CSODE, NODE, GridControl, build, match_width, param_count


def test_grid_control_is_a_periodic_convolution():
    torch.manual_seed(0)
    g = GridControl(6, 2, 3)
    u = torch.randn(4, 72)
    ref = F.conv2d(F.pad(u.reshape(4, 2, 6, 6), (1, 1, 1, 1), mode="circular"), g.weight, g.bias)
    torch.testing.assert_close(g(u), ref.reshape(4, -1), atol=1e-5, rtol=1e-5)


def test_csode_without_control_is_euler_on_its_field():
    torch.manual_seed(0)
    m = build("csode", 3, 5, control=False)
    x0 = torch.randn(2, 3)
    out = m(x0, 4, 0.1)
    x = x0
    for k in range(4):
        x = x + 0.1 * m.field(x)
        torch.testing.assert_close(out[k + 1], x)


def test_csode_control_drives_the_state_by_udot():
    torch.manual_seed(0)
    m = build("csode", 3, 5)
    x0 = torch.randn(2, 3)
    out = m(x0, 1, 0.1)
    torch.testing.assert_close(out[1], x0 + 0.1 * (m.field(x0) + m.control(x0)))


def test_anode_starts_augmented_dims_at_zero_and_reads_out_the_state():
    torch.manual_seed(0)
    m = NODE(3, 8, augment=2)
    x0 = torch.randn(5, 3)
    out = m(x0, 3, 0.1)
    assert out.shape == (4, 5, 3)
    torch.testing.assert_close(out[0], x0)
    z = torch.cat([x0, torch.zeros(5, 2)], 1)
    torch.testing.assert_close(out[1], (z + 0.1 * m.field(0, z))[:, :3])


@pytest.mark.parametrize("dim,width,grid,a0", [(3, 16, None, "full"), (128, 8, 8, "diag")])
def test_matched_widths_give_parameter_counts_within_ten_percent(dim, width, grid, a0):
    budget = param_count(build("csode", dim, width, grid=grid, a0=a0))
    makers = [lambda w: build("node", dim, w), lambda w: build("anode", dim, w),
              lambda w: build("csode", dim, w, grid=grid, a0=a0, control=False),
              lambda w: build("csode", dim, w, grid=grid, a0=a0, n_sub=1)]
    for make in makers:
        count = param_count(make(match_width(make, budget)))
        assert abs(count - budget) <= 0.1 * budget


def test_field_matrices_match_the_parameters():
    m = build("csode", 4, 3, a0="diag")
    A0, As, Ws = m.field.matrices()
    assert A0.shape == (4, 4) and (A0 == 0).all()            # diagonal A0 starts at 0
    assert [a.shape for a in As] == [(4, 3), (4, 3)] and [w.shape for w in Ws] == [(3, 4), (3, 4)]


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="unknown model kind"):
        build("sonode", 3, 4)
    with pytest.raises(ValueError, match="grid"):
        build("csode", 10, 4, grid=4)
    with pytest.raises(ValueError, match="unknown activations"):
        from reprobook.timeseries.csode import CSField
        CSField(3, [4], ["sigmoid"])
    with pytest.raises(ValueError, match="target"):
        match_width(lambda w: build("node", 3, w), 0)
    assert isinstance(build("csode", 3, 4), CSODE)
