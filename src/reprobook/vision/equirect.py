"""Perspective views cut from 360° (equirectangular) frames, and the mining of corresponding view
pairs from 360° videos by free rotation.

**Resampling.** A pinhole view of ``S x S`` pixels, field of view ``F``, yaw ``psi`` and pitch
``theta`` has, at pixel ``(i, j)``, the world ray ``d = R(psi, theta) normalize(x, y, 1)`` (camera
model and conventions of :mod:`reprobook.render.ray_cast`). The ray's longitude and latitude
``(atan2(d_x, d_z), asin(d_y))`` give a continuous position in the panorama, which is read by
bilinear interpolation (``grid_sample``) with the longitude wrapped around the ±180° seam (one
column of circular padding on each side) and the latitude clamped at the poles. ``ss`` > 1 averages
``ss x ss`` sub-pixel rays per output pixel, the same box filter the renderer uses.

**Correspondences with known geometry.** With the depth of view A (distance along each pixel ray)
a pixel's surface point is ``P = c_A + depth * d``; projecting ``P`` into view B gives its pixel
there, and the match is kept when ``P`` lies in front of B, inside its image, and is *visible*:
``|P - c_B|`` is at most ``(1 + tol)`` times the largest of B's depths at the four pixel centres
around that pixel (otherwise something nearer occludes it). The *overlap* of a pair is the share of A's pixels with a kept match.

**Mining by rotation** (the paper's use of a 360° camera's rotational freedom, here in its simplest
form): for a view at yaw ``psi_A`` in frame ``t``, search ``n_yaws`` yaws of frame ``t + Delta`` for
the crop that best matches it by normalised cross-correlation (NCC), with no geometry at all. The
ground truth it is judged against is the yaw, in frame ``t + Delta``, of the surface point that A's
centre ray hits.

**Pair selection.** Candidate pairs ``(frame t, yaw psi_A) -> (frame t + Delta, yaw psi_B)`` are kept
when their overlap is at least ``min_overlap``; a mined training set then draws the same number of
pairs from each turn-angle bin (turn = ``|psi_B - psi_A|`` wrapped to [0, pi]), while a forward-only
("standard video") set has the camera locked to the direction of travel, so its turn angles are
only what the trajectory itself turned.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from reprobook.render.ray_cast import (direction_to_equirect, pinhole_directions, random_room,
                                       random_walk, render_equirect, rotation)


def _batched(pano: torch.Tensor):
    if pano.dim() == 3:
        return pano[None], True
    if pano.dim() == 4:
        return pano, False
    raise ValueError(f"panorama must be (C, H, W) or (B, C, H, W), got shape {tuple(pano.shape)}")


def perspective_from_equirect(pano: torch.Tensor, yaw, pitch=0.0, fov: float = math.pi / 2,
                              size: int = 32, ss: int = 1, mode: str = "bilinear") -> torch.Tensor:
    """Pinhole views ``(B, C, size, size)`` (or ``(C, size, size)`` for one unbatched panorama) cut
    from equirectangular panoramas ``(B, C, H, 2H)``. ``yaw``, ``pitch``: radians, a float or one
    per panorama. ``mode``: ``"bilinear"`` for images, ``"nearest"`` for depth maps (interpolating
    across a depth edge invents surfaces). Yaw and pitch are in the panorama's own frame."""
    x, single = _batched(pano)
    B, C, H, W = x.shape
    if W != 2 * H:
        raise ValueError(f"an equirectangular panorama has width 2 x height, got {H} x {W}")
    if mode not in ("bilinear", "nearest"):
        raise ValueError(f"mode must be 'bilinear' or 'nearest', got {mode!r}")
    yaw = torch.as_tensor(yaw, dtype=torch.float32).expand(B)
    pitch = torch.as_tensor(pitch, dtype=torch.float32).expand(B)
    d = pinhole_directions(size, fov, ss)                                   # (S, S, ss2, 3)
    R = rotation(yaw, pitch)                                                # (B, 3, 3)
    dw = torch.einsum("bkc,ijsc->bijsk", R, d)                              # world rays
    u, v = direction_to_equirect(dw, H)
    padded = torch.cat([x[..., -1:], x, x[..., :1]], dim=-1)                # wrap the seam
    gx = 2 * (u + 1) / (W + 2) - 1
    gy = 2 * v / H - 1
    n2 = d.shape[2]
    grid = torch.stack([gx, gy], -1).reshape(B, size, size * n2, 2)
    out = F.grid_sample(padded, grid, mode=mode, padding_mode="border", align_corners=False)
    out = out.view(B, C, size, size, n2).mean(-1)
    return out[0] if single else out


def ncc(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Normalised cross-correlation of images, over all but the first axis (broadcast): the
    Pearson correlation of their pixel values, in [-1, 1]."""
    a = a.flatten(1) - a.flatten(1).mean(1, keepdim=True)
    b = b.flatten(1) - b.flatten(1).mean(1, keepdim=True)
    return (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1) + 1e-8)


def heading_search(pano_a: torch.Tensor, yaw_a: float, pano_b: torch.Tensor, n_yaws: int = 72,
                   fov: float = math.pi / 2, size: int = 32):
    """Mine the view of ``pano_b`` that corresponds to the view of ``pano_a`` at ``yaw_a`` by
    searching ``n_yaws`` equally spaced yaws (pitch 0) for the highest NCC. Returns
    ``(best yaw in (-pi, pi], scores (n_yaws,), yaws (n_yaws,))``."""
    if n_yaws < 2:
        raise ValueError(f"n_yaws must be >= 2, got {n_yaws}")
    crop = perspective_from_equirect(pano_a, yaw_a, 0.0, fov, size)
    yaws = torch.arange(n_yaws, dtype=torch.float32) * (2 * math.pi / n_yaws) - math.pi
    crops = perspective_from_equirect(pano_b[None].expand(n_yaws, -1, -1, -1), yaws, 0.0, fov, size)
    scores = ncc(crops, crop[None])
    return float(yaws[int(scores.argmax())]), scores, yaws


def wrap(angle):
    """Angles wrapped to (-pi, pi]."""
    a = torch.as_tensor(angle, dtype=torch.float32)
    return torch.atan2(torch.sin(a), torch.cos(a))


def correspondences(depth_a: torch.Tensor, pos_a, yaw_a, pitch_a, pos_b, yaw_b, pitch_b,
                    depth_b: torch.Tensor, fov: float = math.pi / 2, tol: float = 0.05):
    """Pixel matches from view A to view B given both views' depth maps ``(S, S)`` (or batches
    ``(B, S, S)`` with poses ``(B, 3)`` and angles ``(B,)``). Returns ``(row_b, col_b, valid)`` of
    the depth maps' shape: where A's pixel lands in B (continuous pixel coordinates) and whether it
    is in front of B, inside its image and not occluded there."""
    single = depth_a.dim() == 2
    da, db = (depth_a[None], depth_b[None]) if single else (depth_a, depth_b)
    if da.dim() != 3 or da.shape != db.shape or da.shape[1] != da.shape[2]:
        raise ValueError(f"depth maps must be (S, S) or (B, S, S), square and of equal shape, got "
                         f"{tuple(depth_a.shape)} and {tuple(depth_b.shape)}")
    n, S = da.shape[0], da.shape[1]

    def per(x, k):
        return torch.as_tensor(x, dtype=torch.float32).reshape(-1, *k).expand(n, *k)

    pa, pb = per(pos_a, (3,)), per(pos_b, (3,))
    Ra = rotation(per(yaw_a, ()), per(pitch_a, ()))
    Rb = rotation(per(yaw_b, ()), per(pitch_b, ()))
    d = torch.einsum("bkc,ijc->bijk", Ra, pinhole_directions(S, fov, 1)[:, :, 0])
    P = pa[:, None, None] + da[..., None] * d                           # surface points, world
    q = torch.einsum("bijk,bkc->bijc", P - pb[:, None, None], Rb)       # in B's camera frame
    f = (S / 2) / math.tan(fov / 2)
    z = q[..., 2]
    zs = torch.where(z > 1e-6, z, torch.ones_like(z))
    col = S / 2 + f * q[..., 0] / zs
    row = S / 2 - f * q[..., 1] / zs
    inside = (z > 1e-6) & (col >= 0) & (col < S) & (row >= 0) & (row < S)
    dist = (P - pb[:, None, None]).norm(dim=-1)
    # occluded if B sees something nearer at all four pixel centres around the point: depth varies
    # within a pixel (most on surfaces seen at a grazing angle), so one sample cannot decide
    far = torch.zeros_like(dist)
    for dr in (-0.5, 0.5):
        for dc in (-0.5, 0.5):
            ri = (row + dr).floor().clamp(0, S - 1).long()
            ci = (col + dc).floor().clamp(0, S - 1).long()
            far = torch.maximum(far, db.flatten(1).gather(1, (ri * S + ci).flatten(1)).view(n, S, S))
    visible = dist <= (1 + tol) * far + 0.02
    valid = inside & visible
    if single:
        return row[0], col[0], valid[0]
    return row, col, valid


def relative_pose(pos_a, yaw_a, pitch_a, pos_b, yaw_b, pitch_b) -> torch.Tensor:
    """View B's pose in view A's camera frame, encoded as
    ``(sin dyaw, cos dyaw, dpitch, t_x, t_y, t_z)`` with ``t = R_A^T (c_B - c_A)``; tensors of
    poses broadcast, output ``(..., 6)``."""
    pa, pb = torch.as_tensor(pos_a, dtype=torch.float32), torch.as_tensor(pos_b, dtype=torch.float32)
    Ra = rotation(yaw_a, pitch_a)
    t = torch.einsum("...kc,...k->...c", Ra, pb - pa)
    dy = wrap(torch.as_tensor(yaw_b) - torch.as_tensor(yaw_a))
    dp = torch.as_tensor(pitch_b, dtype=torch.float32) - torch.as_tensor(pitch_a, dtype=torch.float32)
    dy, dp = torch.broadcast_tensors(dy, dp)
    return torch.cat([torch.stack([torch.sin(dy), torch.cos(dy), dp], -1), t], -1)


# ----------------------------------------------------------------------------- videos and pairs
@dataclass
class Video360:
    """A rendered 360° video: panoramas ``rgb (T, 3, H, 2H)`` and ``depth (T, H, 2H)`` along a
    camera trajectory ``positions (T, 3)`` with direction of travel ``headings (T,)``. The 360°
    camera turns with its carrier: frame ``t``'s centre column looks along world yaw
    ``headings[t]``, so a view at world yaw ``psi`` sits at panorama yaw ``psi - headings[t]``."""
    rgb: torch.Tensor
    depth: torch.Tensor
    positions: torch.Tensor
    headings: torch.Tensor


def render_video(generator: torch.Generator, n_frames: int = 20, height: int = 128, ss: int = 1,
                 texture_ids=None, step: float = 0.15, turn_std: float = 0.12) -> Video360:
    """A random room and a 360° video through it (see :func:`reprobook.render.ray_cast.random_room`
    and :func:`~reprobook.render.ray_cast.random_walk`)."""
    room = random_room(generator, texture_ids=texture_ids)
    pos, head = random_walk(room, n_frames, generator, step=step, turn_std=turn_std)
    frames = [render_equirect(room, p, height, ss, yaw=float(h)) for p, h in zip(pos, head)]
    rgb = torch.stack([f[0] for f in frames])
    depth = torch.stack([f[1] for f in frames])
    return Video360(rgb, depth, pos, head)


@dataclass
class PairSet:
    """View pairs: ``src``, ``tgt`` ``(N, 3, S, S)``, relative pose codes ``pose (N, 6)``, turn
    angles ``turn (N,)`` (radians, in [0, pi]), ``overlap (N,)`` and frame gaps ``gap (N,)``."""
    src: torch.Tensor
    tgt: torch.Tensor
    pose: torch.Tensor
    turn: torch.Tensor
    overlap: torch.Tensor
    gap: torch.Tensor

    def __len__(self):
        return self.src.shape[0]

    def take(self, idx) -> "PairSet":
        idx = torch.as_tensor(idx, dtype=torch.long)
        return PairSet(*(getattr(self, k)[idx] for k in ("src", "tgt", "pose", "turn", "overlap", "gap")))

    @staticmethod
    def cat(sets) -> "PairSet":
        sets = list(sets)
        return PairSet(*(torch.cat([getattr(s, k) for s in sets]) for k in
                         ("src", "tgt", "pose", "turn", "overlap", "gap")))


def candidate_pairs(video: Video360, generator: torch.Generator, kind: str, n: int, size: int = 32,
                    fov: float = math.pi / 2, max_gap: int = 8, max_turn: float = math.pi / 2) -> PairSet:
    """``n`` candidate view pairs from one video (yaws below are world yaws). ``kind="mined"``:
    frames ``t`` and ``t + Delta`` (``Delta`` uniform in 1..max_gap), the source yaw uniform on the circle and the target yaw the
    source's plus a turn uniform in ``[-max_turn, max_turn]`` (free rotation). ``kind="forward"``:
    the same frames with both views locked to the direction of travel (a standard video). Every
    candidate carries its geometric overlap; selection happens in :func:`select_pairs`."""
    if kind not in ("mined", "forward"):
        raise ValueError(f"kind must be 'mined' or 'forward', got {kind!r}")
    T = video.rgb.shape[0]
    if T < 2:
        raise ValueError("a video needs at least 2 frames to make pairs")
    g = min(max_gap, T - 1)
    gap = torch.randint(1, g + 1, (n,), generator=generator)
    t0 = (torch.rand(n, generator=generator) * (T - gap)).long()
    t1 = t0 + gap
    if kind == "mined":
        ya = torch.rand(n, generator=generator) * 2 * math.pi - math.pi
        yb = wrap(ya + (torch.rand(n, generator=generator) * 2 - 1) * max_turn)
    else:
        ya, yb = video.headings[t0], video.headings[t1]
    zero = torch.zeros(n)
    pa, pb = ya - video.headings[t0], yb - video.headings[t1]               # world -> panorama yaw
    src = perspective_from_equirect(video.rgb[t0], pa, zero, fov, size, ss=2)
    tgt = perspective_from_equirect(video.rgb[t1], pb, zero, fov, size, ss=2)
    da = perspective_from_equirect(video.depth[t0, None], pa, zero, fov, size, mode="nearest")[:, 0]
    db = perspective_from_equirect(video.depth[t1, None], pb, zero, fov, size, mode="nearest")[:, 0]
    ov = correspondences(da, video.positions[t0], ya, zero, video.positions[t1], yb, zero, db,
                         fov)[2].float().flatten(1).mean(1)
    pose = relative_pose(video.positions[t0], ya, zero, video.positions[t1], yb, zero)
    return PairSet(src, tgt, pose, wrap(yb - ya).abs(), ov, gap)


def select_pairs(pairs: PairSet, n: int, generator: torch.Generator, min_overlap: float = 0.2,
                 bins=None) -> PairSet:
    """Keep the pairs with overlap >= ``min_overlap`` and draw ``n`` of them without replacement.
    With ``bins`` (turn-angle edges, radians) the draw is stratified: as equal a number from each
    bin as the bins hold. Raises if fewer than ``n`` pairs qualify."""
    ok = torch.nonzero(pairs.overlap >= min_overlap)[:, 0]
    if ok.numel() < n:
        raise ValueError(f"only {ok.numel()} pairs have overlap >= {min_overlap}, {n} requested")
    if bins is None:
        return pairs.take(ok[torch.randperm(ok.numel(), generator=generator)[:n]])
    edges = torch.as_tensor(bins, dtype=torch.float32)
    which = torch.bucketize(pairs.turn[ok], edges[1:-1], right=True)
    groups = [ok[which == b][torch.randperm(int((which == b).sum()), generator=generator)]
              for b in range(len(edges) - 1)]
    chosen, left = [], n
    # water-filling: each bin gets an equal share, the shortfall of small bins goes to the others
    remaining = sorted(range(len(groups)), key=lambda b: groups[b].numel())
    while remaining:
        share = left // len(remaining)
        b = remaining.pop(0)
        k = min(groups[b].numel(), share if remaining else left)
        chosen.append(groups[b][:k])
        left -= k
    idx = torch.cat(chosen)
    if idx.numel() < n:
        raise ValueError(f"only {idx.numel()} pairs could be drawn across the bins, {n} requested")
    return pairs.take(idx[torch.randperm(idx.numel(), generator=generator)])
