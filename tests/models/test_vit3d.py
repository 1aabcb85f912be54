"""Tests of the 3-D ViT: patch order, shapes, shared cube embedding, bad input."""
import pytest
import torch

from reprobook.models.vit3d import ViT3D, patchify3d

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_patchify_order_and_content():
    x = torch.arange(2 * 4 * 4 * 4, dtype=torch.float32).reshape(2, 4, 4, 4)
    p = patchify3d(x, 2)
    assert p.shape == (2, 8, 8)
    # cube 0 is x[:, :2, :2, :2]; cube 1 is the next along the last axis
    torch.testing.assert_close(p[:, 0], x[:, :2, :2, :2].reshape(2, 8))
    torch.testing.assert_close(p[:, 1], x[:, :2, :2, 2:].reshape(2, 8))
    torch.testing.assert_close(p[:, 4], x[:, 2:, :2, :2].reshape(2, 8))


def test_forward_shapes_and_gradients():
    torch.manual_seed(0)
    m = ViT3D(grid=8, patch=4, dim=16, depth=1, heads=2)
    x = torch.randn(3, 8, 8, 8, requires_grad=True)
    z = m(x)
    assert z.shape == (3, 16) and m.forward_tokens(x).shape == (3, 8, 16)
    z.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_cube_embedding_is_shared_across_places():
    """Moving a pattern from one cube to another changes only the position term of its token."""
    torch.manual_seed(1)
    m = ViT3D(grid=8, patch=4, dim=16, depth=1, heads=2)
    a = torch.zeros(1, 8, 8, 8)
    b = torch.zeros(1, 8, 8, 8)
    pattern = torch.randn(4, 4, 4)
    a[0, :4, :4, :4] = pattern
    b[0, 4:, 4:, 4:] = pattern
    ea = m.embed(patchify3d(a, 4))[0]
    eb = m.embed(patchify3d(b, 4))[0]
    torch.testing.assert_close(ea[0], eb[7])


def test_samples_do_not_interact():
    torch.manual_seed(2)
    m = ViT3D(grid=8, patch=4, dim=16, depth=2, heads=2).eval()
    x = torch.randn(4, 8, 8, 8)
    torch.testing.assert_close(m(x)[1:2], m(x[1:2]), atol=1e-5, rtol=1e-5)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="multiple"):
        ViT3D(grid=10, patch=4)
    with pytest.raises(ValueError, match="divisible"):
        ViT3D(grid=8, patch=4, dim=10, heads=4)
    with pytest.raises(ValueError, match="volumes"):
        ViT3D(grid=8, patch=4, dim=16, heads=2)(torch.zeros(2, 8, 8))
    with pytest.raises(ValueError, match="multiples"):
        patchify3d(torch.zeros(1, 6, 6, 6), 4)
