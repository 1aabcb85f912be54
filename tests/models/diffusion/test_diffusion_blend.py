"""Slab partitions cover every slice once, the blended denoiser, training slabs, the DDS sampler."""
import pytest
import torch

from reprobook.imaging.ct import radon_matrix, view_angles
from reprobook.imaging.data_consistency import data_consistency
from reprobook.models.diffusion.blend import (blended_denoise, dds_sample, offset_schedule,
                                              random_slabs, slab_partition, slab_positions,
                                              slice_denoise)
from reprobook.models.diffusion.schedules import karras_sigmas


@pytest.mark.parametrize("z", [3, 4, 7, 8, 12])
@pytest.mark.parametrize("offset", [0, 1, 2])
def test_every_slice_owned_exactly_once(z, offset):
    idx, own = slab_partition(z, 3, offset)
    owned = idx[own].tolist()
    assert sorted(owned) == list(range(z))
    assert idx.min() >= 0 and idx.max() < z
    assert len(slab_positions(z, 3, offset)) == idx.shape[0]


def test_offsets_move_the_boundaries():
    assert offset_schedule(5, 3) == [0, 1, 2, 0, 1]
    assert offset_schedule(4, 3, shift=False) == [0, 0, 0, 0]
    b0 = {tuple(r) for r in slab_partition(9, 3, 0)[0].tolist()}
    b1 = {tuple(r) for r in slab_partition(9, 3, 1)[0].tolist()}
    assert b0.isdisjoint(b1)


class _Probe(torch.nn.Module):
    """A 'denoiser' that returns each slab's channel mean plus its position: checks routing."""
    channels, position = 3, True

    def forward(self, x, sigma, pos):
        return x.mean(1, keepdim=True).expand_as(x) + pos[:, None, None, None]


def test_blended_denoise_routes_slabs_back():
    x = torch.arange(6, dtype=torch.float64)[None, :, None, None].expand(1, 6, 4, 4).clone()
    d = blended_denoise(_Probe(), x, 1.0, 0)
    pos = slab_positions(6, 3, 0)
    expect = torch.tensor([1 + pos[0]] * 3 + [4 + pos[1]] * 3, dtype=torch.float64)
    assert torch.allclose(d[0, :, 0, 0], expect)


def test_random_slabs_match_the_partition_reflection():
    vols = torch.arange(5, dtype=torch.float32)[None, :, None, None].expand(2, 5, 4, 4)
    slabs, pos = random_slabs(vols, 3, 50, torch.Generator().manual_seed(0))
    assert slabs.shape == (50, 3, 4, 4)
    rows = {tuple(int(v) for v in s[:, 0, 0].tolist()) for s in slabs}
    allowed = {tuple(r) for o in range(3) for r in slab_partition(5, 3, o)[0].tolist()}
    assert rows <= allowed
    assert pos.min() >= -1.5 - 1e-6 and pos.max() <= 1.5 + 1e-6


def test_dds_with_an_oracle_denoiser_recovers_the_volume():
    g = torch.Generator().manual_seed(0)
    truth = torch.rand(1, 3, 8, 8, generator=g, dtype=torch.float64)
    A = radon_matrix(8, view_angles(4))
    y = truth.reshape(1, 3, -1) @ A.T
    oracle = lambda x, s, i: truth  # noqa: E731
    out = dds_sample(oracle, lambda d: data_consistency(A, y, d, 0.1, 3), torch.randn(
        truth.shape, generator=g, dtype=torch.float64) * 5, karras_sigmas(5, 0.01, 5.0))
    assert (out - truth).abs().max() < 1e-8


def test_slice_denoise_and_errors():
    net = lambda x, s: 2 * x  # noqa: E731
    x = torch.ones(2, 3, 4, 4)
    assert torch.equal(slice_denoise(net, x, 1.0), 2 * x)
    with pytest.raises(ValueError, match="offset"):
        slab_partition(6, 3, 3)
    with pytest.raises(ValueError, match="width"):
        slab_partition(2, 3, 0)
    with pytest.raises(ValueError, match="sigmas"):
        dds_sample(lambda x, s, i: x, lambda d: d, x, torch.tensor([1.0, 0.5]))
