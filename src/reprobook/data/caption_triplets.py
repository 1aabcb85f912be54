r"""SugarCrepe++-style caption triplets from templates, with known meaning.

A *scene* here is two objects, each with one attribute, and a spatial relation between them,
:math:`s = (a_1, o_1, r, a_2, o_2)`, read "an :math:`a_1\,o_1` is :math:`r` an :math:`a_2\,o_2`".
Its **meaning** is the set of facts it asserts,

.. math::

   \mathrm{M}(s) = \big(\{(a_1, o_1), (a_2, o_2)\},\ \rho(r, o_1, o_2)\big),

where :math:`\rho` writes the relation in its primary direction (``right of`` :math:`(x, y)` is
``left of`` :math:`(y, x)`, ``below`` is the converse of ``above``, ...). The two nouns of a scene
differ, so :math:`\mathrm M` identifies a scene up to the converse rewriting. Two captions are
*semantically equivalent* iff they describe scenes with the same :math:`\mathrm M`.

A **triplet** (SugarCrepe++, Dumpala et al. 2024) is :math:`(P_1, P_2, N)`:

* :math:`P_1`: the canonical caption of :math:`s` ("a red cube is to the left of a blue sphere");
* :math:`P_2`: the same meaning in different words, one of :data:`P2_TEMPLATES` (the converse
  relation with the arguments exchanged, a fronted locative, a relative clause, a possessive, and
  synonyms of nouns, attributes and relation phrases);
* :math:`N`: the canonical caption of an edited scene :math:`s'` with
  :math:`\mathrm M(s') \ne \mathrm M(s)` -- a hard negative, lexically close to :math:`P_1`.

The five edits are the paper's subsets: ``swap-obj`` (the two nouns exchanged), ``swap-att`` (the
two attributes exchanged; needs :math:`a_1 \ne a_2`), ``replace-obj`` (one noun replaced by one not
in the scene), ``replace-att`` (one attribute replaced by another of the same kind: colour, size,
material) and ``replace-rel`` (the relation replaced by a non-equivalent one).

:func:`parse` inverts every template (it is the *oracle*: it reads the meaning back from a caption),
so tests and chapters can check that every :math:`P_2` means what :math:`P_1` means and no
:math:`N` does. :func:`tot_correct` is the paper's text-only (TOT) decision rule.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Vocabulary", "Scene", "Triplet", "SUBSETS", "P2_TEMPLATES", "TEXT_VOCAB",
           "SHAPES_VOCAB", "meaning", "random_scene", "edit", "canonical", "close_caption",
           "rewrite", "make_triplets", "parse", "tot_correct", "itt_correct"]

SUBSETS = ("swap-obj", "swap-att", "replace-obj", "replace-att", "replace-rel")

#: primary relation -> converse; every relation phrase has a P1 form ("is ... "), a fronted form,
#: a possessive form (with "it"/"its") and a synonym form (see ``_REL``)
_CONVERSE = {"left of": "right of", "above": "below", "in front of": "behind",
             "on top of": "under"}
_ALL_CONVERSE = {**_CONVERSE, **{v: k for k, v in _CONVERSE.items()}}

# relation -> (after "is", fronted locative, possessive "has X ...", synonym after "is")
_REL = {
    "left of": ("to the left of", "to the left of", "to its left", "on the left-hand side of"),
    "right of": ("to the right of", "to the right of", "to its right", "on the right-hand side of"),
    "above": ("above", "above", "above it", "over"),
    "below": ("below", "below", "below it", "beneath"),
    "in front of": ("in front of", "in front of", "in front of it", "ahead of"),
    "behind": ("behind", "behind", "behind it", "at the back of"),
    "on top of": ("on top of", "on top of", "on top of it", "resting on"),
    "under": ("under", "under", "under it", "underneath"),
}


@dataclass(frozen=True)
class Vocabulary:
    """Nouns, attributes grouped by kind, relations and the synonyms the rewrites may use.

    ``synonyms`` maps a noun or an attribute to a word or phrase of the same meaning (an attribute
    synonym may be a phrase such as "made of wood", used only where it reads as English)."""

    objects: tuple[str, ...]
    attributes: dict = field(hash=False)           # kind -> tuple of attributes
    relations: tuple[str, ...]
    synonyms: dict = field(default_factory=dict, hash=False)

    def __post_init__(self):
        if len(set(self.objects)) < 3:
            raise ValueError("a vocabulary needs at least 3 distinct nouns (replace-obj needs a "
                             "noun outside the scene)")
        for kind, atts in self.attributes.items():
            if len(set(atts)) < 2:
                raise ValueError(f"attribute kind {kind!r} needs at least 2 values")
        flat = self.all_attributes
        if len(set(flat)) != len(flat):
            raise ValueError("an attribute may belong to one kind only")
        bad = [r for r in self.relations if r not in _REL]
        if bad or not self.relations:
            raise ValueError(f"unknown relations {bad}; known: {sorted(_REL)}")
        if len(self.relations) < 2:
            raise ValueError("replace-rel needs at least 2 relations")
        words = set(self.objects) | set(flat)
        clash = [s for w, s in self.synonyms.items() if s in words and s != w]
        if clash:
            raise ValueError(f"synonyms {clash} are themselves vocabulary words: the oracle "
                             "could not read them back")

    @property
    def all_attributes(self) -> tuple[str, ...]:
        return tuple(a for atts in self.attributes.values() for a in atts)

    def kind_of(self, attribute: str) -> str:
        for kind, atts in self.attributes.items():
            if attribute in atts:
                return kind
        raise ValueError(f"unknown attribute {attribute!r}")


#: the text-only vocabulary of the reproduction notes (10 nouns, 8 attributes, 8 relations)
TEXT_VOCAB = Vocabulary(
    objects=("cube", "sphere", "cylinder", "dog", "cat", "car", "cup", "book", "chair", "lamp"),
    attributes={"colour": ("red", "blue", "green", "yellow"), "size": ("small", "large"),
                "material": ("wooden", "metal")},
    relations=tuple(_REL),
    synonyms={"cube": "block", "sphere": "ball", "car": "automobile", "cup": "mug",
              "chair": "seat", "large": "big", "small": "little", "wooden": "wood",
              "metal": "metallic"},
)

#: the vocabulary of rendered scenes (reprobook.data.scenes): flat shapes, colours, 2-D relations
SHAPES_VOCAB = Vocabulary(
    objects=("square", "circle", "triangle", "cross", "diamond", "ring"),
    attributes={"colour": ("red", "green", "blue", "yellow", "purple", "white")},
    relations=("left of", "right of", "above", "below"),
    synonyms={"circle": "disc", "square": "box", "diamond": "rhombus", "ring": "hoop"},
)


@dataclass(frozen=True)
class Scene:
    """``a1 o1`` is ``rel`` ``a2 o2``."""

    a1: str
    o1: str
    rel: str
    a2: str
    o2: str

    def __post_init__(self):
        if self.o1 == self.o2:
            raise ValueError(f"the two objects of a scene must differ, got {self.o1!r} twice")
        if self.rel not in _REL:
            raise ValueError(f"unknown relation {self.rel!r}; known: {sorted(_REL)}")


def meaning(s: Scene) -> tuple:
    """The facts ``s`` asserts: (set of attribute-noun pairs, relation in its primary direction)."""
    if s.rel in _CONVERSE:
        rel = (s.o1, s.rel, s.o2)
    else:
        rel = (s.o2, _ALL_CONVERSE[s.rel], s.o1)
    return (frozenset({(s.a1, s.o1), (s.a2, s.o2)}), rel)


@dataclass(frozen=True)
class Triplet:
    """One SugarCrepe++ item: captions ``p1``, ``p2``, ``n`` (and ``p1_close``, a positive that is
    lexically close to ``p1``: the single-positive SugarCrepe situation), with their scenes."""

    subset: str
    scene: Scene
    negative: Scene
    p1: str
    p2: str
    n: str
    p1_close: str
    template: int


def _syn(v: Vocabulary, w: str) -> str:
    return v.synonyms.get(w, w)


def canonical(s: Scene) -> str:
    """P1's template: ``a red cube is to the left of a blue sphere``."""
    return f"a {s.a1} {s.o1} is {_REL[s.rel][0]} a {s.a2} {s.o2}"


def close_caption(s: Scene) -> str:
    """A positive lexically close to P1 (articles changed): ``the red cube is to the left of the
    blue sphere``."""
    return f"the {s.a1} {s.o1} is {_REL[s.rel][0]} the {s.a2} {s.o2}"


def _converse(s: Scene) -> Scene:
    return Scene(s.a2, s.o2, _ALL_CONVERSE[s.rel], s.a1, s.o1)


def _t_converse(s, v):
    return canonical(_converse(s))


def _t_fronted(s, v):
    return f"{_REL[s.rel][1]} the {s.a2} {s.o2} there is a {s.a1} {s.o1}"


def _t_synonyms(s, v):
    return f"a {_syn(v, s.a1)} {_syn(v, s.o1)} is {_REL[s.rel][3]} a {_syn(v, s.a2)} {_syn(v, s.o2)}"


def _t_relative(s, v):
    return f"the {s.o1} that is {s.a1} is {_REL[s.rel][0]} the {s.o2} that is {s.a2}"


def _t_possessive(s, v):
    # "a blue sphere has a red cube to its left" means "a red cube is to the left of a blue sphere"
    return f"a {s.a2} {s.o2} has a {s.a1} {s.o1} {_REL[s.rel][2]}"


def _t_converse_synonyms(s, v):
    return _t_synonyms(_converse(s), v)


#: the rewrites P2 is drawn from (all meaning-preserving; checked by :func:`parse` in the tests)
P2_TEMPLATES = (_t_converse, _t_fronted, _t_synonyms, _t_relative, _t_possessive,
                _t_converse_synonyms)


def rewrite(s: Scene, template: int, vocab: Vocabulary = TEXT_VOCAB) -> str:
    """The caption of ``s`` in P2 template number ``template`` (0..5)."""
    if not isinstance(template, (int, np.integer)) or not 0 <= template < len(P2_TEMPLATES):
        raise ValueError(f"template must be an int in [0, {len(P2_TEMPLATES) - 1}], "
                         f"got {template!r}")
    return P2_TEMPLATES[int(template)](s, vocab)


def random_scene(rng: np.random.Generator, vocab: Vocabulary = TEXT_VOCAB,
                 distinct_attributes: bool = False) -> Scene:
    """Two different nouns, one attribute each (any kind), one relation, uniformly."""
    o1, o2 = rng.choice(len(vocab.objects), size=2, replace=False)
    atts = vocab.all_attributes
    while True:
        a1, a2 = rng.integers(len(atts), size=2)
        if not distinct_attributes or a1 != a2:
            break
    rel = vocab.relations[int(rng.integers(len(vocab.relations)))]
    return Scene(atts[a1], vocab.objects[o1], rel, atts[a2], vocab.objects[o2])


def edit(s: Scene, subset: str, rng: np.random.Generator,
         vocab: Vocabulary = TEXT_VOCAB) -> Scene | None:
    """The hard-negative scene of ``subset`` for ``s``, or None when the edit is impossible (a
    swap-att of equal attributes) or would not change the meaning (never for this grammar, but
    checked: a negative must mean something else)."""
    if subset == "swap-obj":
        out = Scene(s.a1, s.o2, s.rel, s.a2, s.o1)
    elif subset == "swap-att":
        if s.a1 == s.a2:
            return None
        out = Scene(s.a2, s.o1, s.rel, s.a1, s.o2)
    elif subset == "replace-obj":
        others = [o for o in vocab.objects if o not in (s.o1, s.o2)]
        new = others[int(rng.integers(len(others)))]
        out = Scene(s.a1, new, s.rel, s.a2, s.o2) if rng.random() < 0.5 else \
            Scene(s.a1, s.o1, s.rel, s.a2, new)
    elif subset == "replace-att":
        first = rng.random() < 0.5
        old = s.a1 if first else s.a2
        pool = [a for a in vocab.attributes[vocab.kind_of(old)] if a != old]
        new = pool[int(rng.integers(len(pool)))]
        out = Scene(new, s.o1, s.rel, s.a2, s.o2) if first else Scene(s.a1, s.o1, s.rel, new, s.o2)
    elif subset == "replace-rel":
        pool = [r for r in vocab.relations if r != s.rel]
        out = Scene(s.a1, s.o1, pool[int(rng.integers(len(pool)))], s.a2, s.o2)
    else:
        raise ValueError(f"unknown subset {subset!r}; one of {SUBSETS}")
    return None if meaning(out) == meaning(s) else out


def make_triplets(subset: str, n: int, rng: np.random.Generator,
                  vocab: Vocabulary = TEXT_VOCAB, templates: tuple[int, ...] | None = None
                  ) -> list[Triplet]:
    """``n`` independent triplets of ``subset``: a uniform scene, a uniform P2 template (from
    ``templates``, default all), the subset's edit for N. Scenes where the edit is impossible are
    redrawn (rejection sampling), so every triplet is valid."""
    if subset not in SUBSETS:
        raise ValueError(f"unknown subset {subset!r}; one of {SUBSETS}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    pool = tuple(range(len(P2_TEMPLATES))) if templates is None else tuple(int(t) for t in templates)
    if not pool or any(not 0 <= t < len(P2_TEMPLATES) for t in pool):
        raise ValueError(f"templates must be indices in [0, {len(P2_TEMPLATES) - 1}], got {templates!r}")
    out = []
    while len(out) < n:
        s = random_scene(rng, vocab, distinct_attributes=subset == "swap-att")
        neg = edit(s, subset, rng, vocab)
        if neg is None:
            continue
        t = pool[int(rng.integers(len(pool)))]
        out.append(Triplet(subset, s, neg, canonical(s), rewrite(s, t, vocab), canonical(neg),
                           close_caption(s), t))
    return out


# ----------------------------------------------------------------------------- the oracle
def _phrase_alternatives(vocab: Vocabulary):
    inv = {}
    for w in (*vocab.objects, *vocab.all_attributes):
        inv[w] = w
    for w, s in vocab.synonyms.items():
        inv[s] = w
    return inv


def parse(caption: str, vocab: Vocabulary = TEXT_VOCAB) -> Scene:
    """Read the scene back from a caption made by any template of this module (the oracle).

    Raises ``ValueError`` for a caption no template makes."""
    words = _phrase_alternatives(vocab)
    w = "|".join(sorted(map(re.escape, words), key=len, reverse=True))
    rel_forms = {}
    for r, forms in _REL.items():
        for i, f in enumerate(forms):
            rel_forms.setdefault((i, f), r)

    def rel_alt(i):
        return "|".join(sorted({re.escape(f) for (j, f) in rel_forms if j == i}, key=len,
                               reverse=True))

    def rel_of(i, phrase):
        return rel_forms[(i, phrase)]

    def sc(a1, o1, rel, a2, o2):
        return Scene(words[a1], words[o1], rel, words[a2], words[o2])

    c = caption.strip()
    patterns = [
        (rf"^(?:a|the) ({w}) ({w}) is ({rel_alt(0)}) (?:a|the) ({w}) ({w})$",
         lambda m: sc(m[1], m[2], rel_of(0, m[3]), m[4], m[5])),
        (rf"^a ({w}) ({w}) is ({rel_alt(3)}) a ({w}) ({w})$",
         lambda m: sc(m[1], m[2], rel_of(3, m[3]), m[4], m[5])),
        (rf"^({rel_alt(1)}) the ({w}) ({w}) there is a ({w}) ({w})$",
         lambda m: sc(m[4], m[5], rel_of(1, m[1]), m[2], m[3])),
        (rf"^the ({w}) that is ({w}) is ({rel_alt(0)}) the ({w}) that is ({w})$",
         lambda m: sc(m[2], m[1], rel_of(0, m[3]), m[5], m[4])),
        (rf"^a ({w}) ({w}) has a ({w}) ({w}) ({rel_alt(2)})$",
         lambda m: sc(m[3], m[4], rel_of(2, m[5]), m[1], m[2])),
    ]
    for pat, build in patterns:
        m = re.match(pat, c)
        if m:
            return build(m)
    raise ValueError(f"no template makes the caption {caption!r}")


# ----------------------------------------------------------------------------- the protocols
def _sims(name, x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one similarity per triplet (1-D), got shape {a.shape}")
    return a


def tot_correct(s_p1_p2, s_p1_n, s_p2_n) -> np.ndarray:
    r"""The paper's text-only decision: a triplet is right iff
    :math:`\mathrm{sim}(P_1, P_2) > \mathrm{sim}(P_1, N)` and
    :math:`\mathrm{sim}(P_1, P_2) > \mathrm{sim}(P_2, N)` (strict: a tie is wrong)."""
    a, b, c = _sims("s_p1_p2", s_p1_p2), _sims("s_p1_n", s_p1_n), _sims("s_p2_n", s_p2_n)
    if not a.shape == b.shape == c.shape:
        raise ValueError(f"similarities must have one value per triplet: {a.shape}, {b.shape}, "
                         f"{c.shape}")
    return (a > b) & (a > c)


def itt_correct(s_i_p1, s_i_p2, s_i_n) -> np.ndarray:
    r"""The paper's image-text decision: right iff both positives beat the negative given the
    image, :math:`\mathrm{sim}(I, P_1) > \mathrm{sim}(I, N)` and
    :math:`\mathrm{sim}(I, P_2) > \mathrm{sim}(I, N)`."""
    a, b, c = _sims("s_i_p1", s_i_p1), _sims("s_i_p2", s_i_p2), _sims("s_i_n", s_i_n)
    if not a.shape == b.shape == c.shape:
        raise ValueError(f"similarities must have one value per triplet: {a.shape}, {b.shape}, "
                         f"{c.shape}")
    return (a > c) & (b > c)
