r"""Single-object trackers that differ in how they associate look-alike candidates over time.

All trackers share one **appearance model**: the normalised cross-correlation (NCC) of the target's
first-frame template over the frame (``skimage.feature.match_template``); its top-``k`` local
maxima, refined to sub-pixel by a parabola through the peak, are the frame's *candidates*
(:func:`detect_candidates`).  NCC is invariant to an affine change of brightness, so a look-alike
scores like the target: which candidate is the target is an *association* problem.

* :func:`track_greedy`: the usual single-object tracker's rule: inside a search disc around the
  last position, take the candidate with the best score, blended with a cosine (Hann) window on the
  distance (the motion prior of SiamFC/OSTrack-style trackers).
* :func:`track_kalman_hungarian`: the multi-object baseline (SORT-style): a constant-velocity
  Kalman tracklet (:class:`~reprobook.vision.kalman_tracklet.KalmanTracklet`) for every candidate,
  Hungarian assignment (:func:`reprobook.vision.boxes.hungarian`) on
  :math:`1 - \mathrm{IoU}(\text{predicted box}, \text{candidate box}) + w_a (1 - \mathrm{NCC})`,
  pairs of zero IoU forbidden; the target's tracklet is never deleted.
* :func:`track_distractor_aware`: the MOT philosophy for RGB-event tracking (Zhang et al., NeurIPS
  2024), without learning: tracklets for the target **and every distractor**, each with an
  *appearance* memory (an exponential moving average of its raw patch, so a 5 % brightness
  difference counts) and a *motion* prediction; candidates are assigned jointly (Hungarian) on

  .. math:: c_{ij} = \frac{\lVert \hat p_i - x_j \rVert}{s/2}
            + w_a \frac{\overline{|A_i - P(x_j)|}}{a_0},

  with :math:`\hat p_i` the tracklet's predicted centre, :math:`x_j` the candidate's centre,
  :math:`s` the box side, :math:`A_i` the appearance memory and :math:`P(x_j)` the candidate's
  patch; pairs farther than ``gate`` pixels are forbidden.  ``motion`` selects the prediction:
  ``"events"`` follows the tracklet through the event slices between the two frames
  (:func:`propagate_with_events`: a Gaussian-weighted mean shift on the event counts, slice by
  slice, so it follows curved paths that a constant-velocity model misses), ``"kalman"`` the
  constant-velocity prediction from the frames alone, ``"none"`` the last position (no motion
  branch).  ``distractors=False`` keeps only the target's tracklet (the target takes its cheapest
  candidate; nothing competes for it).

Metrics: :func:`success_auc` (the OTB/LaSOT success plot's area: the mean over IoU thresholds
0, 0.05, ..., 1 of the share of frames whose IoU exceeds it), :func:`identity_switches`.
"""
from __future__ import annotations

import numpy as np
import torch

from reprobook.vision.boxes import box_iou, hungarian
from reprobook.vision.kalman_tracklet import KalmanTracklet

__all__ = ["detect_candidates", "patch", "propagate_with_events", "track_greedy",
           "track_kalman_hungarian", "track_distractor_aware", "centers_to_boxes", "success_auc",
           "identity_switches", "frame_ious", "MOTIONS"]

MOTIONS = ("events", "kalman", "none")
FORBIDDEN = 1e6


def _check_center(c, name="center"):
    c = np.asarray(c, dtype=np.float64)
    if c.shape != (2,) or not np.isfinite(c).all():
        raise ValueError(f"{name} must be 2 finite numbers (x, y), got {c!r}")
    return c


def detect_candidates(frame, template, k: int = 4, min_distance: int = 3, min_score: float = 0.2):
    """Candidates of one frame: ``(centers [n, 2] as (x, y), scores [n])``, best first, ``n <= k``."""
    from skimage.feature import match_template, peak_local_max

    frame, template = np.asarray(frame, dtype=np.float64), np.asarray(template, dtype=np.float64)
    if frame.ndim != 2 or template.ndim != 2:
        raise ValueError(f"frame and template must be 2-D grey images, got {frame.shape}, {template.shape}")
    if template.shape[0] % 2 == 0 or template.shape[1] % 2 == 0:
        raise ValueError(f"template sides must be odd (centred peaks), got {template.shape}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k!r}")
    ncc = match_template(frame, template, pad_input=True, mode="edge")
    peaks = peak_local_max(ncc, min_distance=min_distance, num_peaks=k, threshold_abs=min_score,
                           exclude_border=False)
    centers = np.zeros((len(peaks), 2))
    for n, (y, x) in enumerate(peaks):
        off = []
        for (a, b, c) in ((ncc[max(y - 1, 0), x], ncc[y, x], ncc[min(y + 1, ncc.shape[0] - 1), x]),
                          (ncc[y, max(x - 1, 0)], ncc[y, x], ncc[y, min(x + 1, ncc.shape[1] - 1)])):
            den = a - 2 * b + c
            off.append(float(np.clip(0.5 * (a - c) / den, -0.5, 0.5)) if den < 0 else 0.0)
        centers[n] = (x + off[1], y + off[0])
    return centers, ncc[peaks[:, 0], peaks[:, 1]] if len(peaks) else np.zeros(0)


def patch(frame, center, size: int) -> np.ndarray:
    """The ``size`` x ``size`` patch of ``frame`` around the rounded ``center`` (edge-padded)."""
    c = np.round(_check_center(center)).astype(int)
    h = size // 2
    f = np.pad(np.asarray(frame, dtype=np.float64), h, mode="edge")
    x, y = np.clip(c[0], 0, frame.shape[1] - 1) + h, np.clip(c[1], 0, frame.shape[0] - 1) + h
    return f[y - h:y + h + 1, x - h:x + h + 1]


def propagate_with_events(center, slices, reach: float = 7.0, iters: int = 1, min_events: float = 3.0):
    """Follow a point through event slices ``[K, 2, H, W]`` (oldest first): for each slice, ``iters``
    mean-shift steps to the centroid of the event counts (both polarities) inside the disc of radius
    ``reach`` around the current estimate; fewer than ``min_events`` events there leave it in place.

    A sprite moving by a fraction of a pixel per slice fires events over its whole rim and texture,
    so a disc a little wider than the sprite holds all of them and their centroid is the sprite's
    centre at that slice: chained over the slices, the point follows the sprite's actual path."""
    c = _check_center(center).copy()
    s = np.asarray(slices)
    if s.ndim != 4 or s.shape[1] != 2:
        raise ValueError(f"event slices must have shape [K, 2, H, W], got {s.shape}")
    if not reach > 0:
        raise ValueError(f"reach must be positive, got {reach!r}")
    H, W = s.shape[2:]
    r = int(np.ceil(reach))
    for a in s:
        for _ in range(iters):
            cx, cy = int(round(c[0])), int(round(c[1]))
            x0, x1 = max(cx - r, 0), min(cx + r + 1, W)
            y0, y1 = max(cy - r, 0), min(cy + r + 1, H)
            if x0 >= x1 or y0 >= y1:
                break
            yy, xx = np.ogrid[y0:y1, x0:x1]
            counts = np.abs(a[0, y0:y1, x0:x1]).astype(np.float64) + np.abs(a[1, y0:y1, x0:x1])
            w = counts * (((xx - c[0]) ** 2 + (yy - c[1]) ** 2) <= reach**2)
            tot = w.sum()
            if tot < min_events:
                break
            c = np.array([(w * xx).sum() / tot, (w * yy).sum() / tot])
    return c


def centers_to_boxes(centers, box_size: float) -> np.ndarray:
    """xyxy boxes ``[..., 4]`` of side ``box_size`` around centres ``[..., 2]``."""
    c = np.asarray(centers, dtype=np.float64)
    if c.shape[-1:] != (2,):
        raise ValueError(f"centers must end in (x, y), got shape {c.shape}")
    return np.concatenate([c - box_size / 2, c + box_size / 2], axis=-1)


def _check_candidates(candidates):
    for t, (c, s) in enumerate(candidates):
        if np.asarray(c).ndim != 2 or np.asarray(c).shape[1:] != (2,) or len(c) != len(s):
            raise ValueError(f"candidates[{t}] must be (centers [n, 2], scores [n])")


def track_greedy(candidates, init_center, search_radius: float = 12.0, window: float = 0.2) -> np.ndarray:
    """Greedy single-object tracking (module docstring): centres ``[T, 2]``; frame 0 is the init."""
    _check_candidates(candidates)
    if not (search_radius > 0 and 0 <= window <= 1):
        raise ValueError(f"need search_radius > 0 and window in [0, 1], got {search_radius!r}, {window!r}")
    c = _check_center(init_center, "init_center")
    out = [c]
    for centers, scores in candidates[1:]:
        if len(centers):
            d = np.linalg.norm(centers - c, axis=1)
            hann = np.where(d <= search_radius, 0.5 * (1 + np.cos(np.pi * d / search_radius)), -np.inf)
            total = (1 - window) * scores + window * hann
            j = int(np.argmax(total))
            if np.isfinite(total[j]):
                c = centers[j].copy()
        out.append(c)
    return np.array(out)


def _assign(cost):
    """Hungarian assignment of a cost matrix with forbidden (>= FORBIDDEN) pairs dropped."""
    if cost.size == 0:
        return []
    return [(int(i), int(j)) for i, j in zip(*hungarian(cost)) if cost[i, j] < FORBIDDEN]


def _bookkeep(tracks, target, centers, pairs, max_age, new):
    """Count a miss for every tracklet left unmatched, drop distractor tracklets unmatched for more
    than ``max_age`` frames (never the target's), start a tracklet on every unmatched candidate."""
    hit_tracks, hit_cands = {i for i, _ in pairs}, {j for _, j in pairs}
    for i, tr in enumerate(tracks):
        if i not in hit_tracks:
            tr.misses += 1
    tracks[:] = [tr for tr in tracks if tr is target or tr.misses <= max_age]
    for j, x in enumerate(centers):
        if j not in hit_cands:
            tracks.append(new(j, x))


def track_kalman_hungarian(candidates, init_center, box_size: float, w_app: float = 0.5,
                           max_age: int = 5, q: float = 1.0, r: float = 1.0) -> np.ndarray:
    """SORT-style multi-object tracking of every candidate (module docstring); returns the target
    tracklet's centres ``[T, 2]`` (its prediction on frames where no candidate is assigned to it)."""
    _check_candidates(candidates)
    init = _check_center(init_center, "init_center")
    if not (box_size > 0 and w_app >= 0 and max_age >= 0):
        raise ValueError(f"need box_size > 0, w_app >= 0, max_age >= 0, got {box_size!r}, {w_app!r}, {max_age!r}")
    target = KalmanTracklet(init, q=q, r=r)
    tracks = [target] + [KalmanTracklet(x, q=q, r=r) for x in candidates[0][0]
                         if np.linalg.norm(x - init) > box_size / 2]
    out = [init]
    for centers, scores in candidates[1:]:
        preds = np.array([tr.predict() for tr in tracks])
        pairs = []
        if len(centers):
            iou = box_iou(torch.from_numpy(centers_to_boxes(preds, box_size)),
                          torch.from_numpy(centers_to_boxes(centers, box_size))).numpy()
            cost = np.where(iou > 0, 1 - iou + w_app * (1 - scores)[None, :], FORBIDDEN)
            pairs = _assign(cost)
            for i, j in pairs:
                tracks[i].update(centers[j])
        _bookkeep(tracks, target, centers, pairs, max_age, lambda j, x: KalmanTracklet(x, q=q, r=r))
        out.append(target.center)
    return np.array(out)


def track_distractor_aware(candidates, frames, events, init_center, template, motion: str = "events",
                           distractors: bool = True, w_app: float = 1.0, app_scale: float = 0.05,
                           gate: float = 10.0, max_age: int = 5, memory: float = 0.2,
                           reach: float = 7.0, q: float = 1.0, r: float = 1.0) -> np.ndarray:
    """The MOT-philosophy tracker (module docstring): centres ``[T, 2]`` of the target tracklet.

    ``frames: [T, H, W]``, ``events: [T - 1, K, 2, H, W]`` (slices between frames t-1 and t; unused
    unless ``motion == "events"``), ``template``: the target's first-frame patch (odd square),
    ``memory``: the weight of a new patch in a tracklet's appearance memory.
    """
    _check_candidates(candidates)
    if motion not in MOTIONS:
        raise ValueError(f"unknown motion {motion!r}; choose from {MOTIONS}")
    frames = np.asarray(frames, dtype=np.float64)
    T = len(candidates)
    if frames.ndim != 3 or len(frames) != T:
        raise ValueError(f"frames must be [T={T}, H, W], got {frames.shape}")
    if motion == "events" and (np.ndim(events) != 5 or len(events) != T - 1):
        raise ValueError(f"events must be [T - 1 = {T - 1}, K, 2, H, W], got {np.shape(events)}")
    template = np.asarray(template, dtype=np.float64)
    size = template.shape[0]
    if template.ndim != 2 or template.shape[1] != size or size % 2 == 0:
        raise ValueError(f"template must be an odd square patch, got {template.shape}")
    if not (gate > 0 and w_app >= 0 and app_scale > 0 and 0 <= memory <= 1):
        raise ValueError("need gate > 0, w_app >= 0, app_scale > 0 and memory in [0, 1]")
    init = _check_center(init_center, "init_center")
    yy, xx = np.mgrid[:size, :size] - size // 2
    disc = xx**2 + yy**2 <= (size // 2) ** 2     # compare the object, not the background around it

    def new(x, look):
        tr = KalmanTracklet(x, q=q, r=r)
        tr.look = look
        return tr

    target = new(init, template.copy())
    tracks = [target]
    if distractors:
        tracks += [new(x, patch(frames[0], x, size)) for x in candidates[0][0]
                   if np.linalg.norm(x - init) > size / 2]
    out = [init]
    for t in range(1, T):
        centers, _ = candidates[t]
        preds = []
        for tr in tracks:
            last = tr.center
            tr.predict()                      # keeps the covariance, the age and the velocity model
            if motion == "events":
                tr.move_to(propagate_with_events(last, events[t - 1], reach=reach))
            elif motion == "none":
                tr.move_to(last)
            preds.append(tr.center)
        preds = np.array(preds)
        pairs = []
        if len(centers):
            looks = [patch(frames[t], x, size) for x in centers]
            dist = np.linalg.norm(preds[:, None, :] - centers[None, :, :], axis=2)
            app = np.array([[np.abs(tr.look - lk)[disc].mean() for lk in looks] for tr in tracks])
            cost = np.where(dist <= gate, dist / (size / 2) + w_app * app / app_scale, FORBIDDEN)
            pairs = _assign(cost)
            for i, j in pairs:
                tracks[i].update(centers[j])
                tracks[i].look = (1 - memory) * tracks[i].look + memory * looks[j]
        if distractors:
            _bookkeep(tracks, target, centers, pairs, max_age,
                      lambda j, x: new(x, patch(frames[t], x, size)))
        elif not pairs:
            target.misses += 1
        out.append(target.center)
    return np.array(out)


def success_auc(pred_centers, gt_centers, box_size: float, skip_first: bool = True) -> float:
    """Area under the success plot: mean over IoU thresholds 0, 0.05, ..., 1 of the share of frames
    whose box IoU with the ground truth exceeds the threshold (frame 0, the initialisation, skipped)."""
    iou = frame_ious(pred_centers, gt_centers, box_size)
    if skip_first:
        iou = iou[1:]
    thr = np.linspace(0, 1, 21)
    return float((iou[None, :] > thr[:, None]).mean())


def frame_ious(pred_centers, gt_centers, box_size: float) -> np.ndarray:
    """Per-frame IoU of the square boxes of side ``box_size`` around predicted and true centres."""
    p, g = np.asarray(pred_centers, dtype=np.float64), np.asarray(gt_centers, dtype=np.float64)
    if p.shape != g.shape or p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"pred and gt centres must both be [T, 2], got {p.shape}, {g.shape}")
    pb, gb = torch.from_numpy(centers_to_boxes(p, box_size)), torch.from_numpy(centers_to_boxes(g, box_size))
    return torch.diagonal(box_iou(pb, gb)).numpy()


def identity_switches(pred_centers, all_gt_centers, box_size: float, min_iou: float = 0.3,
                      persist: int = 3) -> int:
    """How often the tracker's output leaves the target (object 0) for another object and stays.

    At each frame the output's identity is the object whose box overlaps it most (IoU at least
    ``min_iou``; otherwise none, and the frame is skipped).  A switch is a run of at least
    ``persist`` identified frames on one distractor that follows a frame on the target (a single
    frame on the distractor while the two overlap at a crossing is not a switch).
    """
    p, g = np.asarray(pred_centers, dtype=np.float64), np.asarray(all_gt_centers, dtype=np.float64)
    if g.ndim != 3 or g.shape[2] != 2 or p.shape != (g.shape[0], 2):
        raise ValueError(f"need pred [T, 2] and gt [T, n_objects, 2], got {p.shape}, {g.shape}")
    if persist < 1:
        raise ValueError(f"persist must be >= 1, got {persist!r}")
    ids = []
    for t in range(len(p)):
        iou = box_iou(torch.from_numpy(centers_to_boxes(p[t:t + 1], box_size)),
                      torch.from_numpy(centers_to_boxes(g[t], box_size)))[0].numpy()
        k = int(np.argmax(iou))
        if iou[k] >= min_iou:
            ids.append(k)
    runs = []                                     # (identity, length) of maximal runs
    for k in ids:
        if runs and runs[-1][0] == k:
            runs[-1][1] += 1
        else:
            runs.append([k, 1])
    switches, on_target = 0, True
    for k, n in runs:
        if k == 0:
            on_target = True
        elif on_target and n >= persist:
            switches += 1
            on_target = False
    return switches
