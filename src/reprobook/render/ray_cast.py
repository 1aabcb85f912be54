"""Ray casting of box rooms with textured walls and a few box objects, seen from pinhole and
equirectangular (360°) cameras, with per-pixel depth.

Conventions (one place, used by every camera here and by :mod:`reprobook.vision.equirect`):

* World axes: ``y`` up; the floor is ``y = 0``. A room is the box ``[-a, a] x [0, h] x [-b, b]``.
* A camera at position ``c`` with yaw ``psi`` and pitch ``theta`` looks along

      forward(psi, theta) = (cos(theta) sin(psi), sin(theta), cos(theta) cos(psi)),

  i.e. yaw 0 looks along ``+z``, positive yaw turns towards ``+x`` (to the right), positive pitch
  looks up. The camera-to-world rotation is ``R = R_y(psi) R_x(theta)`` acting on camera-frame
  directions ``(x right, y up, z forward)``.
* Pinhole camera, ``S x S`` pixels, horizontal = vertical field of view ``F``: focal length
  ``f = (S / 2) / tan(F / 2)`` pixels; pixel (row ``i``, column ``j``) has its centre at
  ``(j + 1/2, i + 1/2)`` and the camera-frame ray ``((j + 1/2 - S/2) / f, -(i + 1/2 - S/2) / f, 1)``.
* Equirectangular image, ``H x W`` pixels (``W = 2H``): longitude ``lon = atan2(d_x, d_z)`` in
  ``(-pi, pi]`` and latitude ``lat = asin(d_y)``; continuous column ``u = (lon / 2pi + 1/2) W`` and
  row ``v = (1/2 - lat / pi) H`` (pixel centres at half-integers). The panorama's centre column
  looks along ``+z`` and a pinhole crop at yaw ``psi`` is centred on ``lon = psi``.

Rendering: for a unit ray ``o + t d`` the room's interior is left at
``t_exit = min_k max((lo_k - o_k)/d_k, (hi_k - o_k)/d_k)`` (the camera is inside), and an object box
is entered at ``t_in = max_k min(...)`` and left at ``t_out = min_k max(...)`` (the slab method); the
visible surface is the smallest positive ``t``. Depth is that ``t`` (distance along the unit ray, not
the z-buffer value). Room faces carry textures sampled bilinearly at the hit point's face
coordinates; object faces are flat colours shaded by which axis their normal lies on, so that edges
show. ``ss`` > 1 averages an ``ss x ss`` grid of sub-pixel rays per pixel (box-filter
anti-aliasing); depth is always that of the pixel-centre ray.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

# photographs and textures shipped inside scikit-image's wheel (no download)
TEXTURE_SOURCES = ("brick", "grass", "gravel", "camera", "moon", "coffee", "chelsea", "astronaut",
                   "rocket", "coins", "clock", "immunohistochemistry", "hubble_deep_field", "cell",
                   "page", "text")
SHADE = (0.75, 1.0, 0.88)      # brightness of object faces whose normal is along x, y, z


# ----------------------------------------------------------------------------- camera geometry
def rotation(yaw, pitch) -> torch.Tensor:
    """Camera-to-world rotation(s) ``R_y(yaw) R_x(pitch)`` (radians; tensors broadcast), shape
    ``(..., 3, 3)``, float32."""
    yaw, pitch = torch.broadcast_tensors(torch.as_tensor(yaw, dtype=torch.float32),
                                         torch.as_tensor(pitch, dtype=torch.float32))
    cy, sy, cp, sp = torch.cos(yaw), torch.sin(yaw), torch.cos(pitch), torch.sin(pitch)
    zero, one = torch.zeros_like(yaw), torch.ones_like(yaw)
    # columns: where the camera's x (right), y (up) and z (forward) axes point in the world
    right = torch.stack([cy, zero, -sy], -1)
    up = torch.stack([-sy * sp, cp, -cy * sp], -1)
    fwd = torch.stack([sy * cp, sp, cy * cp], -1)
    del one
    return torch.stack([right, up, fwd], -1)


def _subpixel(ss: int) -> torch.Tensor:
    if int(ss) != ss or ss < 1:
        raise ValueError(f"ss (sub-pixel rays per side) must be a positive integer, got {ss!r}")
    return (torch.arange(ss, dtype=torch.float32) + 0.5) / ss


def pinhole_directions(size: int, fov: float, ss: int = 1) -> torch.Tensor:
    """Unit camera-frame rays of an ``size x size`` pinhole camera with field of view ``fov``
    (radians), shape ``(size, size, ss*ss, 3)`` (``ss x ss`` sub-pixel rays per pixel; ``ss = 1``
    gives the pixel centres)."""
    if int(size) != size or size < 1:
        raise ValueError(f"size must be a positive integer, got {size!r}")
    if not 0.0 < fov < math.pi:
        raise ValueError(f"fov must be in (0, pi) radians, got {fov!r}")
    f = (size / 2) / math.tan(fov / 2)
    off = _subpixel(ss)
    cols = (torch.arange(size, dtype=torch.float32)[:, None] + off[None]).reshape(-1)   # size*ss
    x = (cols - size / 2) / f
    y = -(cols - size / 2) / f
    X = x.view(1, size, 1, ss).expand(size, size, ss, ss)
    Y = y.view(size, 1, ss, 1).expand(size, size, ss, ss)
    d = torch.stack([X, Y, torch.ones_like(X)], -1).reshape(size, size, ss * ss, 3)
    return d / d.norm(dim=-1, keepdim=True)


def equirect_to_direction(u: torch.Tensor, v: torch.Tensor, height: int) -> torch.Tensor:
    """World directions of continuous equirectangular coordinates (column ``u``, row ``v``, pixel
    centres at half-integers) of an ``height x 2*height`` panorama, shape ``u.shape + (3,)``."""
    W = 2 * height
    lon = (u / W - 0.5) * 2 * math.pi
    lat = (0.5 - v / height) * math.pi
    return torch.stack([torch.cos(lat) * torch.sin(lon), torch.sin(lat),
                        torch.cos(lat) * torch.cos(lon)], -1)


def direction_to_equirect(d: torch.Tensor, height: int):
    """Continuous equirectangular coordinates ``(u, v)`` of world directions ``d`` (``(..., 3)``,
    any length) on an ``height x 2*height`` panorama: ``u`` in ``[0, 2 height)``, ``v`` in
    ``[0, height]``."""
    if d.shape[-1] != 3:
        raise ValueError(f"directions must have a last axis of size 3, got shape {tuple(d.shape)}")
    d = d / d.norm(dim=-1, keepdim=True)
    lon = torch.atan2(d[..., 0], d[..., 2])
    lat = torch.asin(d[..., 1].clamp(-1.0, 1.0))
    W = 2 * height
    return (lon / (2 * math.pi) + 0.5) * W, (0.5 - lat / math.pi) * height


def equirect_directions(height: int, ss: int = 1) -> torch.Tensor:
    """Unit world directions of an ``height x 2*height`` panorama's pixels, shape
    ``(height, 2*height, ss*ss, 3)``."""
    if int(height) != height or height < 2:
        raise ValueError(f"height must be an integer >= 2, got {height!r}")
    off = _subpixel(ss)
    W = 2 * height
    u = (torch.arange(W, dtype=torch.float32)[:, None] + off[None]).reshape(-1)
    v = (torch.arange(height, dtype=torch.float32)[:, None] + off[None]).reshape(-1)
    U = u.view(1, W, 1, ss).expand(height, W, ss, ss)
    V = v.view(height, 1, ss, 1).expand(height, W, ss, ss)
    return equirect_to_direction(U, V, height).reshape(height, W, ss * ss, 3)


def project_pinhole(points: torch.Tensor, position, yaw: float, pitch: float, size: int, fov: float):
    """Project world points ``(..., 3)`` into a pinhole camera: returns ``(row, col, z)`` with
    continuous pixel coordinates (centres at half-integers) and ``z`` the camera-frame depth along
    the optical axis (a point behind the camera has ``z <= 0``)."""
    if points.shape[-1] != 3:
        raise ValueError(f"points must have a last axis of size 3, got shape {tuple(points.shape)}")
    R = rotation(yaw, pitch)
    p = (points - torch.as_tensor(position, dtype=torch.float32)) @ R      # world -> camera: R^T p
    f = (size / 2) / math.tan(fov / 2)
    z = p[..., 2]
    col = size / 2 + f * p[..., 0] / z
    row = size / 2 - f * p[..., 1] / z
    return row, col, z


# ----------------------------------------------------------------------------- scenes
@lru_cache(maxsize=None)
def texture_bank(size: int = 32) -> torch.Tensor:
    """Every texture source as an RGB float32 texture ``(n, 3, size, size)`` in ``[0, 1]``: the
    photograph's central square, area-downsampled (a low-pass: textures carry no detail finer than
    a texel)."""
    import skimage.data

    out = []
    for name in TEXTURE_SOURCES:
        img = np.asarray(getattr(skimage.data, name)(), dtype=np.float32) / 255.0
        if img.ndim == 2:
            img = np.repeat(img[..., None], 3, axis=-1)
        img = img[..., :3]
        h, w = img.shape[:2]
        s = min(h, w)
        img = img[(h - s) // 2:(h - s) // 2 + s, (w - s) // 2:(w - s) // 2 + s]
        t = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1)[None]
        out.append(F.interpolate(t, size=(size, size), mode="area")[0])
    bank = torch.stack(out)
    bank.requires_grad_(False)
    return bank


@dataclass
class Room:
    """A box room ``[-a, a] x [0, h] x [-b, b]`` with textured faces and axis-aligned box objects.

    ``face_textures``: ``(6, 3, T, T)`` for the faces x=-a, x=+a, y=0 (floor), y=h (ceiling),
    z=-b, z=+b. ``boxes``: ``(K, 2, 3)`` lower and upper corners; ``box_colors``: ``(K, 3)``."""
    half_x: float
    height: float
    half_z: float
    face_textures: torch.Tensor
    boxes: torch.Tensor
    box_colors: torch.Tensor

    @property
    def lo(self):
        return torch.tensor([-self.half_x, 0.0, -self.half_z])

    @property
    def hi(self):
        return torch.tensor([self.half_x, self.height, self.half_z])

    def free(self, p: torch.Tensor, margin: float = 0.4) -> torch.Tensor:
        """Whether points ``(..., 3)`` are at least ``margin`` from every wall and box (in x, z)."""
        inside = ((p[..., 0].abs() < self.half_x - margin) & (p[..., 2].abs() < self.half_z - margin))
        for k in range(self.boxes.shape[0]):
            lo, hi = self.boxes[k, 0], self.boxes[k, 1]
            inside &= ~((p[..., 0] > lo[0] - margin) & (p[..., 0] < hi[0] + margin)
                        & (p[..., 2] > lo[2] - margin) & (p[..., 2] < hi[2] + margin))
        return inside


def random_room(generator: torch.Generator, n_boxes=(6, 10), textures: torch.Tensor | None = None,
                texture_ids=None) -> Room:
    """A random room: size 6-9 m by 6-9 m by 2.6-3.2 m, each face a random texture (from
    ``texture_ids``, default all of the bank) tinted by a random colour, and ``n_boxes`` (a range,
    inclusive) flat-coloured boxes standing on the floor."""
    bank = texture_bank() if textures is None else textures
    ids = list(range(bank.shape[0])) if texture_ids is None else list(texture_ids)
    if not ids:
        raise ValueError("texture_ids is empty")

    def u(lo, hi, *shape):
        return lo + (hi - lo) * torch.rand(shape or (1,), generator=generator)

    ax, h, az = float(u(3.0, 4.5)), float(u(2.6, 3.2)), float(u(3.0, 4.5))
    pick = torch.randint(len(ids), (6,), generator=generator)
    tint = u(0.45, 1.0, 6, 3, 1, 1)
    faces = bank[[ids[int(i)] for i in pick]] * tint
    k = int(torch.randint(n_boxes[0], n_boxes[1] + 1, (1,), generator=generator))
    half = u(0.2, 0.6, k, 3)
    half[:, 1] = u(0.2, 0.9, k)
    cx, cz = u(-ax + 0.7, ax - 0.7, k), u(-az + 0.7, az - 0.7, k)
    centre = torch.stack([cx, half[:, 1], cz], -1)
    boxes = torch.stack([centre - half, centre + half], 1)
    colors = u(0.1, 1.0, k, 3)
    return Room(ax, h, az, faces, boxes, colors)


# ----------------------------------------------------------------------------- ray casting
def _slabs(o, d, lo, hi):
    inv = 1.0 / torch.where(d.abs() < 1e-12, torch.full_like(d, 1e-12), d)
    t1, t2 = (lo - o) * inv, (hi - o) * inv
    return torch.minimum(t1, t2), torch.maximum(t1, t2)


def cast(room: Room, origin, directions: torch.Tensor):
    """Cast unit rays ``directions`` (``(N, 3)``) from ``origin`` (3,) into ``room``; returns
    ``(rgb (N, 3), depth (N,))``."""
    o = torch.as_tensor(origin, dtype=torch.float32).reshape(1, 3)
    d = directions.reshape(-1, 3)
    n = d.shape[0]
    # room interior: leave through the nearest face
    _, tmax = _slabs(o, d, room.lo, room.hi)
    t_room, axis = tmax.min(dim=1)
    hit = o + t_room[:, None] * d
    side = (d.gather(1, axis[:, None])[:, 0] > 0).long()          # 0: low face, 1: high face
    face = 2 * axis + side
    # face coordinates in [-1, 1] for grid_sample: (horizontal, vertical) per face axis
    lo, hi = room.lo, room.hi
    nrm = (hit - (lo + hi) / 2) / ((hi - lo) / 2)
    coords = torch.stack([torch.stack([nrm[:, 2], -nrm[:, 1]], -1),      # x faces: (z, y)
                          torch.stack([nrm[:, 0], nrm[:, 2]], -1),       # y faces: (x, z)
                          torch.stack([nrm[:, 0], -nrm[:, 1]], -1)], 0)  # z faces: (x, y)
    rgb = torch.zeros(n, 3)
    for f in range(6):
        m = face == f
        if m.any():
            g = coords[f // 2][m].view(1, 1, -1, 2)
            s = F.grid_sample(room.face_textures[f:f + 1], g, mode="bilinear", padding_mode="border",
                              align_corners=False)
            rgb[m] = s[0, :, 0].T
    depth = t_room
    # objects: the nearest box entered in front of the camera
    if room.boxes.shape[0]:
        tmin, tmax = _slabs(o[:, None], d[:, None], room.boxes[None, :, 0], room.boxes[None, :, 1])
        t_in, ax_in = tmin.max(dim=2)
        t_out = tmax.min(dim=2)[0]
        ok = (t_out >= t_in) & (t_in > 1e-4)
        t_in = torch.where(ok, t_in, torch.full_like(t_in, float("inf")))
        t_box, k = t_in.min(dim=1)
        closer = t_box < depth
        if closer.any():
            axk = ax_in.gather(1, k[:, None])[:, 0]
            shade = torch.tensor(SHADE)[axk]
            rgb = torch.where(closer[:, None], room.box_colors[k] * shade[:, None], rgb)
            depth = torch.where(closer, t_box, depth)
    return rgb, depth


def _render(room, origin, dirs_world, ss):
    H, W = dirs_world.shape[:2]
    rgb, depth = cast(room, origin, dirs_world.reshape(-1, 3))
    rgb = rgb.view(H, W, ss * ss, 3).mean(2).permute(2, 0, 1).contiguous()
    if ss == 1:
        depth = depth.view(H, W)
    else:
        depth = None
    return rgb, depth


def render_pinhole(room: Room, position, yaw: float, pitch: float = 0.0, size: int = 32,
                   fov: float = math.pi / 2, ss: int = 1):
    """A pinhole view: ``(rgb (3, size, size), depth (size, size))``, depth along each pixel-centre
    ray."""
    dirs = pinhole_directions(size, fov, ss) @ rotation(yaw, pitch).T
    rgb, depth = _render(room, position, dirs, ss)
    if depth is None:
        centre = pinhole_directions(size, fov, 1) @ rotation(yaw, pitch).T
        depth = cast(room, position, centre.reshape(-1, 3))[1].view(size, size)
    return rgb, depth


def render_equirect(room: Room, position, height: int = 64, ss: int = 1, yaw: float = 0.0):
    """A 360° equirectangular frame: ``(rgb (3, height, 2*height), depth (height, 2*height))``.
    ``yaw``: the 360° camera's own heading (a camera carried through a scene turns with its
    carrier); the frame's centre column looks along world yaw ``yaw``."""
    R = rotation(yaw, 0.0).T
    rgb, depth = _render(room, position, equirect_directions(height, ss) @ R, ss)
    if depth is None:
        depth = cast(room, position, (equirect_directions(height, 1) @ R).reshape(-1, 3))[1].view(height, 2 * height)
    return rgb, depth


def random_walk(room: Room, n_frames: int, generator: torch.Generator, step: float = 0.15,
                turn_std: float = 0.12, eye_height: float = 1.5, max_tries: int = 64):
    """A camera trajectory through free space: ``(positions (n, 3), headings (n,))``. The heading
    (direction of travel, radians, yaw convention) drifts by ``N(0, turn_std)`` a frame; a step
    that would come within 0.4 m of a wall or box turns by the smallest multiple of 15° that frees
    the way."""
    if n_frames < 1:
        raise ValueError(f"n_frames must be >= 1, got {n_frames}")
    for _ in range(max_tries):
        p = torch.stack([(torch.rand(1, generator=generator) * 2 - 1) * (room.half_x - 0.5),
                         torch.tensor([eye_height]),
                         (torch.rand(1, generator=generator) * 2 - 1) * (room.half_z - 0.5)], -1)[0]
        if room.free(p):
            break
    else:
        raise RuntimeError("no free starting position in the room")
    heading = float(torch.rand(1, generator=generator) * 2 * math.pi - math.pi)
    pos, head = [p], [heading]
    for _ in range(n_frames - 1):
        h0 = heading + float(torch.randn(1, generator=generator)) * turn_std
        side = 1.0 if float(torch.rand(1, generator=generator)) < 0.5 else -1.0
        for tries in range(max_tries):
            # blocked: turn by the smallest multiple of 15 degrees (alternating sides) that frees
            # the way, as a walker would, rather than jumping to a random heading
            k = (tries + 1) // 2
            h = h0 + side * (1 if tries % 2 else -1) * k * math.radians(15) if tries else h0
            q = pos[-1] + step * torch.tensor([math.sin(h), 0.0, math.cos(h)])
            if room.free(q):
                heading = h
                break
        else:
            q = pos[-1]
        pos.append(q)
        head.append(math.atan2(math.sin(heading), math.cos(heading)))
    return torch.stack(pos), torch.tensor(head)
