"""The soft sprite rasteriser: shapes land where their parameters say, gradients match finite
differences, compositing is 'over', bad input is refused."""
import pytest
import torch

from reprobook.render.sprites import bottom, coverage, pixel_grid, render, sdf


def _params(*rows):
    return torch.tensor(rows, dtype=torch.float64)


def test_pixel_grid_orientation():
    g = pixel_grid(4, 8)
    assert g.shape == (4, 8, 2)
    assert g[0, 0, 0] < g[0, -1, 0]          # x grows to the right
    assert g[0, 0, 1] > g[-1, 0, 1]          # y grows upward (row 0 is the top)


@pytest.mark.parametrize("shape", ["ball", "box", "tree"])
def test_sdf_sign(shape):
    inside = torch.tensor([[0.0, -0.5]])     # on every shape (the tree's trunk/canopy meet here)
    outside = torch.tensor([[1.5, 1.5]])
    assert sdf(shape, inside).item() < 0 < sdf(shape, outside).item()


def test_coverage_follows_position_and_scale():
    p = _params([0.25, 0.5, torch.log(torch.tensor(0.15)).item(), 0, 1, 0, 0])
    a = coverage(["ball"], p, 16, 16, softness=0.3)[0]
    assert a[8, 3] > 0.95 and a[8, 12] < 0.05  # covers its centre, not the far side
    big = p.clone()
    big[0, 2] += 0.5
    assert coverage(["ball"], big, 16, 16, 0.3).sum() > a.sum() * 2


def test_over_compositing_order():
    bg = torch.zeros(3, 8, 8, dtype=torch.float64)
    red = [0.5, 0.5, -0.5, 0, 1, 0, 0]
    blue = [0.5, 0.5, -0.5, 0, 0, 0, 1]
    front_blue = render(["box", "box"], _params(red, blue), 8, 8, background=bg, softness=0.1)
    front_red = render(["box", "box"], _params(blue, red), 8, 8, background=bg, softness=0.1)
    assert front_blue[2, 4, 4] > 0.99 and front_red[0, 4, 4] > 0.99


def test_gradients_match_finite_differences():
    torch.manual_seed(0)
    p = _params([0.4, 0.45, -1.6, 0.3, 0.9, 0.2, 0.1],
                [0.6, 0.5, -1.9, -0.2, 0.1, 0.8, 0.3],
                [0.5, 0.4, -1.3, 0.1, 0.2, 0.3, 0.9]).requires_grad_(True)
    shapes = ["tree", "ball", "box"]
    bg = torch.rand(3, 10, 10, dtype=torch.float64)
    w = torch.randn(3, 10, 10, dtype=torch.float64)

    def f(q):
        return (render(shapes, q, 10, 10, background=bg, softness=0.8) * w).sum()

    assert torch.autograd.gradcheck(f, (p,), eps=1e-6, atol=1e-5)


def test_batched_params_render_each_frame():
    p = _params([0.3, 0.5, -1.5, 0, 1, 1, 1])[None].repeat(3, 1, 1)
    p[1, 0, 0] = 0.7
    img = render(["ball"], p, 8, 8)
    assert img.shape == (3, 3, 8, 8)
    assert torch.allclose(img[0], img[2]) and not torch.allclose(img[0], img[1])


def test_bottom():
    p = _params([0.5, 0.4, torch.log(torch.tensor(0.1)).item(), 0, 0, 0, 0])
    assert torch.isclose(bottom(p), torch.tensor(0.3, dtype=torch.float64)).all()


def test_bad_input_is_refused():
    p = _params([0.5, 0.5, -1, 0, 1, 1, 1])
    with pytest.raises(ValueError, match="unknown shape"):
        render(["star"], p, 8, 8)
    with pytest.raises(ValueError, match="shape"):
        render(["ball"], p[:, :5], 8, 8)
    with pytest.raises(ValueError, match="sprites"):
        render(["ball", "box"], p, 8, 8)
    with pytest.raises(ValueError, match="background"):
        render(["ball"], p, 8, 8, background=torch.zeros(3, 4, 4))
    with pytest.raises(TypeError):
        render("ball", p, 8, 8)
