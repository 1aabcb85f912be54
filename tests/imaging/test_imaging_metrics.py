"""Volume metrics: PSNR by orientation (empty slices skipped) and the z-gradient error."""
import math

import pytest
import torch

from reprobook.imaging.metrics import slice_psnr, z_gradient_error


def test_psnr_of_a_known_error_and_empty_slices_skipped():
    ref = torch.zeros(1, 4, 6, 6)
    ref[:, :, 1:5, 2:4] = 1.0
    x = ref + 0.1                                   # MSE 0.01 everywhere: 20 dB in every slice
    assert torch.allclose(slice_psnr(x, ref, "axial"), torch.tensor([20.0]), atol=1e-4)
    assert torch.allclose(slice_psnr(x, ref, "sagittal"), torch.tensor([20.0]), atol=1e-4)
    y = x.clone()
    y[:, :, :, 0] += 10.0                           # an empty sagittal column: must not count
    assert torch.allclose(slice_psnr(y, ref, "sagittal"), torch.tensor([20.0]), atol=1e-4)


def test_sagittal_psnr_sees_a_slice_to_slice_flicker_that_axial_averages_alike():
    ref = torch.rand(1, 8, 6, 6, generator=torch.Generator().manual_seed(0))
    flicker = ref + 0.1 * torch.tensor([1.0, -1.0] * 4)[None, :, None, None]
    assert z_gradient_error(flicker, ref) > z_gradient_error(ref + 0.1, ref)
    assert float(z_gradient_error(ref + 0.1, ref)) == pytest.approx(0.0, abs=1e-6)
    assert math.isclose(float(slice_psnr(flicker, ref, "axial")), 20.0, abs_tol=1e-3)


def test_bad_inputs():
    with pytest.raises(ValueError, match="orientation"):
        slice_psnr(torch.zeros(1, 2, 3, 3), torch.zeros(1, 2, 3, 3), "oblique")
    with pytest.raises(ValueError, match="V, Z, n, n"):
        z_gradient_error(torch.zeros(2, 3, 3), torch.zeros(2, 3, 3))
