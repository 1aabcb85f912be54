r"""Small grey videos of look-alike sprites crossing over a real photograph, with events.

A video holds a *target* sprite (object 0) and ``n_distractors`` look-alikes: the same textured
disc, with a brightness within ±``lookalike`` (5 % by default) of the target's, so a normalised
cross-correlation cannot tell them apart.  The background is a crop of a real photograph that ships
offline (scikit-image's camera, astronaut, coffee, chelsea via :func:`reprobook.data.natural_images.photo`), block-averaged down and rescaled to a
grey range below the sprites', so its texture makes clutter but no look-alike.

**Motion.** Every object moves at a constant speed (±20 % around ``speed`` pixels per frame) along
a heading that turns at an angular rate redrawn, at every frame with probability ``p_turn``,
uniformly in ``[-turn, turn]`` radians per frame; objects bounce off the border.  Positions are
integrated at ``substeps`` sub-steps per video frame.  **Forced crossing:** distractor 1 is made to
pass through the target's position (±1 pixel) at a frame ``t_cross`` drawn in the middle third of
the video: its path is walked forwards and backwards in time from that point, so its heading is
continuous through the crossing.  Which of the two is in front is drawn per video (alpha
compositing), so the crossing is a partial or full occlusion.

**Frames and events.** The scene is rendered at every sub-step (antialiased discs, so sub-pixel
motion changes the intensities), Gaussian sensor noise of std ``noise`` is added, and events are
simulated between consecutive sub-steps with :func:`reprobook.vision.event_sim.simulate_events`
(contrast threshold ``threshold``).  The video frames are the renders at whole frame times; the
events between frames ``t - 1`` and ``t`` come as ``substeps`` slices.

Coordinates: ``x`` along columns, ``y`` along rows, pixel centres at integers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reprobook.data.natural_images import SKIMAGE_PHOTOS, photo
from reprobook.vision.event_sim import simulate_events

__all__ = ["LookalikeVideo", "make_video", "make_videos", "sprite", "walk"]


@dataclass
class LookalikeVideo:
    frames: np.ndarray     # [T, H, W] grey video frames in [0, 1]
    events: np.ndarray     # [T - 1, substeps, 2, H, W] event counts between frame t-1 and t
    centers: np.ndarray    # [T, n_objects, 2] ground-truth centres (x, y); object 0 is the target
    box_size: int          # side of every object's (square) ground-truth box
    t_cross: int           # frame at which distractor 1 crosses the target
    template: np.ndarray   # [box_size, box_size] target patch of frame 0 (the tracker's template)

    def boxes(self, obj: int = 0) -> np.ndarray:
        """Ground-truth xyxy boxes ``[T, 4]`` of object ``obj``."""
        h = self.box_size / 2
        c = self.centers[:, obj]
        return np.concatenate([c - h, c + h], axis=1)


def sprite(dx: np.ndarray, dy: np.ndarray, radius: float, brightness: float):
    """Intensity and alpha of the textured disc at offsets ``(dx, dy)`` from its centre: rings of
    period ``radius / 2`` around a bright body, a dark centre, an antialiased rim."""
    r = np.hypot(dx, dy)
    alpha = np.clip(radius + 0.5 - r, 0.0, 1.0)
    texture = 0.7 + 0.3 * np.cos(2 * np.pi * r / (radius / 2))
    return brightness * texture, alpha


def walk(start, heading: float, speed: float, n_frames: int, substeps: int, turn: float,
         p_turn: float, lo: float, hi: float, rng: np.random.Generator) -> np.ndarray:
    """Sub-step positions ``[(n_frames - 1) * substeps + 1, 2]`` of a constant-speed walker whose
    heading turns at a rate redrawn per frame (module docstring), reflected into ``[lo, hi]^2``."""
    n = (n_frames - 1) * substeps + 1
    pos = np.empty((n, 2))
    p = np.array(start, dtype=np.float64)
    h, omega = float(heading), 0.0
    pos[0] = p
    step = speed / substeps
    for i in range(1, n):
        if (i - 1) % substeps == 0 and rng.random() < p_turn:
            omega = rng.uniform(-turn, turn)
        h += omega / substeps
        p = p + step * np.array([np.cos(h), np.sin(h)])
        for ax in range(2):                         # bounce off the border
            if p[ax] < lo:
                p[ax] = 2 * lo - p[ax]
                h = np.pi - h if ax == 0 else -h
            elif p[ax] > hi:
                p[ax] = 2 * hi - p[ax]
                h = np.pi - h if ax == 0 else -h
        pos[i] = p
    return pos


def _background(rng: np.random.Generator, size: int, factor: int = 3, lo: float = 0.08,
                hi: float = 0.55) -> np.ndarray:
    img = photo(SKIMAGE_PHOTOS[rng.integers(len(SKIMAGE_PHOTOS))])
    side = size * factor
    if min(img.shape) < side:
        raise ValueError(f"photo {img.shape} too small for a {size}x{size} crop at factor {factor}")
    y0 = rng.integers(0, img.shape[0] - side + 1)
    x0 = rng.integers(0, img.shape[1] - side + 1)
    crop = img[y0:y0 + side, x0:x0 + side].reshape(size, factor, size, factor).mean(axis=(1, 3))
    span = crop.max() - crop.min()
    crop = (crop - crop.min()) / (span if span > 0 else 1.0)
    return lo + (hi - lo) * crop


def make_video(rng: np.random.Generator, size: int = 64, n_frames: int = 24, substeps: int = 6,
               n_distractors: int = 2, radius: float = 5.0, speed: float = 4.0, turn: float = 1.5,
               p_turn: float = 0.5, lookalike: float = 0.05, brightness: float = 0.9,
               noise: float = 0.005, threshold: float = 0.15) -> LookalikeVideo:
    """One video (module docstring); all randomness from ``rng``."""
    if n_distractors < 1:
        raise ValueError(f"n_distractors must be >= 1 (one is forced to cross the target), got {n_distractors!r}")
    if n_frames < 6:
        raise ValueError(f"n_frames must be >= 6, got {n_frames!r}")
    if substeps < 1 or size < 8 * radius:
        raise ValueError(f"need substeps >= 1 and size >= 8 * radius, got {substeps!r}, {size!r}, {radius!r}")
    if not 0 <= lookalike < 1:
        raise ValueError(f"lookalike must lie in [0, 1), got {lookalike!r}")
    lo, hi = radius + 1.0, size - 1 - radius - 1.0
    kw = dict(n_frames=n_frames, substeps=substeps, turn=turn, p_turn=p_turn, lo=lo, hi=hi, rng=rng)
    n_obj = 1 + n_distractors
    speeds = speed * rng.uniform(0.8, 1.2, n_obj)
    paths = [walk(rng.uniform(lo, hi, 2), rng.uniform(0, 2 * np.pi), speeds[0], **kw)]
    t_cross = int(rng.integers(n_frames // 3, 2 * n_frames // 3 + 1))
    s_cross = t_cross * substeps
    meet = np.clip(paths[0][s_cross] + rng.uniform(-1, 1, 2), lo, hi)
    h = rng.uniform(0, 2 * np.pi)
    fwd = walk(meet, h, speeds[1], **{**kw, "n_frames": n_frames - t_cross})
    back = walk(meet, h + np.pi, speeds[1], **{**kw, "n_frames": t_cross + 1})
    paths.append(np.concatenate([back[::-1], fwd[1:]]))
    for k in range(2, n_obj):
        paths.append(walk(rng.uniform(lo, hi, 2), rng.uniform(0, 2 * np.pi), speeds[k], **kw))
    paths = np.stack(paths, axis=1)                                    # [n_sub, n_obj, 2]
    bright = brightness * np.concatenate([[1.0], 1 + rng.uniform(-lookalike, lookalike, n_distractors)])
    order = rng.permutation(n_obj)                                     # back to front
    bg = _background(rng, size)
    reach = int(np.ceil(radius)) + 2             # a sprite only touches pixels this close to its centre
    renders = np.repeat(bg[None], paths.shape[0], axis=0)
    for i in range(paths.shape[0]):
        img = renders[i]
        for k in order:
            cx, cy = paths[i, k]
            x0, y0 = max(int(cx) - reach, 0), max(int(cy) - reach, 0)
            x1, y1 = min(int(cx) + reach + 1, size), min(int(cy) + reach + 1, size)
            yy, xx = np.mgrid[y0:y1, x0:x1]
            val, a = sprite(xx - cx, yy - cy, radius, bright[k])
            img[y0:y1, x0:x1] = (1 - a) * img[y0:y1, x0:x1] + a * val
    renders = np.clip(renders + noise * rng.standard_normal(renders.shape), 0.0, 1.0)
    ev = simulate_events(renders, threshold=threshold).astype(np.int16)
    events = ev.reshape(n_frames - 1, substeps, 2, size, size)
    frames = renders[::substeps]
    centers = paths[::substeps]
    box = int(2 * radius + 1)
    cx, cy = np.round(centers[0, 0]).astype(int)
    half = box // 2
    template = frames[0, cy - half:cy + half + 1, cx - half:cx + half + 1].copy()
    return LookalikeVideo(frames=frames, events=events, centers=centers, box_size=box,
                          t_cross=t_cross, template=template)


def make_videos(n: int, rng: np.random.Generator, **kw) -> list[LookalikeVideo]:
    """``n`` videos drawn from one generator (keyword arguments as :func:`make_video`)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    return [make_video(rng, **kw) for _ in range(n)]
