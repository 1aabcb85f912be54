r"""Synthetic procedural "videos" with noisy lecture narration and clean step knowledge.

A stand-in for surgical lecture videos (PeskaVLP's SVL data) with known ground truth. A video is
a procedure: an ordered list of steps drawn from one of :data:`TEMPLATES` (optional steps are
dropped with probability 1/2), each step lasting :math:`U\{3..8\}` clips. Step :math:`k` has a
prototype :math:`p_k \in \mathbb R^{32}` (random unit vector); two pairs of steps are made visually
confusable, :math:`p_{k'} \leftarrow \mathrm{normalise}(0.8\,p_k + 0.2\,r)`. Clip :math:`t` of video
:math:`v` showing step :math:`k_t` has features

.. math::

   x_t = A\,(p_{k_t} + 0.6\,s_v + 0.8\,\varepsilon_t), \qquad A \in \mathbb R^{48\times 32},\;
   s_v, \varepsilon_t \sim \mathcal N(0, I/32),

with a fixed random mixing :math:`A` and a per-video style offset :math:`s_v` (scaled by
:math:`1/\sqrt{32}` so that noise and prototype have comparable norms).

**Text.** Every step has a short class *name* ("clip the cystic artery") and three clean
*paraphrases* (the role of PeskaVLP's LLM-refined knowledge), all hand-written here. The lecture
*narration* of a clip is a corrupted paraphrase (30 % of words dropped, a filler such as "okay so"
inserted, 10 % of the remaining words replaced by junk tokens) of the step shown at clip
:math:`t+\delta`, :math:`\delta \sim U\{-2..2\}` (clamped to the video): speech drifts from the
picture. Narrations come from a finite pool of ``n_noisy`` corrupted strings per step, so a run
embeds a few hundred distinct strings, not one per clip.

:func:`make_videos` returns a :class:`VideoSet` of padded arrays plus the text tables.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["STEP_NAMES", "PARAPHRASES", "TEMPLATES", "CONFUSABLE", "FILLERS", "JUNK", "World",
           "VideoSet", "make_world", "noisy_pool", "make_videos", "corrupt"]

STEP_NAMES = (
    "insert the trocars",
    "retract the gallbladder",
    "dissect the calot triangle",
    "clip the cystic artery",
    "cut the cystic duct",
    "dissect the gallbladder from the liver bed",
    "coagulate the liver bed",
    "place the gallbladder in a retrieval bag",
    "irrigate and suction the field",
    "close the port sites",
)

PARAPHRASES = (
    ("the ports are introduced through small skin incisions",
     "we place the access cannulas into the abdomen",
     "trocar placement under direct vision of the camera"),
    ("the fundus is grasped and pushed up over the liver",
     "we lift the gallbladder to expose the hilum",
     "cephalad traction on the fundus with a grasper"),
    ("the peritoneum over the hepatocystic triangle is opened",
     "we clear fat and fibrous tissue to get the critical view of safety",
     "blunt dissection of the triangle between duct artery and liver"),
    ("metal clips are applied across the artery",
     "we secure the small artery with two clips proximally",
     "the cystic artery is occluded with clip appliers"),
    ("the duct is divided with scissors between the clips",
     "we transect the cystic duct after clipping it",
     "scissors cut through the duct leaving two clips on the patient side"),
    ("the gallbladder is peeled off the hepatic bed with the hook",
     "we separate the organ from the liver surface using cautery",
     "retrograde detachment of the gallbladder from its fossa"),
    ("bleeding points on the liver surface are cauterised",
     "we achieve haemostasis of the hepatic bed with diathermy",
     "the raw liver area is sealed with coagulation"),
    ("the specimen is put into an extraction pouch",
     "we bag the gallbladder so it can be removed safely",
     "the organ is placed in an endobag for extraction"),
    ("the operative field is washed with saline and aspirated",
     "we rinse the area and suck out the fluid",
     "irrigation of the right upper quadrant and aspiration of blood"),
    ("the fascia and skin of the port wounds are sutured",
     "we stitch the incisions at the end of the operation",
     "closure of the trocar wounds with absorbable sutures"),
)

#: Four canonical procedures; a negative step index ``-k-1`` marks step ``k`` as optional.
TEMPLATES = (
    (0, 1, 2, 3, 4, 5, -7),            # classic order, optional coagulation
    (0, 1, 2, 4, 3, 5, 7),             # duct before artery, bag the specimen
    (0, 2, 3, 4, 5, -9, 9),            # no retraction step, optional irrigation
    (0, 1, 5, -7, 2, 3, 4),            # fundus-first: detach the gallbladder before the triangle
)

#: Pairs (k, k') where p_k' is pulled towards p_k: visually confusable steps.
CONFUSABLE = ((3, 4), (6, 8))

FILLERS = ("okay so", "um", "uh", "right", "so now", "you can see", "alright")
JUNK = ("xq", "brr", "mhm", "zzt", "gnn", "tkk", "hrm", "pff")


def _templates_ok():
    for t in TEMPLATES:
        steps = [s if s >= 0 else -s - 1 for s in t]
        if len(set(steps)) != len(steps) or not all(0 <= s < len(STEP_NAMES) for s in steps):
            raise ValueError(f"bad template {t}")


_templates_ok()


@dataclass(frozen=True)
class World:
    """The fixed generative parameters: prototypes ``[K, 32]`` and mixing ``A [48, 32]``."""

    prototypes: np.ndarray
    mixing: np.ndarray

    @property
    def n_steps(self) -> int:
        return self.prototypes.shape[0]


def make_world(rng: np.random.Generator, latent_dim: int = 32, feature_dim: int = 48,
               confusion: float = 0.2) -> World:
    """Random unit prototypes with the :data:`CONFUSABLE` pairs pulled together
    (:math:`p_{k'} = \\mathrm{normalise}((1-c)\\,p_k + c\\,p_{k'})`, ``c = confusion``) and a random
    Gaussian mixing matrix scaled by :math:`1/\\sqrt{d}`."""
    if not 0.0 < confusion <= 1.0:
        raise ValueError(f"confusion must be in (0, 1], got {confusion}")
    K = len(STEP_NAMES)
    P = rng.standard_normal((K, latent_dim))
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    for a, b in CONFUSABLE:
        P[b] = (1 - confusion) * P[a] + confusion * P[b]
        P[b] /= np.linalg.norm(P[b])
    A = rng.standard_normal((feature_dim, latent_dim)) / np.sqrt(latent_dim)
    return World(prototypes=P, mixing=A)


def corrupt(text: str, rng: np.random.Generator, drop: float = 0.3, junk: float = 0.1) -> str:
    """An ASR-like corruption of a clean sentence: drop words, insert a filler, replace words by
    junk tokens. At least one original word survives."""
    words = text.split()
    keep = rng.random(len(words)) >= drop
    if not keep.any():
        keep[rng.integers(len(words))] = True
    words = [w for w, k in zip(words, keep) if k]
    words = [JUNK[rng.integers(len(JUNK))] if rng.random() < junk else w for w in words]
    pos = int(rng.integers(len(words) + 1))
    words.insert(pos, FILLERS[rng.integers(len(FILLERS))])
    return " ".join(words)


def noisy_pool(n_noisy: int, rng: np.random.Generator) -> list[list[str]]:
    """``n_noisy`` corrupted narrations per step, each from a random paraphrase of that step."""
    if n_noisy < 1:
        raise ValueError(f"n_noisy must be >= 1, got {n_noisy}")
    return [[corrupt(PARAPHRASES[k][rng.integers(3)], rng) for _ in range(n_noisy)]
            for k in range(len(STEP_NAMES))]


@dataclass
class VideoSet:
    """Padded videos. ``x [N, T, 48]`` float32 clip features, ``mask [N, T]`` real clips,
    ``labels [N, T]`` true step per clip (-1 padding), ``narration [N, T]`` index into
    ``narration_texts`` (the noisy, misaligned speech), ``narrated_step [N, T]`` the step that
    narration describes, ``paraphrase [N, T]`` index 0..2 of a clean paraphrase drawn per clip
    (of ``narrated_step``: clean text keeps the speech's timing), ``steps [N, M]`` the ordered step
    list (-1 padding), ``seg [N, T]`` the position of the clip's step in that list."""

    x: np.ndarray
    mask: np.ndarray
    labels: np.ndarray
    narration: np.ndarray
    narrated_step: np.ndarray
    paraphrase: np.ndarray
    steps: np.ndarray
    seg: np.ndarray
    template: np.ndarray
    narration_texts: list[str]

    @property
    def lengths(self) -> np.ndarray:
        return self.mask.sum(1)

    @property
    def n_steps_per_video(self) -> np.ndarray:
        return (self.steps >= 0).sum(1)

    def __len__(self) -> int:
        return self.x.shape[0]


def make_videos(world: World, n_videos: int, rng: np.random.Generator, pool: list[list[str]], *,
                style: float = 0.6, noise: float = 0.8, max_shift: int = 2,
                min_len: int = 3, max_len: int = 8) -> VideoSet:
    """Draw ``n_videos`` procedures (see the module docstring for the model)."""
    if n_videos < 1:
        raise ValueError(f"n_videos must be >= 1, got {n_videos}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    if len(pool) != world.n_steps:
        raise ValueError(f"the narration pool needs one list per step ({world.n_steps}), "
                         f"got {len(pool)}")
    d = world.prototypes.shape[1]
    texts = [t for lst in pool for t in lst]
    offset = np.cumsum([0] + [len(lst) for lst in pool])
    vids = []
    for _ in range(n_videos):
        tpl = int(rng.integers(len(TEMPLATES)))
        steps = [s if s >= 0 else -s - 1 for s in TEMPLATES[tpl] if s >= 0 or rng.random() < 0.5]
        durs = rng.integers(min_len, max_len + 1, size=len(steps))
        lab = np.repeat(steps, durs)
        seg = np.repeat(np.arange(len(steps)), durs)
        T = len(lab)
        s_v = rng.standard_normal(d) / np.sqrt(d)
        eps = rng.standard_normal((T, d)) / np.sqrt(d)
        x = (world.prototypes[lab] + style * s_v + noise * eps) @ world.mixing.T
        shift = rng.integers(-max_shift, max_shift + 1, size=T)
        src = np.clip(np.arange(T) + shift, 0, T - 1)
        nstep = lab[src]
        narr = np.array([offset[k] + rng.integers(len(pool[k])) for k in nstep])
        para = rng.integers(3, size=T)
        vids.append((x, lab, nstep, narr, para, steps, seg, tpl))
    Tm = max(len(v[1]) for v in vids)
    Mm = max(len(v[5]) for v in vids)
    N = n_videos
    X = np.zeros((N, Tm, world.mixing.shape[0]), np.float32)
    mask = np.zeros((N, Tm), bool)
    lab = -np.ones((N, Tm), np.int64)
    nst = -np.ones((N, Tm), np.int64)
    nar = np.zeros((N, Tm), np.int64)
    par = np.zeros((N, Tm), np.int64)
    stp = -np.ones((N, Mm), np.int64)
    seg = -np.ones((N, Tm), np.int64)
    tpl = np.zeros(N, np.int64)
    for i, (x, l_, ns, na, pa, st, sg, tp) in enumerate(vids):
        T = len(l_)
        X[i, :T], mask[i, :T], lab[i, :T], nst[i, :T] = x, True, l_, ns
        nar[i, :T], par[i, :T], seg[i, :T] = na, pa, sg
        stp[i, :len(st)] = st
        tpl[i] = tp
    return VideoSet(X, mask, lab, nar, nst, par, stp, seg, tpl, texts)
