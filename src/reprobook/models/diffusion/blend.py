r"""DiffusionBlend's score blending over shifting slab partitions, the slice-wise 2-D prior it is
compared with, and the decomposed (DDS-type) posterior sampler both run inside.

**Slab partitions.** A volume of ``Z`` axial slices is cut into slabs of ``k`` adjacent slices whose
boundaries start at an offset :math:`o\in\{0,\dots,k-1\}`: slabs begin at
:math:`z=o-k,\,o,\,o+k,\dots` (:func:`slab_partition`). Indices that fall outside :math:`[0,Z)` are
reflected back (:math:`-1\to1`, :math:`Z\to Z-2`), so every slab is full, and every slice is
*owned* by exactly one slab (the one where it is not a reflected copy).

**Blended denoiser.** The 3-D-patch prior approximates the score of the whole volume by the sum of
its slabs' scores, :math:`\nabla\log p(x)\approx\sum_j\nabla\log p(x_{S_j}\mid \mathrm{pos}_j)`. With a
partition the slabs are disjoint, so the volume's denoiser is the slabs' denoisers put side by side
(:func:`blended_denoise`), each slice taking the output of the slab that owns it. DiffusionBlend moves
the partition at every sampling step (offset :math:`o_i=i \bmod k`), so no slice stays at a slab
boundary and information crosses boundaries over the course of sampling. The *position* of a slab is
its centre's z-location mapped to :math:`[-1,1]`.

**Slice-wise prior.** :func:`slice_denoise` applies a 2-D denoiser to every axial slice
independently: the baseline's prior, which knows nothing about neighbouring slices.

**Sampler** (:func:`dds_sample`, VE/EDM parametrisation, deterministic DDIM): at level
:math:`\sigma_i`, denoise :math:`\hat x_0=D(x_i,\sigma_i)`, make it consistent with the measurements
:math:`\hat x_0'=\mathrm{DC}(\hat x_0)` (a few CG steps, :mod:`reprobook.imaging.data_consistency`),
and step :math:`x_{i+1}=\hat x_0'+\tfrac{\sigma_{i+1}}{\sigma_i}(x_i-\hat x_0)` (the denoised estimate
moved, the noise estimate kept). The last step (:math:`\sigma_N=0`) returns :math:`\hat x_0'`.
"""
from __future__ import annotations

from typing import Callable

import torch

__all__ = ["slab_partition", "slab_positions", "blended_denoise", "slice_denoise", "dds_sample",
           "offset_schedule", "random_slabs"]


def _reflect(i: int, z: int) -> int:
    if i < 0:
        return -i
    if i >= z:
        return 2 * (z - 1) - i
    return i


def slab_partition(z: int, width: int, offset: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Slab indices (S, width) of a ``z``-slice volume, boundaries at ``offset`` mod ``width``, and a
    boolean mask (S, width) of the entries that own their slice (False for reflected copies)."""
    if width < 1 or z < width or (width > 1 and z < 2):
        raise ValueError(f"need 1 <= width <= z, got width={width}, z={z}")
    if not 0 <= offset < width:
        raise ValueError(f"offset must be in [0, {width}), got {offset}")
    first = offset - width if offset > 0 else 0
    starts = range(first, z, width)
    raw = torch.tensor([[s + j for j in range(width)] for s in starts])
    own = (raw >= 0) & (raw < z)
    idx = raw.clone().apply_(lambda i: _reflect(i, z))
    return idx, own


def slab_positions(z: int, width: int, offset: int) -> torch.Tensor:
    """Normalised z-location in [-1, 1] (beyond at the padded ends) of each slab's centre."""
    first = offset - width if offset > 0 else 0
    centres = torch.arange(first, z, width, dtype=torch.float64) + (width - 1) / 2
    return 2 * centres / max(z - 1, 1) - 1


def offset_schedule(n_steps: int, width: int, shift: bool = True) -> list[int]:
    """The partition offset at each step: ``i mod width`` (DiffusionBlend) or always 0 (fixed)."""
    return [(i % width) if shift else 0 for i in range(n_steps)]


def blended_denoise(net, x: torch.Tensor, sigma: float, offset: int) -> torch.Tensor:
    """The volume denoiser of a slab prior ``net`` (``channels`` = slab width, position-aware)
    on volumes ``x`` (V, Z, n, n) for the partition at ``offset``."""
    if x.ndim != 4:
        raise ValueError(f"x must have shape (V, Z, n, n), got {tuple(x.shape)}")
    v, z, n = x.shape[0], x.shape[1], x.shape[-1]
    k = net.channels
    idx, own = slab_partition(z, k, offset)
    s = idx.shape[0]
    slabs = x[:, idx.reshape(-1)].reshape(v * s, k, n, n)
    pos = slab_positions(z, k, offset).to(x.dtype).repeat(v) if net.position else None
    out = net(slabs, sigma, pos) if pos is not None else net(slabs, sigma)
    out = out.reshape(v, s * k, n, n)
    flat_idx, flat_own = idx.reshape(-1), own.reshape(-1)
    d = torch.empty_like(x)
    d[:, flat_idx[flat_own]] = out[:, flat_own]
    return d


def slice_denoise(net, x: torch.Tensor, sigma: float) -> torch.Tensor:
    """A 2-D denoiser (``channels=1``) applied to every axial slice of ``x`` (V, Z, n, n)."""
    if x.ndim != 4:
        raise ValueError(f"x must have shape (V, Z, n, n), got {tuple(x.shape)}")
    v, z, n = x.shape[0], x.shape[1], x.shape[-1]
    return net(x.reshape(v * z, 1, n, n), sigma).reshape(x.shape)


@torch.no_grad()
def dds_sample(denoise: Callable[[torch.Tensor, float, int], torch.Tensor],
               dc: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
               sigmas: torch.Tensor) -> torch.Tensor:
    """Posterior sampling by denoise -> data consistency -> DDIM step (module docstring).

    ``denoise(x, sigma, step)`` is the prior's denoiser (it may depend on the step, e.g. through the
    partition offset), ``dc`` the data-consistency map, ``x`` the start at level ``sigmas[0]``."""
    if sigmas.ndim != 1 or len(sigmas) < 2 or float(sigmas[-1]) != 0.0:
        raise ValueError("sigmas must be a 1-d decreasing grid ending in 0")
    for i, (s, s_next) in enumerate(zip(sigmas[:-1].tolist(), sigmas[1:].tolist())):
        d = denoise(x, s, i)
        d_dc = dc(d)
        x = d_dc + (s_next / s) * (x - d)
    return x


def random_slabs(volumes: torch.Tensor, width: int, count: int,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` training slabs (count, width, n, n) from ``volumes`` (V, Z, n, n) with their
    positions: a random volume and a random start in ``[-(width-1), Z-1]``, indices reflected at the
    ends exactly as in :func:`slab_partition`, so the prior sees the edge slabs the sampler makes."""
    if volumes.ndim != 4:
        raise ValueError(f"volumes must have shape (V, Z, n, n), got {tuple(volumes.shape)}")
    v, z = volumes.shape[:2]
    if not 1 <= width <= z:
        raise ValueError(f"need 1 <= width <= Z, got width={width}, Z={z}")
    vi = torch.randint(v, (count,), generator=generator)
    start = torch.randint(-(width - 1), z, (count,), generator=generator)
    raw = start[:, None] + torch.arange(width)[None]
    idx = torch.where(raw < 0, -raw, torch.where(raw >= z, 2 * (z - 1) - raw, raw))
    slabs = volumes[vi[:, None], idx]
    pos = 2 * (start.to(volumes.dtype) + (width - 1) / 2) / max(z - 1, 1) - 1
    return slabs, pos
