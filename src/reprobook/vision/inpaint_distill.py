r"""Erase-then-replace by distilling per-view 2-D inpaintings into a masked 3-D voxel field (RAM3D's mechanism).

The pieces, on top of :mod:`reprobook.render.voxel_field`:

* :func:`textured_scene` -- a small room as voxel grids: a floor and two walls carrying real
  photographs from ``skimage.data`` as textures, a textured cube (the object to erase) and, for
  the replace stage, a textured sphere inside the cube's footprint. It returns the original scene,
  the ground-truth background (cube removed) and the ground-truth edited scene (sphere in its place).
* :func:`bubble_mask` -- the 3-D mask: the voxels of the object's bounding box dilated by a
  margin. Only these voxels are ever optimised (RAM3D's "Bubble-NeRF").
* :class:`ViewInpainter` -- the stand-in for a text-conditioned 2-D inpainting model. Outside the
  2-D mask it returns the view unchanged; inside it returns the ground truth, moved by a shift and
  coloured by a smooth perturbation that are **fixed per view** (each view's inpainter
  "hallucinates" its own variant), plus a smaller smooth perturbation **redrawn at every call**
  (the sampling noise of a diffusion prior). The two scales are separate because only the second
  averages out when one view is queried many times; the first only averages out across views.
* :func:`distill` -- Adam on the bubble voxels only, against freshly drawn inpaintings of a few
  random views per step, with a squared loss over the bubble's 2-D footprint: the edit mask plus
  the halo around it, whose target is the unchanged view (RAM3D's halo of context). ``mode="erase"``
  replaces the bubble voxels by a field learnt from scratch; ``mode="replace"`` adds a foreground
  field inside the bubble over a frozen (erased) background, composited by density:
  :math:`\sigma=\sigma_b+\sigma_f`, :math:`c=(\sigma_bc_b+\sigma_fc_f)/\sigma`.
  Every voxel outside the bubble is returned bit-identical (``torch.where``, not a masked update).
  ``per_view=True`` is the control that removes the shared 3-D field: one field per view, each
  fitted to its own view's inpaintings only.
* :func:`inconsistency` -- the cross-view metric: warp view *i*'s image into view *j* with the
  ground-truth depth and poses, and average :math:`|I_j-\mathrm{warp}(I_i)|` over co-visible pixels
  of *j*'s edit region, both directions, over pairs of neighbouring views.
* :func:`region_psnr` -- PSNR pooled over the pixels of a region.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from reprobook.render.voxel_field import camera_rays, render, render_rays, voxel_coords, warp

__all__ = ["textured_scene", "bubble_mask", "silhouette", "dilate", "ViewInpainter", "distill",
           "inconsistency", "region_psnr", "activate"]

_TEXTURES = {"floor": "brick", "wall_x": "gravel", "wall_y": "coffee", "cube": "chelsea",
             "sphere": "astronaut"}


def _texture(name: str, size: int, rng: np.random.Generator, tint=None) -> torch.Tensor:
    """A random crop of ``skimage.data.<name>`` resized to (3, size, size) in [0, 1]."""
    import skimage.data
    img = np.asarray(getattr(skimage.data, name)(), dtype=np.float64) / 255.0
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, -1)
    h, w = img.shape[:2]
    c = int(min(h, w) * rng.uniform(0.5, 0.8))
    i, j = rng.integers(0, h - c + 1), rng.integers(0, w - c + 1)
    x = torch.from_numpy(img[i:i + c, j:j + c, :3]).permute(2, 0, 1)[None].float()
    x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)[0]
    if tint is not None:
        x = x * torch.as_tensor(tint, dtype=x.dtype)[:, None, None]
    return x.clamp(0, 1)


def _lookup(tex: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # colour of texture tex (3, T, T) at coordinates a, b in [-1, 1] (nearest texel): (..., 3)
    T = tex.shape[-1]
    ia = ((a + 1) / 2 * (T - 1)).round().long().clamp(0, T - 1)
    ib = ((b + 1) / 2 * (T - 1)).round().long().clamp(0, T - 1)
    return tex[:, ia, ib].movedim(0, -1)


def textured_scene(res: int, rng: np.random.Generator, density: float = 30.0,
                   cube_half: float = 0.22, floor_z: float = -0.5) -> dict:
    """The room at resolution ``res``: grids (4, R, R, R) ``original``, ``background``, ``edited``,
    ``cube`` and ``sphere`` (the objects alone), and the cube's box ``(lo, hi)`` in world units.

    Textures are random crops (drawn from ``rng``) of skimage's bundled photographs, so two
    replicates see different surfaces. The sphere lies inside the cube's box, so the edit mask of
    the cube also covers the new object."""
    if res < 8:
        raise ValueError(f"res must be at least 8 for the room to be resolved, got {res}")
    X = voxel_coords(res)
    x, y, z = X[..., 0], X[..., 1], X[..., 2]
    tex = {k: _texture(v, res, rng) for k, v in _TEXTURES.items()}
    # a red object: the photograph's detail on a bright red base
    tex["sphere"] = (0.5 + 0.5 * tex["sphere"]) * torch.tensor([1.0, 0.35, 0.3])[:, None, None]

    def grid(occ, colour):
        g = torch.zeros(4, res, res, res)
        g[0] = density * occ.float()
        g[1:] = (colour * occ[..., None].float()).movedim(-1, 0)
        return g

    h = 2.0 / (res - 1)
    floor = (z <= floor_z) & (z > floor_z - h)      # one voxel layer thick: a hole in it shows
    wall_x, wall_y = x <= -0.8, y <= -0.8
    room_col = torch.where(wall_x[..., None], _lookup(tex["wall_x"], -z, y),
                           torch.where(wall_y[..., None], _lookup(tex["wall_y"], -z, x),
                                       _lookup(tex["floor"], y, x)))
    room = grid(floor | wall_x | wall_y, room_col)
    lo = torch.tensor([-cube_half, -cube_half, floor_z])
    hi = torch.tensor([cube_half, cube_half, floor_z + 2 * cube_half])
    cube_occ = ((X > lo) & (X <= hi)).all(-1) & ~floor
    cube_col = 0.5 * (_lookup(tex["cube"], -z * 2, x * 2) + _lookup(tex["cube"], -z * 2, y * 2))
    cube = grid(cube_occ, cube_col)
    centre = (lo + hi) / 2
    r = (X - centre).norm(dim=-1)
    sph_occ = (r <= cube_half) & ~floor
    az = torch.atan2(y - centre[1], x - centre[0]) / torch.pi
    sphere = grid(sph_occ, _lookup(tex["sphere"], -(z - centre[2]) / cube_half, az))

    def over(a, b):      # b's voxels replace a's where b is occupied
        return torch.where(b[:1] > 0, b, a)

    return {"original": over(room, cube), "background": room, "edited": over(room, sphere),
            "cube": cube, "sphere": sphere, "box": (lo, hi)}


def bubble_mask(res: int, lo, hi, margin: float) -> torch.Tensor:
    """Boolean (R, R, R): voxels whose centre lies in the box ``[lo - margin, hi + margin]``."""
    if margin < 0:
        raise ValueError(f"margin must be non-negative, got {margin}")
    X = voxel_coords(res)
    lo, hi = torch.as_tensor(lo) - margin, torch.as_tensor(hi) + margin
    return ((X >= lo) & (X <= hi)).all(-1)


def dilate(mask: torch.Tensor, px: int) -> torch.Tensor:
    """Square dilation of a boolean (V, 1, H, W) mask by ``px`` pixels."""
    if px <= 0:
        return mask.clone()
    return F.max_pool2d(mask.float(), 2 * px + 1, stride=1, padding=px) > 0


def silhouette(occupancy: torch.Tensor, c2w, K, height, width, n_samples, threshold=0.5):
    """2-D masks (V, 1, H, W) where a boolean (R, R, R) occupancy renders opaque above ``threshold``."""
    g = torch.zeros((4,) + tuple(occupancy.shape))
    g[0] = 50.0 * occupancy.float()
    return render(g, c2w, K, height, width, n_samples)["opacity"] > threshold


def _smooth(n, h, w, amp, gen, coarse=3):
    # a smooth colour perturbation: uniform(-1, 1) on a coarse grid, bicubic up to (h, w), times amp
    c = torch.rand(n, 3, coarse, coarse, generator=gen) * 2 - 1
    return amp * F.interpolate(c, size=(h, w), mode="bicubic", align_corners=True)


def _shift(img, dx, dy):
    # move an image by integer pixels, repeating the border (no wrap-around)
    p = max(abs(dx), abs(dy))
    if p == 0:
        return img
    x = F.pad(img, (p, p, p, p), mode="replicate")
    H, W = img.shape[-2:]
    return x[..., p - dy:p - dy + H, p - dx:p - dx + W]


class ViewInpainter:
    """The per-view 2-D inpainting prior (a stand-in for a diffusion inpainter).

    ``truth`` (V, 3, H, W) is what the inpainter aims at, ``views`` the images it edits, ``mask``
    (V, 1, H, W) the edit region. A call for view v returns
    ``views[v]`` outside the mask and ``clip(shift_v(truth[v]) + b_v + e)`` inside, where the shift
    (``|dx|, |dy| <= max_shift`` px) and the smooth field ``b_v`` (amplitude ``bias_amp``) are
    drawn once per view from ``gen`` and ``e`` (amplitude ``noise_amp``) is redrawn at every call."""

    def __init__(self, truth, views, mask, bias_amp: float, noise_amp: float, max_shift: int,
                 gen: torch.Generator):
        if truth.shape != views.shape or truth.ndim != 4 or truth.shape[1] != 3:
            raise ValueError(f"truth and views must both be (V, 3, H, W), got {tuple(truth.shape)}, "
                             f"{tuple(views.shape)}")
        if mask.shape != (truth.shape[0], 1) + truth.shape[2:]:
            raise ValueError(f"mask must be (V, 1, H, W) = {(truth.shape[0], 1) + truth.shape[2:]}, "
                             f"got {tuple(mask.shape)}")
        if min(bias_amp, noise_amp, max_shift) < 0:
            raise ValueError("bias_amp, noise_amp and max_shift must be non-negative")
        V, _, H, W = truth.shape
        self.views, self.mask, self.noise_amp = views, mask, noise_amp
        shifts = torch.randint(-max_shift, max_shift + 1, (V, 2), generator=gen)
        self.target = torch.stack([_shift(truth[v], int(shifts[v, 0]), int(shifts[v, 1]))
                                   for v in range(V)]) + _smooth(V, H, W, bias_amp, gen)

    def __call__(self, idx, gen: torch.Generator) -> torch.Tensor:
        idx = torch.as_tensor(idx)
        t = self.target[idx] + _smooth(len(idx), *self.target.shape[2:], self.noise_amp, gen)
        return torch.where(self.mask[idx], t.clamp(0, 1), self.views[idx])

    def average(self, n_calls: int, gen: torch.Generator) -> torch.Tensor:
        """The per-view mean of ``n_calls`` inpaintings of every view (the strong 2-D baseline)."""
        if n_calls < 1:
            raise ValueError(f"n_calls must be positive, got {n_calls}")
        idx = torch.arange(self.target.shape[0])
        return sum(self(idx, gen) for _ in range(n_calls)) / n_calls


def activate(p: torch.Tensor, density_scale: float) -> torch.Tensor:
    """Raw parameters (..., 4, R, R, R) to a field: softplus density times ``density_scale``, sigmoid colour."""
    return torch.cat([F.softplus(p[..., :1, :, :, :]) * density_scale, torch.sigmoid(p[..., 1:, :, :, :])],
                     dim=-4)


def _adam_step(p, g, m1, m2, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    # Adam (Kingma & Ba) in place; written out because torch.optim's first step imports
    # torch._dynamo, seconds of start-up that a smoke run cannot afford
    m1.mul_(b1).add_(g, alpha=1 - b1)
    m2.mul_(b2).addcmul_(g, g, value=1 - b2)
    p.sub_(lr * (m1 / (1 - b1 ** t)) / ((m2 / (1 - b2 ** t)).sqrt() + eps))


def _compose(base, free, p, mode, density_scale):
    f = activate(p, density_scale)
    if mode == "erase":
        inside = f
    else:       # replace: the foreground over the frozen background, mixed by density
        sb, sf = base[..., :1, :, :, :], f[..., :1, :, :, :]
        s = sb + sf
        col = (sb * base[..., 1:, :, :, :] + sf * f[..., 1:, :, :, :]) / s.clamp_min(1e-8)
        inside = torch.cat([s, col], dim=-4)
    return torch.where(free, inside, base)


def distill(base: torch.Tensor, free: torch.Tensor, inpainter: ViewInpainter, c2w, K, height: int,
            width: int, n_samples: int, loss_mask: torch.Tensor, steps: int, lr: float,
            views_per_step: int, gen: torch.Generator, mode: str = "erase", per_view: bool = False,
            density_scale: float = 40.0, init_density: float = 2.0) -> dict:
    """Fit the bubble voxels ``free`` (R, R, R) of ``base`` (4, R, R, R) to the inpainter's views.

    Each step draws ``views_per_step`` random training views (all views, one per field, when
    ``per_view``), asks the inpainter for a fresh edit of each, renders them, and takes an Adam
    step on the mean squared error over ``loss_mask`` (V, 1, H, W). The bubble starts as a faint
    grey fog (density ``init_density``): from a near-zero density the softplus needs tens of Adam
    steps before a surface can form, which short schedules cannot afford. Returns ``grid`` ((4, R, R, R), or (V, 4, R, R, R) per view)
    and the per-step ``loss``."""
    if mode not in ("erase", "replace"):
        raise ValueError(f"unknown mode {mode!r}; use 'erase' or 'replace'")
    if base.ndim != 4 or base.shape[0] != 4 or free.shape != base.shape[1:] or free.dtype != torch.bool:
        raise ValueError(f"base must be (4, R, R, R) and free a bool (R, R, R), got "
                         f"{tuple(base.shape)}, {tuple(free.shape)} {free.dtype}")
    V = c2w.shape[0]
    if loss_mask.shape != (V, 1, height, width):
        raise ValueError(f"loss_mask must be {(V, 1, height, width)}, got {tuple(loss_mask.shape)}")
    if not 1 <= views_per_step <= V:
        raise ValueError(f"views_per_step must be in [1, {V}], got {views_per_step}")
    raw0 = float(np.log(np.expm1(init_density / density_scale)))
    shape = ((V,) if per_view else ()) + tuple(base.shape)
    p = torch.zeros(shape)
    p[..., 0, :, :, :] = raw0
    p.requires_grad_(True)
    m1, m2 = torch.zeros_like(p), torch.zeros_like(p)
    # only the rays of the loss region are marched: the others carry no gradient
    o, d, _ = camera_rays(c2w.to(base.dtype), K, height, width)
    o, d, lm = o.reshape(V, -1, 3), d.reshape(V, -1, 3), loss_mask.reshape(V, -1)
    rays = [lm[v].nonzero()[:, 0] for v in range(V)]
    n_max = max(len(r) for r in rays)
    if n_max == 0:
        raise ValueError("loss_mask is empty")
    # per view: the region's pixel indices, padded to n_max with weight 0
    pix = torch.stack([torch.cat([r, r.new_zeros(n_max - len(r))]) for r in rays])
    wts = torch.stack([(torch.arange(n_max) < len(r)).float() for r in rays])
    losses = []
    for _ in range(steps):
        idx = torch.arange(V) if per_view else torch.randperm(V, generator=gen)[:views_per_step]
        target = inpainter(idx, gen).reshape(len(idx), 3, -1)
        tgt = torch.gather(target, 2, pix[idx][:, None].expand(-1, 3, -1)).transpose(1, 2)
        ro = torch.gather(o[idx], 1, pix[idx][..., None].expand(-1, -1, 3))
        rd = torch.gather(d[idx], 1, pix[idx][..., None].expand(-1, -1, 3))
        w = wts[idx]
        if not per_view:
            ro, rd = ro.reshape(1, -1, 3), rd.reshape(1, -1, 3)
        grid = _compose(base, free, p, mode, density_scale)
        img = render_rays(grid, ro, rd, n_samples)["rgb"].reshape(tgt.shape)
        loss = (((img - tgt) ** 2).sum(-1) * w).sum() / (3 * w.sum())
        (g,) = torch.autograd.grad(loss, p)
        with torch.no_grad():
            _adam_step(p, g, m1, m2, len(losses) + 1, lr)
        losses.append(loss.item())
    with torch.no_grad():
        grid = _compose(base, free, p, mode, density_scale)
    return {"grid": grid, "loss": np.array(losses)}


def inconsistency(images: torch.Tensor, depth: torch.Tensor, c2w, K, region: torch.Tensor,
                  pairs, tol: float = 0.05) -> float:
    """Mean |I_j - warp(I_i)| over co-visible pixels of ``region`` (V, 1, H, W) in view j, over
    ``pairs`` (i, j) in both directions, with the ground-truth ``depth`` (V, 1, H, W)."""
    if images.ndim != 4 or depth.shape != (images.shape[0], 1) + images.shape[2:]:
        raise ValueError(f"images must be (V, C, H, W) and depth (V, 1, H, W), got "
                         f"{tuple(images.shape)}, {tuple(depth.shape)}")
    pairs = [(i, j) for a, b in pairs for i, j in ((a, b), (b, a))]
    if not pairs:
        raise ValueError("no view pairs given")
    src = torch.tensor([i for i, _ in pairs])
    dst = torch.tensor([j for _, j in pairs])
    w, ok = warp(images[src], depth[dst], c2w[src], c2w[dst], K, depth_src=depth[src], tol=tol)
    sel = (ok & region[dst]).expand_as(w)
    if sel.sum() == 0:
        raise ValueError("no co-visible pixels in the region for these pairs")
    return float((w - images[dst]).abs()[sel].mean())


def region_psnr(x: torch.Tensor, ref: torch.Tensor, region: torch.Tensor) -> float:
    """PSNR (dB, data range 1) of ``x`` against ``ref`` (V, C, H, W), pooled over ``region`` (V, 1, H, W)."""
    if x.shape != ref.shape or region.shape != (x.shape[0], 1) + x.shape[2:]:
        raise ValueError(f"x, ref must match and region be (V, 1, H, W), got {tuple(x.shape)}, "
                         f"{tuple(ref.shape)}, {tuple(region.shape)}")
    sel = region.expand_as(x)
    if sel.sum() == 0:
        raise ValueError("empty region")
    mse = float(((x - ref) ** 2)[sel].mean())
    return 10 * np.log10(1.0 / max(mse, 1e-20))
