"""BAR's rescaling rules, balancedness and the alpha schedules."""
import pytest
import torch

from reprobook.optim.bar import alpha_at, balancedness, bar_rescale

pytestmark = pytest.mark.usefixtures("float64_default")


def _pair(seed=0, members=None):
    g = torch.Generator().manual_seed(seed)
    lead = () if members is None else (members,)
    return [torch.randn(*lead, *s, generator=g) for s in ((5, 2), (4, 2), (5, 2), (4, 2))]


def test_balancedness_value_and_members():
    x, y = torch.ones(2, 3), 2 * torch.ones(2, 2)
    assert float(balancedness(x, y)) == pytest.approx(0.5 * (6 - 16))
    xs, ys = torch.stack([x, 2 * x]), torch.stack([y, y])
    assert torch.allclose(balancedness(xs, ys, member_dims=1), torch.tensor([-5.0, 4.0]))


def test_nbar_grows_the_factor_with_the_larger_gradient():
    x, y, gx, gy = _pair()
    gx = 10 * gx                                   # ||g_x|| > ||g_y||
    nx, ny = bar_rescale(x, y, gx, gy, alpha=0.5, lr=0.1, variant="nbar")
    assert torch.allclose(nx, 1.05 * x) and torch.allclose(ny, 0.95 * y)
    nx, ny = bar_rescale(x, y, gx / 100, gy, alpha=0.5, lr=0.1, variant="nbar")
    assert torch.allclose(nx, 0.95 * x) and torch.allclose(ny, 1.05 * y)


def test_obar_shrinks_the_larger_factor():
    x, y, gx, gy = _pair()
    x = 10 * x
    nx, ny = bar_rescale(x, y, gx, gy, alpha=1.0, lr=0.1, variant="obar")
    assert torch.allclose(nx, 0.9 * x) and torch.allclose(ny, 1.1 * y)


def test_nbar_decays_the_product_like_the_shrink_ablation():
    x, y, gx, gy = _pair(3)
    a = bar_rescale(x, y, gx, gy, alpha=1.0, lr=0.2, variant="nbar")
    b = bar_rescale(x, y, gx, gy, alpha=1.0, lr=0.2, variant="shrink")
    assert torch.allclose(a[0] @ a[1].T, 0.96 * x @ y.T) and torch.allclose(b[0] @ b[1].T,
                                                                            0.96 * x @ y.T)
    assert torch.allclose(balancedness(*b), 0.96 * balancedness(x, y))


def test_flow_variant_reproduces_sams_first_order_drift():
    x, y, gx, gy = _pair(1)
    target = (gx.pow(2).sum() - gy.pow(2).sum()) / (gx.pow(2).sum() + gy.pow(2).sum()).sqrt()
    errs = []
    for mu in (1e-2, 1e-3, 1e-4):
        nx, ny = bar_rescale(x, y, gx, gy, alpha=1.0, lr=mu, variant="flow")
        db = balancedness(nx, ny) - balancedness(x, y)
        errs.append(abs(float(db / mu - target)))
    # dB = mu * target + O(mu^2): the error of dB/mu falls 10x per decade of mu
    assert errs[0] < 1e-2 and errs[1] == pytest.approx(errs[0] / 10, rel=0.05)
    assert errs[2] == pytest.approx(errs[1] / 10, rel=0.05)


def test_members_are_rescaled_independently():
    x, y, gx, gy = _pair(2, members=3)
    lr = torch.tensor([0.1, 0.2, 0.3])
    nx, ny = bar_rescale(x, y, gx, gy, alpha=0.5, lr=lr, variant="nbar", member_dims=1)
    for m in range(3):
        ax, ay = bar_rescale(x[m], y[m], gx[m], gy[m], alpha=0.5, lr=float(lr[m]), variant="nbar")
        assert torch.allclose(nx[m], ax) and torch.allclose(ny[m], ay)


def test_alpha_schedules():
    assert alpha_at(2.0, 0, 10, "linear") == 2.0 and alpha_at(2.0, 5, 10, "linear") == 1.0
    assert alpha_at(2.0, 10, 10, "cosine") == pytest.approx(0.0, abs=1e-15)
    assert alpha_at(2.0, 5, 10, "cosine") == pytest.approx(1.0)
    assert alpha_at(2.0, 7, 10, "constant") == 2.0


@pytest.mark.parametrize("bad, match", [
    (lambda: bar_rescale(*_pair(), alpha=1.0, lr=0.1, variant="sbar"), "variant"),
    (lambda: bar_rescale(*_pair(), alpha=-1.0, lr=0.1), "alpha"),
    (lambda: bar_rescale(*_pair()[:2], torch.zeros(3), _pair()[3], alpha=1.0, lr=0.1), "gx"),
    (lambda: bar_rescale(*_pair(), alpha=1.0, lr=torch.ones(3)), "per member"),
    (lambda: alpha_at(1.0, 11, 10), "0 <= t <= total"),
    (lambda: alpha_at(1.0, 1, 10, "step"), "schedule"),
])
def test_bad_arguments_are_named(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        bad()
