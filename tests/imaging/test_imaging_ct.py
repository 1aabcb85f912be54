"""The torch parallel-beam projector against scikit-image's Radon transform, its matrix and adjoint."""
import numpy as np
import pytest
import torch
from skimage.data import shepp_logan_phantom
from skimage.transform import radon as sk_radon
from skimage.transform import resize

from reprobook.imaging.ct import back_project, circle_mask, project, radon, radon_matrix, view_angles


def _shepp(n):
    return resize(shepp_logan_phantom(), (n, n), anti_aliasing=True) * circle_mask(n).numpy()


@pytest.mark.parametrize("n,views,span", [(16, 8, 180.0), (21, 5, 90.0), (32, 13, 180.0)])
def test_matches_skimage_radon_on_shepp_logan(n, views, span):
    img = _shepp(n)
    th = view_angles(views, span)
    ref = sk_radon(img, th)                              # (n, views)
    ours = radon(torch.tensor(img), th).numpy().T
    assert np.abs(ours - ref).max() <= 1e-6 * np.abs(ref).max()


def test_matrix_equals_operator_and_transpose_is_adjoint():
    n, th = 12, view_angles(6)
    A = radon_matrix(n, th)
    assert A.shape == (6 * n, n * n)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, n, n, generator=g, dtype=torch.float64) * circle_mask(n)
    assert torch.allclose(project(A, x), radon(x, th).reshape(3, -1), atol=1e-12)
    y = torch.randn(3, 6 * n, generator=g, dtype=torch.float64)
    lhs = (project(A, x) * y).sum()
    rhs = (x * back_project(A, y)).sum()
    assert torch.isclose(lhs, rhs, rtol=1e-12)


def test_projector_is_differentiable():
    x = torch.zeros(8, 8, dtype=torch.float64, requires_grad=True)
    radon(x, view_angles(4)).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="n, n"):
        radon(torch.zeros(4, 5), [0.0])
    with pytest.raises(ValueError, match="n_views"):
        view_angles(0)
    with pytest.raises(ValueError, match="span"):
        view_angles(4, 0.0)
    with pytest.raises(ValueError, match="8x8"):
        project(radon_matrix(8, [0.0]), torch.zeros(2, 7, 7))
    with pytest.raises(ValueError, match="entries"):
        back_project(radon_matrix(8, [0.0]), torch.zeros(2, 5))
