"""The claims ledger: what a chapter claims, what it measured, and the verdict that follows.

A chapter declares each claim with a *criterion* (a set of acceptable values), says where the
criterion's threshold came from (the paper, the reproduction notes' pass criterion, or ours, fixed
before the run), and later records what it measured. The verdict is a pure function of what was
recorded and the criterion; nobody passes a verdict in.

* An ``exact=True`` claim (an identity, a bound checked on every instance, a deterministic count)
  takes a single value: ``reproduced`` if it meets the criterion, else ``not reproduced``.
* Any other claim is statistical and takes an :class:`~reprobook.intervals.Estimate` (value,
  interval, the per-replicate samples and what a replicate is): ``reproduced`` if the whole
  interval meets the criterion, ``not reproduced`` if none of it does, ``inconclusive at this
  scale`` if it straddles, *and* whenever fewer than three replicates or a degenerate interval
  stand behind it. A bare number for a statistical claim is inconclusive too.
* ``not testable offline`` (the data, model or hardware cannot be had here) and ``not implemented``
  (testable offline, not built yet: a gap) are declared with a reason.

Every judged claim carries **controls**: re-runs in the chapter on a broken method (the baseline
swapped in, the key component removed) or, for a claim that fails, a positive control (the effect
planted), judged by the claim's own criterion. A check that cannot fail proves nothing, so a claim
is *judged* only when at least one control's verdict differs from the claim's on its own evidence
(not made inconclusive by too few replicates or a degenerate interval). A claim with no control at
all breaks the book's rule: :meth:`Ledger.save` and the runner refuse it, unless the chapter says
why no control is possible (:meth:`Ledger.no_control`).

A claim whose controls all land on its own verdict in a run is **not judged** there: that run could
not tell the method from the broken one. Its verdict becomes ``inconclusive at this scale``, the
ledger says why (``unseparated``, with the reason in ``why``), and the verdict the criterion gave is
kept as ``measured_verdict``. This holds whatever the criterion gave, ``inconclusive`` included.
For a ``volatile`` claim (a timing) this is the ordinary outcome of a loaded machine, and its
reason reads "not judged in this run" (nbval masks it, as it masks every volatile number); for a
deterministic claim it reads "not judged at this scale", and it is compared like any other text.
"""
from __future__ import annotations

import html
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from .intervals import Estimate

__all__ = [
    "Criterion", "at_least", "at_most", "between", "close_to", "is_true",
    "Claim", "Control", "Ledger", "LedgerError", "VERDICTS", "REPRODUCED", "NOT_REPRODUCED",
    "INCONCLUSIVE", "NOT_TESTABLE", "NOT_IMPLEMENTED", "NOT_RECORDED", "THRESHOLD_SOURCES",
    "rule_problems", "ledger_rows", "ledger_html",
]

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive at this scale"
NOT_TESTABLE = "not testable offline"
NOT_IMPLEMENTED = "not implemented"
NOT_RECORDED = "not recorded"
#: Why a volatile claim whose controls did not separate from it in this run is not judged.
UNSEPARATED = ("not judged in this run: no control reached a different verdict, so this timing could "
               "not tell the method from the broken one on this machine (the criterion alone gave "
               "'{measured}')")
#: Why a deterministic claim whose controls did not separate from it is not judged.
UNSEPARATED_AT_SCALE = ("not judged at this scale: no control reached a different verdict on its own "
                        "evidence, so this run could not tell the method from a broken one (the "
                        "criterion alone gave '{measured}')")
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTABLE, NOT_IMPLEMENTED, NOT_RECORDED)
#: Verdicts computed from a measurement (and so owing a control that flips).
JUDGED = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)

#: Where a criterion's threshold may come from.
THRESHOLD_SOURCES = {"paper": "the paper", "notes": "the reproduction notes' pass criterion",
                     "ours": "ours, fixed before the run"}
#: What a control is: a broken method expected to fail, or a planted effect expected to pass.
CONTROL_KINDS = ("broken", "positive")

#: Environment variable through which the runner tells a chapter where to write its ledger.
LEDGER_PATH_ENV = "REPROBOOK_LEDGER"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_+-]*$")
VOLATILE_NOTE = "a timing: it changes from run to run (the runner checks the claim's verdict)"


class LedgerError(ValueError):
    """A ledger that breaks a rule of the book (a claim without a control that flips, say)."""


def fmt(x: Any) -> str:
    """Format a measured number with four significant digits, so re-runs print identically."""
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, int):
        return str(x)
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    if x == 0:
        return "0"
    return f"{x:.4g}"


@dataclass(frozen=True)
class Criterion:
    """A closed set ``[low, high]`` of acceptable values (either end may be open to infinity)."""

    low: float = -math.inf
    high: float = math.inf
    text: str = ""

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high

    def judge(self, value: float, interval: tuple[float, float] | None = None) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return NOT_REPRODUCED
        if interval is None:
            return REPRODUCED if self.contains(float(value)) else NOT_REPRODUCED
        lo, hi = interval
        if lo > hi:
            raise ValueError(f"interval must be (low, high) with low <= high, got {interval}")
        if self.low <= lo and hi <= self.high:
            return REPRODUCED
        if hi < self.low or lo > self.high:
            return NOT_REPRODUCED
        return INCONCLUSIVE

    def to_json(self) -> dict:
        return {"low": _finite_or_none(self.low), "high": _finite_or_none(self.high), "text": self.text}


def _finite_or_none(x: float) -> float | None:
    return None if math.isinf(x) else x


def _number(name: str, x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) and not hasattr(x, "__float__"):
        raise TypeError(f"{name} must be a number, got {type(x).__name__} ({x!r})")
    return float(x)


def at_least(x: float) -> Criterion:
    """The measured value must be ``>= x``."""
    return Criterion(low=_number("at_least bound", x), text=f"≥ {fmt(x)}")


def at_most(x: float) -> Criterion:
    """The measured value must be ``<= x``."""
    return Criterion(high=_number("at_most bound", x), text=f"≤ {fmt(x)}")


def between(low: float, high: float) -> Criterion:
    """The measured value must lie in ``[low, high]``."""
    low, high = _number("between low", low), _number("between high", high)
    if low > high:
        raise ValueError(f"between(low, high) needs low <= high, got {low} > {high}")
    return Criterion(low=low, high=high, text=f"in [{fmt(low)}, {fmt(high)}]")


def close_to(target: float, tol: float) -> Criterion:
    """The measured value must be within ``tol`` of ``target``."""
    target, tol = _number("close_to target", target), _number("close_to tol", tol)
    if tol < 0:
        raise ValueError(f"close_to tolerance must be >= 0, got {tol}")
    return Criterion(low=target - tol, high=target + tol, text=f"{fmt(target)} ± {fmt(tol)}")


def is_true() -> Criterion:
    """The measured value is a yes/no fact that must hold (recorded as 1 or 0)."""
    return Criterion(low=1.0, high=1.0, text="holds")


# --------------------------------------------------------------------------------- measurement
@dataclass
class Measurement:
    """What was measured for a claim or a control, and the verdict it earns."""

    value: float | None = None
    estimate: Estimate | None = None
    verdict: str = NOT_RECORDED
    why: str = ""            # why a statistical result is inconclusive regardless of its interval

    @property
    def interval(self) -> tuple[float, float] | None:
        return self.estimate.interval if self.estimate is not None else None

    def to_json(self) -> dict:
        return {"value": self.value, "interval": list(self.interval) if self.interval else None,
                "estimate": self.estimate.to_json() if self.estimate is not None else None,
                "verdict": self.verdict, "why": self.why}


def measure(criterion: Criterion, exact: bool, what: str, x: Any) -> Measurement:
    """Judge ``x`` (a number for an exact claim, an :class:`Estimate` otherwise) by ``criterion``."""
    if isinstance(x, tuple) and len(x) == 3:
        raise TypeError(f"{what}: got a tuple; record an Estimate from reprobook.intervals "
                        "(mean, difference, ratio, bootstrap, rate), not (value, low, high)")
    if isinstance(x, Estimate):
        m = Measurement(value=x.value, estimate=x)
        m.verdict = criterion.judge(x.value, x.interval)
        why = x.why_inconclusive()
        if why:
            m.verdict, m.why = INCONCLUSIVE, why
        return m
    if isinstance(x, bool):
        x = 1.0 if x else 0.0
    value = _number(what, x)
    m = Measurement(value=value)
    if not exact:
        m.verdict = INCONCLUSIVE
        m.why = ("a single value with no replicates: record an Estimate from reprobook.intervals, "
                 "or declare the claim exact=True if it is deterministic")
    else:
        m.verdict = criterion.judge(value)
    return m


@dataclass
class Control:
    """A re-run on a broken method (``kind='broken'``) or with the effect planted
    (``kind='positive'``), judged by the claim's own criterion."""

    name: str
    what: str
    kind: str
    result: Measurement
    detail: str = ""

    @property
    def verdict(self) -> str:
        return self.result.verdict

    def to_json(self) -> dict:
        return {"name": self.name, "what": self.what, "kind": self.kind, "detail": self.detail,
                **self.result.to_json()}


@dataclass
class Claim:
    id: str
    statement: str
    source: str
    criterion: Criterion | None
    threshold: str = ""
    departure: str = ""
    exact: bool = False
    volatile: bool = False
    result: Measurement = field(default_factory=Measurement)
    detail: str = ""
    reason: str = ""
    declared: str = ""       # "" for a judged claim, else NOT_TESTABLE / NOT_IMPLEMENTED
    controls: list[Control] = field(default_factory=list)
    no_control: str = ""

    @property
    def unseparated(self) -> bool:
        """A claim with controls none of which reached a different verdict on its own evidence in
        this run (see the module's docstring): it is then not judged."""
        return (not self.declared and not self.no_control and bool(self.controls)
                and self.result.verdict in JUDGED
                and not any(k.verdict != self.result.verdict and not k.result.why
                            for k in self.controls))

    @property
    def verdict(self) -> str:
        if self.declared:
            return self.declared
        return INCONCLUSIVE if self.unseparated else self.result.verdict

    @property
    def value(self):
        return self.result.value

    @property
    def interval(self):
        return self.result.interval

    def to_json(self) -> dict:
        return {
            "id": self.id, "statement": self.statement, "source": self.source,
            "criterion": self.criterion.to_json() if self.criterion else None,
            "threshold": self.threshold, "departure": self.departure, "exact": self.exact,
            "volatile": self.volatile,
            **self.result.to_json(), "verdict": self.verdict,
            **({"why": "; ".join(filter(None, (
                self.result.why,
                (UNSEPARATED if self.volatile else UNSEPARATED_AT_SCALE).format(
                    measured=self.result.verdict)))),
                "unseparated": True,
                "measured_verdict": self.result.verdict} if self.unseparated else {}),
            "detail": self.detail, "reason": self.reason,
            "controls": [c.to_json() for c in self.controls], "no_control": self.no_control,
        }


def rule_problems(claims: list[dict]) -> list[str]:
    """The book's rules a ledger's claims (as saved in JSON) break, one sentence each.

    Every judged claim must have a control whose verdict differs from its own, or a recorded
    reason why no control is possible; a declared claim must be recorded. A control counts only if
    its verdict comes from the criterion: one that is inconclusive because of too few replicates or
    a degenerate interval (a broken method that ties the baseline exactly) does not. A claim left
    unjudged because its controls did not separate in this run (``unseparated``) owes nothing more:
    it is already inconclusive, and says why. So what is refused is a claim with no control at all
    (or, in a ledger saved before this rule, one whose controls did not separate).
    """
    out = []
    for c in claims:
        v = c.get("verdict")
        if v == NOT_RECORDED:
            out.append(f"claim {c['id']!r} was declared but never recorded")
        elif v in JUDGED and not c.get("no_control") and not c.get("unseparated"):
            controls = c.get("controls") or []
            # a control flips only on its own evidence: one made inconclusive by too few
            # replicates or a degenerate interval (an exact tie, say) shows nothing
            if not any(k.get("verdict") != v and not k.get("why") for k in controls):
                got = (f"none of its {len(controls)} control(s) reaches a different verdict on "
                       "its own evidence" if controls else "it has no control")
                out.append(f"claim {c['id']!r} ({v}): {got}. Record a control on a broken method "
                           "whose verdict differs (ledger.control), or say why none is possible "
                           "(ledger.no_control)")
    return out


_IPYTHON_NAMES = {"In", "Out", "exit", "quit", "get_ipython", "open"}
_SIMPLE = (int, float, str, bool, type(None))


def _is_parameter_value(v: Any) -> bool:
    if isinstance(v, _SIMPLE):
        return True
    if isinstance(v, (list, tuple)):
        return all(_is_parameter_value(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _is_parameter_value(x) for k, x in v.items())
    return False


def parameters_from(namespace: dict) -> dict:
    """The chapter's parameters: the plain-literal globals defined so far (the parameters cell)."""
    # ALL_CAPS names are constants a chapter imported (a palette, say), not parameters.
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in namespace.items()
            if not k.startswith("_") and k not in _IPYTHON_NAMES and not k.isupper()
            and _is_parameter_value(v)}


def imported_modules() -> list[str]:
    """The files of the ``reprobook`` package imported so far, relative to the package folder
    (the runner keys its cache on these, so editing an unrelated module re-runs nothing)."""
    import reprobook

    base = os.path.dirname(os.path.abspath(reprobook.__file__))
    out = set()
    for name, mod in list(sys.modules.items()):
        if name != "reprobook" and not name.startswith("reprobook."):
            continue
        path = getattr(mod, "__file__", None)
        if path and os.path.abspath(path).startswith(base + os.sep):
            out.add(os.path.relpath(os.path.abspath(path), base).replace(os.sep, "/"))
    return sorted(out)


@dataclass
class Ledger:
    """A chapter's claims and the provenance of the run that measured them."""

    chapter: str
    profile: str = "smoke"
    seed: int = 0
    parameters: dict = field(default_factory=dict)
    device_request: str = "auto"
    claims: dict[str, Claim] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)
    _t0: float = field(default_factory=time.perf_counter, repr=False)
    _started: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"), repr=False)
    _device: Any = field(default=None, repr=False)

    @property
    def device(self):
        """The ``torch.device`` the chapter runs on, resolved from ``device_request`` on first use
        (a chapter that never asks does not pay for importing torch)."""
        if self._device is None:
            from .devices import select_device

            self._device = select_device(self.device_request)
        return self._device

    # ----------------------------------------------------------------------------- construction
    @classmethod
    def start(cls, chapter: str, namespace: dict) -> "Ledger":
        """Start a chapter's ledger from its parameters (pass ``globals()``).

        Reads ``seed``, ``profile`` and ``device`` from the namespace, seeds every generator
        through :func:`reprobook.seed_everything`, and checks the device. An accelerator asked for
        by name is resolved at once, so a missing one fails before any work; ``"auto"`` and
        ``"cpu"`` wait until the chapter (or torch) needs them.
        """
        from .devices import check_device_name
        from .seeding import seed_everything

        if not isinstance(namespace, dict):
            raise TypeError("Ledger.start(chapter, namespace): pass the notebook's globals()")
        params = parameters_from(namespace)
        seed = seed_everything(params.get("seed", 0))
        profile = params.get("profile", "smoke")
        request = params.get("device", "auto")
        name = check_device_name(request)
        ledger = cls(chapter=chapter, profile=profile, seed=seed, parameters=params,
                     device_request=request, seeds=[seed])
        if name not in ("auto", "cpu") or "torch" in sys.modules:
            ledger.device  # noqa: B018  (resolve now: a missing GPU is an error before any work)
        return ledger

    def use_seeds(self, n: int) -> list[int]:
        """The ``n`` seeds a multi-seed experiment runs (``seed, seed+1, ...``), recorded here."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"use_seeds(n) needs a positive int, got {n!r}")
        self.seeds = [self.seed + i for i in range(n)]
        return list(self.seeds)

    # ----------------------------------------------------------------------------- declaring
    def _new(self, id: str) -> None:
        if not isinstance(id, str) or not _NAME.match(id):
            raise ValueError(f"claim id {id!r} must be letters, digits, '-', '_' or '+' "
                             "(it names the claim in the ledger and in glue keys)")
        if id in self.claims:
            raise ValueError(f"claim {id!r} is declared twice")

    def claim(self, id: str, statement: str, *, source: str, criterion: Criterion,
              threshold: str, departure: str = "", exact: bool = False,
              volatile: bool = False) -> Claim:
        """Declare a claim.

        ``source``: where the paper makes it. ``criterion``: the acceptable values.
        ``threshold``: where the criterion's threshold came from, one of ``"paper"``, ``"notes"``
        (the reproduction notes' pass criterion) or ``"ours"`` (fixed before the run).
        ``departure``: how and why the criterion departs from the paper's or the notes' (shown on
        the dashboard). ``exact=True``: a deterministic check that takes a single value; otherwise
        the claim is statistical and takes an :class:`~reprobook.intervals.Estimate`.
        ``volatile=True``: its measured numbers change from run to run even with the same seed (a
        timing); the ledger table marks them, and its controls', so nbval's re-run does not compare
        them (the runner still checks the claim's verdict against the sidecar).
        """
        self._new(id)
        if not isinstance(criterion, Criterion):
            raise TypeError(f"claim {id!r}: criterion must come from at_least/at_most/between/"
                            f"close_to/is_true, got {criterion!r}")
        if threshold not in THRESHOLD_SOURCES:
            raise ValueError(f"claim {id!r}: threshold={threshold!r} must say where the threshold "
                             f"came from: one of {', '.join(map(repr, THRESHOLD_SOURCES))}")
        if not isinstance(departure, str):
            raise TypeError(f"claim {id!r}: departure must be a sentence (str)")
        c = Claim(id=id, statement=statement, source=source, criterion=criterion,
                  threshold=threshold, departure=departure.strip(), exact=bool(exact),
                  volatile=bool(volatile))
        self.claims[id] = c
        return c

    def not_testable(self, id: str, statement: str, *, source: str = "", reason: str) -> Claim:
        """Declare a claim that cannot be tested offline here (data, model or hardware), and why."""
        return self._declared(id, statement, source, reason, NOT_TESTABLE, "not_testable")

    def not_implemented(self, id: str, statement: str, *, source: str = "", reason: str) -> Claim:
        """Declare a claim that could be tested offline but is not built yet: a gap, and why."""
        return self._declared(id, statement, source, reason, NOT_IMPLEMENTED, "not_implemented")

    def _declared(self, id, statement, source, reason, verdict, fn) -> Claim:
        self._new(id)
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"claim {id!r}: {fn} needs a reason")
        c = Claim(id=id, statement=statement, source=source, criterion=None, reason=reason,
                  declared=verdict)
        self.claims[id] = c
        return c

    # ----------------------------------------------------------------------------- recording
    def _judged(self, id: str) -> Claim:
        if id not in self.claims:
            known = ", ".join(self.claims) or "none declared"
            raise KeyError(f"unknown claim {id!r}; declared claims: {known}")
        c = self.claims[id]
        if c.criterion is None:
            raise ValueError(f"claim {id!r} was declared {c.declared}; it takes no value")
        return c

    def record(self, id: str, result: Any, *, detail: str = "") -> str:
        """Record what was measured for claim ``id`` and return the verdict it earns.

        ``result`` is an :class:`~reprobook.intervals.Estimate` for a statistical claim, or a
        single number (or bool) for an ``exact=True`` claim.
        """
        c = self._judged(id)
        c.result = measure(c.criterion, c.exact, f"value of claim {id!r}", result)
        c.detail = detail
        # the verdict may still change with the controls (an unseparated claim is not judged):
        # glued by save(), once every control is in
        self._glue(id, c.result, verdict=False)
        return c.verdict

    def control(self, id: str, name: str, result: Any, *, what: str, kind: str = "broken",
                detail: str = "") -> str:
        """Record a control of claim ``id``, judged by the claim's own criterion; return its verdict.

        A control is a re-run *in the chapter* on a broken method (``kind='broken'``: the baseline
        swapped in, the key component removed, a planted bug in the method, never in the
        reference) or with the effect planted (``kind='positive'``, for a claim that fails).
        ``name`` is a short id (glue key ``<claim>.<name>``), ``what`` says what was changed.
        """
        c = self._judged(id)
        if kind not in CONTROL_KINDS:
            raise ValueError(f"control kind must be one of {CONTROL_KINDS}, got {kind!r}")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"control name {name!r} must be a short id (letters, digits, '-', '_')")
        if any(k.name == name for k in c.controls):
            raise ValueError(f"claim {id!r} already has a control named {name!r}")
        if not isinstance(what, str) or not what.strip():
            raise ValueError(f"control {name!r} of {id!r}: say what was broken (what=...)")
        res = measure(c.criterion, c.exact, f"value of control {name!r} of {id!r}", result)
        c.controls.append(Control(name=name, what=what.strip(), kind=kind, result=res,
                                  detail=detail))
        self._glue(f"{id}.{name}", res)
        return res.verdict

    def no_control(self, id: str, reason: str) -> None:
        """Say why claim ``id`` can have no control whose verdict differs (shown in the ledger)."""
        c = self._judged(id)
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"no_control({id!r}) needs a reason")
        c.no_control = reason.strip()

    def verdicts(self) -> dict[str, str]:
        return {k: c.verdict for k, c in self.claims.items()}

    def problems(self) -> list[str]:
        """The rules this ledger breaks (see :func:`rule_problems`); empty when it is complete."""
        return rule_problems([c.to_json() for c in self.claims.values()])

    @staticmethod
    def _glue(key: str, m: Measurement, verdict: bool = True) -> None:
        from .glue import glue

        glue(f"{key}.value", m.value)
        if verdict:
            glue(f"{key}.verdict", m.verdict)
        if m.estimate is not None:
            glue(f"{key}.low", m.estimate.low)
            glue(f"{key}.high", m.estimate.high)
            glue(f"{key}.n", m.estimate.n)

    # ----------------------------------------------------------------------------- output
    def to_json(self) -> dict:
        from .book.provenance import environment, git_commit, peak_memory_mb

        return {
            "chapter": self.chapter, "profile": self.profile, "seed": self.seed,
            "seeds": self.seeds, "parameters": self.parameters,
            "started": self._started, "wall_time_s": round(time.perf_counter() - self._t0, 3),
            "peak_memory_mb": peak_memory_mb(), "device": _device_text(self._device if self._device is not None
                                   or "torch" not in sys.modules else self.device),
            "git_commit": git_commit(), "environment": environment(),
            "modules": imported_modules(),
            "claims": [c.to_json() for c in self.claims.values()],
        }

    def save(self, path: str | os.PathLike | None = None) -> str | None:
        """Write the ledger as JSON (atomically). Without a path, write where the runner asked
        (``$REPROBOOK_LEDGER``); when run by hand with no such request, write nothing.

        Raises :class:`LedgerError` (after writing) when the ledger breaks a rule of the book."""
        from .glue import glue

        for c in self.claims.values():  # settled now that every control is in (see record)
            if not c.declared and c.result.verdict != NOT_RECORDED:
                glue(f"{c.id}.verdict", c.verdict)
        path = path or os.environ.get(LEDGER_PATH_ENV)
        written = None
        if path:
            from .book.atomic import write_text

            write_text(path, json.dumps(self.to_json(), indent=2, default=_json_default))
            written = str(path)
        problems = self.problems()
        if problems:
            raise LedgerError("the ledger breaks the book's rules:\n- " + "\n- ".join(problems))
        return written

    def rows(self) -> list[dict]:
        """One row per claim, then one per control of it (``control`` names the control)."""
        return ledger_rows([c.to_json() for c in self.claims.values()])

    def __repr__(self) -> str:
        lines = [f"Claims ledger: {self.chapter} (profile {self.profile}, seed {self.seed})"]
        for r in self.rows():
            vol = r.get("volatile")
            measured = f"«{r['measured']}»" if vol else r["measured"]
            verdict = f"«{r['verdict']}»" if vol else r["verdict"]
            if r["control"]:
                lines.append(f"    control {r['control']}: {verdict} (measured "
                             f"{measured}); {r['statement'].split(': ', 1)[1]}")
                continue
            lines.append(f"- {r['claim']}: {verdict} (measured {measured}, "
                         f"criterion {r['criterion']})" + (f"; {r['note']}" if r["note"] else ""))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return ledger_html(self.rows(), f"Claims ledger: {html.escape(self.chapter)} (profile "
                                        f"<code>{html.escape(self.profile)}</code>, seed {self.seed})")


def _evidence(m: dict) -> str:
    e = m.get("estimate")
    if e:
        pct = f"{100 * e.get('level', 0.95):g}%"
        if e.get("k") is not None:
            return f"{e['k']}/{e['n']} {e['unit']}s, {pct} {e['method']} interval"
        return f"n = {e['n']} {e['unit']}s, {pct} {e['method']} interval"
    return "single value" if m.get("value") is not None else ""


def _measured(m: dict) -> str:
    if m.get("value") is None:
        return "—"
    out = fmt(m["value"])
    iv = m.get("interval")
    if iv:
        out += f" [{fmt(iv[0]) if iv[0] is not None else '-inf'}, " \
               f"{fmt(iv[1]) if iv[1] is not None else 'inf'}]"
    return out


def ledger_rows(claims: list[dict]) -> list[dict]:
    """Table rows from claims as saved in a ledger's JSON: each claim, then its controls."""
    out = []
    for c in claims:
        crit = c["criterion"]["text"] if c.get("criterion") else "—"
        if c.get("threshold"):
            crit += f" ({c['threshold']})"
        note = c.get("reason") or "; ".join(x for x in (c.get("why"), c.get("detail")) if x)
        if c.get("departure"):
            note = f"departs: {c['departure']}" + (f"; {note}" if note else "")
        if c.get("no_control"):
            note += ("; " if note else "") + f"no control: {c['no_control']}"
        vol = bool(c.get("volatile"))
        out.append({"claim": c["id"], "control": "", "statement": c["statement"],
                    "criterion": crit, "measured": _measured(c), "evidence": _evidence(c),
                    "verdict": c["verdict"], "note": note, "volatile": vol})
        for k in c.get("controls") or []:
            label = "positive control" if k.get("kind") == "positive" else "control"
            out.append({"claim": c["id"], "control": k["name"], "statement": f"{label}: {k['what']}",
                        "criterion": "same", "measured": _measured(k), "evidence": _evidence(k),
                        "verdict": k["verdict"], "volatile": vol,
                        "note": "; ".join(x for x in (k.get("why"), k.get("detail")) if x)})
    return out


def ledger_html(rows: list[dict], caption: str) -> str:
    """The ledger table (HTML) of :func:`ledger_rows`; ``caption`` is trusted HTML.

    Five columns (claim, statement, criterion, measured with its evidence beneath, verdict); a
    row's note (departure, detail, why it is inconclusive) runs under it across the table, so long
    notes do not squeeze the columns."""
    head = "".join(f"<th>{h}</th>" for h in ("claim", "statement", "criterion", "measured",
                                              "verdict"))
    body = []
    for r in rows:
        cls = "rb-" + r["verdict"].replace(" ", "-")
        first = (f'<td class="rb-control-name">↳ <code>{html.escape(r["control"])}</code></td>'
                 if r["control"] else f"<td><code>{html.escape(r['claim'])}</code></td>")
        kind = "rb-control-row" if r["control"] else "rb-claim-row"
        measured = html.escape(r["measured"])
        if r.get("volatile"):  # varies run to run: nbval masks what is inside this span
            measured = f'<span class="rb-volatile" title="{VOLATILE_NOTE}">{measured}</span>'
        if r["evidence"]:
            measured += f'<div class="rb-evidence">{html.escape(r["evidence"])}</div>'
        verdict = html.escape(r["verdict"])
        if r.get("volatile"):
            verdict = f'<span class="rb-volatile" title="{VOLATILE_NOTE}">{verdict}</span>'
        body.append(f'<tr class="{kind}">' + first
                    + f"<td>{html.escape(r['statement'])}</td><td>{html.escape(r['criterion'])}</td>"
                    + f"<td>{measured}</td>"
                    + f'<td class="rb-verdict {cls}"{" data-volatile" if r.get("volatile") else ""}>'
                    + f"{verdict}</td></tr>")
        if r["note"]:
            body.append(f'<tr class="{kind} rb-note-row"><td></td>'
                        f'<td colspan="4">{html.escape(r["note"])}</td></tr>')
    return (f'<div class="rb-ledger-wrap"><table class="rb-ledger"><caption>{caption}; control '
            f"rows (↳) re-run the check on a broken method</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _device_text(device) -> str:
    try:
        from .devices import device_description

        return device_description(device)
    except Exception:  # a ledger must still save if the device cannot be described
        return str(device)


def _json_default(x):
    if hasattr(x, "tolist"):
        return x.tolist()
    if hasattr(x, "__float__"):
        return float(x)
    return str(x)
