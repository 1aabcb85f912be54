r"""A toy "director" for compositional video: a prompt is decomposed into elements by rules, each
element is matched to an asset by sentence embeddings, the elements are placed coarsely, and the
placement is refined over frames by score distillation from a 2-D image prior.

This is the mechanism of the LLM-director pipeline (stages 1, 3 and 4) in a world of flat sprites:

**The world.** Frames of :math:`H\times W` pixels over the unit square: a sky, a ground band below
the line :math:`y=y_g` (``ground``), and sprites from :mod:`reprobook.render.sprites`. Three assets,
each with a shape, a colour and a typical half-size :math:`S_c`: ball < box < tree. The *natural
layout rules* that the prior learns from rendered examples: every object rests on the ground (its
lowest point :math:`y-s` is at :math:`y_g`), and its size is :math:`S_c e^{z}`, :math:`z\sim\mathcal
N(0,\varsigma^2)` (``size_sd``), so the size ratios between classes are fixed up to that spread.

**Stage 1 (decomposition and retrieval).** :func:`decompose` splits a templated prompt
("a shiny sphere rolling to the left of an old pine") at its spatial relation into two sub-queries,
reads the motion from the verb, and records which element is left. :func:`retrieve` maps each
sub-query to the asset whose description has the largest cosine similarity under a sentence encoder
(the real MiniLM in the chapter; :func:`tfidf_encoder` is the lexical baseline).

**Stage 3 (coarse placement).** :func:`natural_layout` draws a video that obeys the rules and the
prompt (trajectory of every element over ``F`` frames, the moving one sliding along the ground);
:func:`coarse_guess` corrupts it the way a multimodal LLM's estimate is off: each object's scale is
multiplied by a factor in :math:`[1-e,1+e]` and it floats above the ground by a random offset.

**Stage 4 (refinement).** :func:`refine` optimises every element's per-frame position and log-scale
:math:`\theta=(x_{f,k},y_{f,k},\log s_{f,k})` with Adam on

.. math:: \nabla_\theta\Big[\mathcal L_{\rm SDS}\big(g(\theta_f)\big)
          +\lambda\sum_k\sum_f\big(\lVert\Delta^2 p_{f,k}\rVert^2+(\Delta\log s_{f,k})^2\big)\Big],

the SDS gradient of a frozen image prior on every rendered frame (:mod:`reprobook.models.diffusion.sds`)
and a temporal term that penalises the acceleration of each trajectory and any change of scale
between frames (:math:`\lambda=` ``temporal_weight``; 0 is per-frame refinement).

**Metrics.** :func:`layout_error` (mean over frames of the mean ground gap
:math:`|y-s-y_g|` plus the mean pairwise log-scale-ratio error
:math:`|\log(s_i/s_j)-\log(S_i/S_j)|`), :func:`order_kept` (the share of frames in which the
instructed left element is left of the other) and :func:`jitter` (the flicker of a video: the
spread over frames of each element's log-scale and ground gap, plus the mean absolute acceleration of
its horizontal path; 0 for every natural video).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from reprobook.models.diffusion.sds import sds_surrogate
from reprobook.render.sprites import N_PARAMS, bottom, render

__all__ = ["ASSETS", "ASSET_DESCRIPTIONS", "SYNONYMS", "World", "Element", "Plan", "decompose",
           "templated_prompts", "retrieve", "tfidf_encoder", "plan_prompt", "natural_layout",
           "coarse_guess", "random_placement", "sample_natural_frames", "render_video", "refine",
           "layout_error", "order_kept", "jitter", "temporal_penalty"]


@dataclass(frozen=True)
class Asset:
    shape: str
    colour: tuple[float, float, float]
    size: float                     # typical half-size S_c (world units)


ASSETS = {
    "ball": Asset("ball", (0.90, 0.15, 0.15), 0.07),
    "box": Asset("box", (0.60, 0.20, 0.80), 0.11),
    "tree": Asset("tree", (0.10, 0.65, 0.20), 0.20),
}
ASSET_DESCRIPTIONS = {"ball": "a ball", "box": "a box", "tree": "a tree"}

# the templated prompts' nouns: written once, before any retrieval was run
SYNONYMS = {
    "ball": ["ball", "sphere", "football", "marble", "basketball"],
    "box": ["box", "crate", "cube", "cardboard carton", "wooden chest"],
    "tree": ["tree", "pine", "oak", "fir tree", "palm"],
}
ADJECTIVES = ["red", "small", "big", "old", "shiny"]
MOVING_VERBS = ["rolling", "moving", "sliding"]
STATIC_VERBS = ["standing", "resting", "sitting"]
_MOTION = re.compile(r"\b(" + "|".join(MOVING_VERBS) + r")\b")
_RELATION = re.compile(r"^\s*(?P<a>.+?)\s+(?:(?:to|on)\s+the\s+)?(?P<side>left|right)\s+of\s+"
                       r"(?P<b>.+?)\s*[.!]?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class World:
    """Image size, ground line, soft-edge width (pixels) and the natural size spread."""

    height: int = 16
    width: int = 16
    ground: float = 0.2
    softness: float = 0.6
    size_sd: float = 0.08

    def __post_init__(self):
        if self.height < 4 or self.width < 4:
            raise ValueError(f"the image must be at least 4x4, got {self.height}x{self.width}")
        if not 0 < self.ground < 0.5:
            raise ValueError(f"ground must be in (0, 0.5), got {self.ground}")

    def background(self, dtype=torch.float32) -> torch.Tensor:
        """Sky above the ground line, earth below: ``(3, H, W)`` in [0, 1]."""
        ys = 1.0 - (torch.arange(self.height, dtype=dtype) + 0.5) / self.height
        sky = torch.tensor([0.60, 0.80, 1.00], dtype=dtype)
        earth = torch.tensor([0.45, 0.30, 0.15], dtype=dtype)
        below = (ys < self.ground).to(dtype)[None, :, None]
        return (sky[:, None, None] * (1 - below) + earth[:, None, None] * below).expand(
            3, self.height, self.width).clone()


@dataclass(frozen=True)
class Element:
    query: str                      # the sub-query text
    asset: str                      # retrieved (or true) asset name
    moving: bool


@dataclass(frozen=True)
class Plan:
    """Two elements, listed left to right as the prompt instructs."""

    elements: tuple[Element, Element]
    prompt: str = ""

    @property
    def assets(self) -> list[str]:
        return [e.asset for e in self.elements]

    @property
    def shapes(self) -> list[str]:
        return [ASSETS[a].shape for a in self.assets]


# ----------------------------------------------------------------------------- stage 1
def _strip_article(s: str) -> str:
    return re.sub(r"^(a|an|the)\s+", "", s.strip(), flags=re.IGNORECASE)


def decompose(prompt: str) -> tuple[str, str, bool, bool]:
    """Split ``prompt`` at its relation: ``(left sub-query, right sub-query, left moves, right moves)``.

    "A left of B" puts A on the left, "A right of B" puts B on the left."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a string, got {type(prompt).__name__}")
    m = _RELATION.match(prompt)
    if m is None:
        raise ValueError(f"the rule-based director found no 'left of' / 'right of' relation in "
                         f"{prompt!r}")
    a, b = _strip_article(m["a"]), _strip_article(m["b"])
    if not a or not b:
        raise ValueError(f"prompt {prompt!r} has an empty element around its relation")
    left, right = (a, b) if m["side"].lower() == "left" else (b, a)
    return left, right, bool(_MOTION.search(left.lower())), bool(_MOTION.search(right.lower()))


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def templated_prompts(n: int, rng: np.random.Generator) -> list[tuple[str, list[str], list[bool]]]:
    """``n`` prompts "a <adj> <noun> <verb> [to the] left|right of a <adj> <noun>" with their true
    assets and motion, listed left to right (at most one element moves)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    names = list(ASSETS)
    out = []
    for _ in range(n):
        ca, cb = rng.choice(len(names), size=2, replace=False)
        ca, cb = names[ca], names[cb]
        na, nb = (SYNONYMS[c][rng.integers(len(SYNONYMS[c]))] for c in (ca, cb))
        adj_a, adj_b = (ADJECTIVES[rng.integers(len(ADJECTIVES))] for _ in range(2))
        a_moves = bool(rng.random() < 0.5)
        verb = (MOVING_VERBS if a_moves else STATIC_VERBS)[rng.integers(3)]
        side = ["left", "right", "to the left", "to the right"][rng.integers(4)]
        text = f"{_article(adj_a)} {adj_a} {na} {verb} {side} of {_article(adj_b)} {adj_b} {nb}"
        if side.endswith("left"):
            out.append((text, [ca, cb], [a_moves, False]))
        else:
            out.append((text, [cb, ca], [False, a_moves]))
    return out


def retrieve(queries: Sequence[str], encode: Callable[[list[str]], torch.Tensor],
             descriptions: dict[str, str] | None = None) -> list[str]:
    """The asset whose description is most cosine-similar to each query under ``encode``
    (a map from a list of texts to an ``(n, d)`` tensor)."""
    descriptions = ASSET_DESCRIPTIONS if descriptions is None else descriptions
    queries = list(queries)
    if not queries:
        raise ValueError("retrieve needs at least one query")
    names = list(descriptions)
    e = torch.as_tensor(encode(queries + [descriptions[k] for k in names]), dtype=torch.float64)
    if e.ndim != 2 or e.shape[0] != len(queries) + len(names):
        raise ValueError(f"encode must return one row per text, got shape {tuple(e.shape)}")
    e = torch.nn.functional.normalize(e, dim=-1)
    sim = e[:len(queries)] @ e[len(queries):].T
    return [names[i] for i in sim.argmax(dim=1).tolist()]


def tfidf_encoder(corpus: Sequence[str]) -> Callable[[list[str]], torch.Tensor]:
    """The lexical baseline: TF-IDF word vectors (scikit-learn) fitted on ``corpus``."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer().fit(list(corpus))
    return lambda texts: torch.as_tensor(vec.transform(list(texts)).toarray())


def plan_prompt(prompt: str, encode: Callable[[list[str]], torch.Tensor]) -> Plan:
    """Stage 1 end to end: decompose by rules, retrieve each element's asset."""
    left, right, lm, rm = decompose(prompt)
    a, b = retrieve([left, right], encode)
    return Plan((Element(left, a, lm), Element(right, b, rm)), prompt)


# ----------------------------------------------------------------------------- stage 3
def _params(world: World, assets: Sequence[str], x: torch.Tensor, y: torch.Tensor,
            s: torch.Tensor) -> torch.Tensor:
    """Stack per-frame x, y, s (each ``(F, n)``) into sprite parameters ``(F, n, 7)``."""
    F, n = x.shape
    p = torch.zeros(F, n, N_PARAMS, dtype=torch.float64)
    p[..., 0], p[..., 1], p[..., 2] = x, y, torch.log(s)
    p[..., 4:7] = torch.tensor([ASSETS[a].colour for a in assets], dtype=torch.float64)
    return p


def natural_layout(plan: Plan, world: World, n_frames: int, rng: np.random.Generator) -> torch.Tensor:
    """A video that obeys the rules and the prompt: ``(F, 2, 7)``, the left element first.

    Left centre in [0.2, 0.35], right in [0.65, 0.8]; sizes :math:`S_c e^z`; every element on the
    ground; a moving element slides 0.08-0.15 in a random direction over the clip."""
    if isinstance(n_frames, bool) or not isinstance(n_frames, int) or n_frames < 2:
        raise ValueError(f"n_frames must be an int >= 2, got {n_frames!r}")
    t = torch.linspace(-0.5, 0.5, n_frames, dtype=torch.float64)[:, None]
    x0 = torch.tensor([rng.uniform(0.2, 0.35), rng.uniform(0.65, 0.8)], dtype=torch.float64)
    v = torch.tensor([(rng.uniform(0.08, 0.15) * rng.choice([-1, 1])) if e.moving else 0.0
                      for e in plan.elements], dtype=torch.float64)
    s = torch.tensor([ASSETS[a].size * np.exp(world.size_sd * rng.standard_normal())
                      for a in plan.assets], dtype=torch.float64)
    x = x0 + v * t
    s = s.expand(n_frames, 2)
    return _params(world, plan.assets, x, world.ground + s, s)


def coarse_guess(natural: torch.Tensor, world: World, rng: np.random.Generator, *,
                 scale_error: float = 0.4, float_range: tuple[float, float] = (0.03, 0.15)) -> torch.Tensor:
    """The multimodal-LLM stand-in: each element's scale times a factor in [1-e, 1+e], and the
    element lifted so that it floats ``float_range`` above the ground (the same in every frame)."""
    if not 0 <= scale_error < 1:
        raise ValueError(f"scale_error must be in [0, 1), got {scale_error}")
    p = natural.clone()
    n = p.shape[-2]
    f = torch.tensor(rng.uniform(1 - scale_error, 1 + scale_error, n), dtype=p.dtype)
    lift = torch.tensor(rng.uniform(*float_range, n), dtype=p.dtype)
    s = p[..., 2].exp() * f
    p[..., 2] = torch.log(s)
    p[..., 1] = world.ground + s + lift
    return p


def random_placement(coarse: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """The relation ignored: each element's path shifted to a centre drawn uniformly in [0.2, 0.8]
    (the broken stage 1 for the order control)."""
    p = coarse.clone()
    for k in range(p.shape[-2]):
        p[:, k, 0] += rng.uniform(0.2, 0.8) - p[:, k, 0].mean()
    return p


def sample_natural_frames(n: int, world: World, rng: np.random.Generator, *,
                          rules: bool = True) -> torch.Tensor:
    """``n`` rendered frames of two different assets, images in [-1, 1], ``(n, 3, H, W)``: the prior's
    training data. ``rules=False`` breaks both layout rules (log-uniform sizes over the three
    classes' range and heights anywhere in the sky) for a prior that saw no layout rules."""
    names = list(ASSETS)
    pairs = [(a, b) for a in names for b in names if a != b]
    which = rng.integers(len(pairs), size=n)
    x = rng.uniform(0.12, 0.88, size=(n, 2))
    z = world.size_sd * rng.standard_normal((n, 2))
    lo, hi = min(a.size for a in ASSETS.values()), max(a.size for a in ASSETS.values())
    out = torch.empty(n, 3, world.height, world.width)
    bg = world.background(torch.float64)
    for pi in range(len(pairs)):
        sel = np.flatnonzero(which == pi)
        if not len(sel):
            continue
        a, b = pairs[pi]
        if rules:
            s = np.array([ASSETS[a].size, ASSETS[b].size])[None] * np.exp(z[sel])
            y = world.ground + s
        else:
            s = np.exp(rng.uniform(np.log(lo), np.log(hi), size=(len(sel), 2)))
            y = rng.uniform(world.ground + s, 1.0 - s)
        p = _params(world, [a, b], torch.as_tensor(x[sel]), torch.as_tensor(y), torch.as_tensor(s))
        imgs = render([ASSETS[a].shape, ASSETS[b].shape], p, world.height, world.width,
                      background=bg, softness=world.softness)
        out[torch.as_tensor(sel)] = (2 * imgs - 1).float()
    return out


def render_video(plan_shapes: Sequence[str], params: torch.Tensor, world: World) -> torch.Tensor:
    """Frames of a video (``params`` ``(..., F, n, 7)``) as prior inputs in [-1, 1]."""
    return 2 * render(plan_shapes, params, world.height, world.width,
                      background=world.background(params.dtype), softness=world.softness) - 1


# ----------------------------------------------------------------------------- stage 4
def temporal_penalty(params: torch.Tensor) -> torch.Tensor:
    r""":math:`\sum(\Delta^2x)^2+(\Delta^2y)^2+(\Delta\log s)^2` over frames (dim -3), summed over
    elements and leading dimensions."""
    if params.ndim < 3 or params.shape[-3] < 3:
        raise ValueError("temporal_penalty needs params of shape (..., F >= 3, n, 7)")
    pos = params[..., 0:2]
    acc = pos[..., 2:, :, :] - 2 * pos[..., 1:-1, :, :] + pos[..., :-2, :, :]
    ds = params[..., 1:, :, 2] - params[..., :-1, :, 2]
    return (acc ** 2).sum() + (ds ** 2).sum()


@dataclass
class RefineConfig:
    steps: int = 200
    lr: float = 0.01
    sigma_min: float = 0.2
    sigma_max: float = 2.0
    temporal_weight: float = 100.0
    n_noise: int = 1
    weighting: str = "sigma"
    history_every: int = 0                        # record the parameters every k steps (0: never)
    trace: list = field(default_factory=list)

    def __post_init__(self):
        if self.steps < 0 or self.lr <= 0 or self.temporal_weight < 0:
            raise ValueError(f"need steps >= 0, lr > 0, temporal_weight >= 0; got {self.steps}, "
                             f"{self.lr}, {self.temporal_weight}")


def refine(denoiser, shapes: Sequence[str], params: torch.Tensor, world: World, cfg: RefineConfig,
           generator: torch.Generator) -> torch.Tensor:
    """Stage 4 on a batch of videos that share their shapes: ``params`` ``(B, F, n, 7)``; returns the
    refined parameters (x, y and log-scale of every frame move; rotation and colour stay)."""
    if params.ndim != 4 or params.shape[-1] != N_PARAMS or params.shape[-2] != len(shapes):
        raise ValueError(f"params must have shape (videos, frames, {len(shapes)}, {N_PARAMS}), "
                         f"got {tuple(params.shape)}")
    if cfg.temporal_weight > 0 and params.shape[1] < 3:
        raise ValueError("the temporal term needs at least 3 frames")
    fixed = params.detach().float()
    free = fixed[..., :3].clone().requires_grad_(True)
    opt = torch.optim.Adam([free], lr=cfg.lr)
    B, F = params.shape[:2]
    cfg.trace.clear()
    for step in range(cfg.steps):
        p = torch.cat([free, fixed[..., 3:]], dim=-1)
        frames = render_video(shapes, p, world).reshape(B * F, 3, world.height, world.width)
        loss = sds_surrogate(denoiser, frames, generator, sigma_min=cfg.sigma_min,
                             sigma_max=cfg.sigma_max, weighting=cfg.weighting, n_noise=cfg.n_noise)
        if cfg.temporal_weight > 0:
            loss = loss + cfg.temporal_weight * temporal_penalty(p)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if cfg.history_every and (step + 1) % cfg.history_every == 0:
            cfg.trace.append(torch.cat([free.detach(), fixed[..., 3:]], -1).double())
    return torch.cat([free.detach(), fixed[..., 3:]], dim=-1).double()


# ----------------------------------------------------------------------------- metrics
def _size_of(assets: Sequence[str]) -> torch.Tensor:
    return torch.tensor([ASSETS[a].size for a in assets], dtype=torch.float64)


def layout_error(params: torch.Tensor, assets: Sequence[str], world: World,
                 parts: bool = False):
    """Per video (``params`` ``(..., F, n, 7)``): mean over frames of [mean ground gap + mean
    pairwise log-scale-ratio error]. ``parts=True`` also returns the two terms."""
    gap = (bottom(params) - world.ground).abs().mean(-1)                   # (..., F)
    ls = params[..., 2] - torch.log(_size_of(assets)).to(params)           # log(s / S)
    n = ls.shape[-1]
    i, j = torch.triu_indices(n, n, 1)
    ratio = (ls[..., i] - ls[..., j]).abs().mean(-1)                        # (..., F)
    total = (gap + ratio).mean(-1)
    return (total, gap.mean(-1), ratio.mean(-1)) if parts else total


def order_kept(params: torch.Tensor) -> torch.Tensor:
    """Share of frames in which element 0 (the instructed left one) is left of element 1."""
    return (params[..., 0, 0] < params[..., 1, 0]).double().mean(-1)


def jitter(params: torch.Tensor, world: World) -> torch.Tensor:
    """Per video: mean over elements of std over frames of log-scale and of ground gap, plus the
    mean absolute acceleration of the horizontal path (all 0 for a natural video)."""
    ls = params[..., 2].std(-2)
    gap = (bottom(params) - world.ground).std(-2)
    x = params[..., 0]
    acc = (x[..., 2:, :] - 2 * x[..., 1:-1, :] + x[..., :-2, :]).abs().mean(-2)
    return (ls + gap + acc).mean(-1)
