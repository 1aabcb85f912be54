r"""PointBlob: a batched toy environment whose state is drawn as a small grey-scale frame.

The state is a position :math:`p\in[-1,1]^2` and a shape parameter (elongation)
:math:`e\in[-1,1]`. An action :math:`a\in[-1,1]^3` moves and reshapes the blob,

.. math:: p_{t+1}=\mathrm{clip}(p_t+\Delta\,a_{1:2},-1,1),\qquad
          e_{t+1}=\mathrm{clip}(e_t+\Delta\,a_3,-1,1),

with actions clipped to :math:`[-1,1]` first. Episodes last ``horizon`` steps and start at
:math:`p_0\sim U[-s,s]^2`, :math:`e_0=0`.

**Rendering** (:func:`render_blobs`). A frame of ``size`` x ``size`` pixels covers
:math:`[-1,1]^2` (pixel centres :math:`-1+(2i+1)/\text{size}`; row 0 is the top, :math:`y=+1`).
Pixel :math:`(u,v)` takes the value

.. math:: x_{uv}=2\exp\!\Big(-\tfrac{(u-p_1)^2}{2\sigma^2e^{e}}-\tfrac{(v-p_2)^2}{2\sigma^2e^{-e}}\Big)-1
          \in[-1,1],

a Gaussian blob of width ``sigma`` whose axes have ratio :math:`e^{e}` (so :math:`e=0` is round
and its area does not change with :math:`e`).

**Regions** (the "text prompts"). :data:`REGIONS` names the four quadrants; :func:`region_of`
gives the quadrant index of a position (ties at 0 go to the right / top), and
:data:`PROMPTS` their captions. A frame is labelled with the region its blob centre lies in.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["REGIONS", "PROMPTS", "region_of", "render_blobs", "PointBlob"]

# quadrant centres, in the order of the prompts: (x sign, y sign)
REGIONS = ((-1, 1), (1, 1), (-1, -1), (1, -1))
PROMPTS = ("a blob in the top-left", "a blob in the top-right", "a blob in the bottom-left",
           "a blob in the bottom-right")


def region_of(p: torch.Tensor) -> torch.Tensor:
    """The quadrant index (0..3, in the order of :data:`REGIONS`) of positions ``p`` (..., 2)."""
    if p.shape[-1] != 2:
        raise ValueError(f"positions must have a last axis of 2, got shape {tuple(p.shape)}")
    right = (p[..., 0] >= 0).long()
    bottom = (p[..., 1] < 0).long()
    return 2 * bottom + right


def render_blobs(p: torch.Tensor, e: torch.Tensor, size: int, sigma: float = 0.25) -> torch.Tensor:
    """Frames (..., size, size) in [-1, 1] of blobs at positions ``p`` (..., 2) with elongations
    ``e`` (...) (see the module docstring)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 2:
        raise ValueError(f"size must be an int >= 2, got {size!r}")
    if sigma <= 0:
        raise ValueError(f"sigma must be positive, got {sigma}")
    if p.shape[-1] != 2 or p.shape[:-1] != e.shape:
        raise ValueError(f"p must have shape (..., 2) and e the shape (...), got {tuple(p.shape)} "
                         f"and {tuple(e.shape)}")
    c = -1 + (2 * torch.arange(size, dtype=p.dtype) + 1) / size
    xs, ys = c, c.flip(0)                      # columns left to right, rows top to bottom
    dx = xs - p[..., 0, None]                  # (..., size)
    dy = ys - p[..., 1, None]
    sx2 = (sigma ** 2 * torch.exp(e))[..., None]
    sy2 = (sigma ** 2 * torch.exp(-e))[..., None]
    g = torch.exp(-dy[..., :, None] ** 2 / (2 * sy2[..., None])
                  - dx[..., None, :] ** 2 / (2 * sx2[..., None]))
    return 2 * g - 1


@dataclass(frozen=True)
class PointBlob:
    """The task's constants; :meth:`reset` and :meth:`step` work on any batch of states."""
    horizon: int = 20
    step_size: float = 0.1
    start_spread: float = 0.2

    def __post_init__(self):
        if isinstance(self.horizon, bool) or not isinstance(self.horizon, int) or self.horizon < 1:
            raise ValueError(f"horizon must be an int >= 1, got {self.horizon!r}")
        if not self.step_size > 0 or not 0 <= self.start_spread <= 1:
            raise ValueError(f"need step_size > 0 and 0 <= start_spread <= 1, got "
                             f"{self.step_size}, {self.start_spread}")

    def reset(self, shape: tuple, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Start states ``(p, e)`` of a batch of the given shape: p (*shape, 2), e (*shape)."""
        p = (torch.rand(*shape, 2, generator=generator) * 2 - 1) * self.start_spread
        return p, torch.zeros(shape)

    def step(self, p: torch.Tensor, e: torch.Tensor, a: torch.Tensor):
        """The next states for actions ``a`` (..., 3) (clipped to [-1, 1])."""
        if a.shape[-1] != 3 or a.shape[:-1] != e.shape or p.shape[:-1] != e.shape:
            raise ValueError(f"need p (..., 2), e (...), a (..., 3) with one batch shape, got "
                             f"{tuple(p.shape)}, {tuple(e.shape)}, {tuple(a.shape)}")
        a = a.clamp(-1, 1)
        return ((p + self.step_size * a[..., :2]).clamp(-1, 1),
                (e + self.step_size * a[..., 2]).clamp(-1, 1))
