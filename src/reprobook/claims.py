"""The claims ledger: what a chapter claims, what it measured, and the verdict that follows.

A chapter declares each claim with a *criterion* and later records the *measured value*, optionally
with an interval expressing its uncertainty (for example a 95 % confidence interval over seeds).
The verdict is a pure function of value, interval and criterion:

* no interval: ``reproduced`` if the value meets the criterion, else ``not reproduced``;
* with an interval ``[lo, hi]``: ``reproduced`` if every point of it meets the criterion,
  ``not reproduced`` if no point does, and ``inconclusive at this scale`` if it straddles;
* ``not testable offline``: declared with a reason, for claims that need what we cannot have here.

Nobody passes a verdict in. The ledger is written as JSON with the chapter, profile, parameters,
seeds, wall time, peak memory, package versions, device and git commit.
"""
from __future__ import annotations

import html
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Criterion", "at_least", "at_most", "between", "close_to", "is_true",
    "Claim", "Ledger", "VERDICTS", "REPRODUCED", "NOT_REPRODUCED", "INCONCLUSIVE", "NOT_TESTABLE",
    "NOT_RECORDED",
]

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive at this scale"
NOT_TESTABLE = "not testable offline"
NOT_RECORDED = "not recorded"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTABLE, NOT_RECORDED)

#: Environment variable through which the runner tells a chapter where to write its ledger.
LEDGER_PATH_ENV = "REPROBOOK_LEDGER"


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


@dataclass
class Claim:
    id: str
    statement: str
    source: str
    criterion: Criterion | None
    value: Any = None
    interval: tuple[float, float] | None = None
    detail: str = ""
    reason: str = ""
    verdict: str = NOT_RECORDED

    def to_json(self) -> dict:
        return {
            "id": self.id, "statement": self.statement, "source": self.source,
            "criterion": self.criterion.to_json() if self.criterion else None,
            "value": self.value, "interval": list(self.interval) if self.interval else None,
            "detail": self.detail, "reason": self.reason, "verdict": self.verdict,
        }


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
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"use_seeds(n) needs a positive int, got {n!r}")
        self.seeds = [self.seed + i for i in range(n)]
        return list(self.seeds)

    # ----------------------------------------------------------------------------- claims
    def claim(self, id: str, statement: str, *, source: str, criterion: Criterion) -> Claim:
        """Declare a claim: an id, our statement of it, where the paper makes it, and a criterion."""
        if not isinstance(criterion, Criterion):
            raise TypeError(f"claim {id!r}: criterion must come from at_least/at_most/between/"
                            f"close_to/is_true, got {criterion!r}")
        if id in self.claims:
            raise ValueError(f"claim {id!r} is declared twice")
        c = Claim(id=id, statement=statement, source=source, criterion=criterion)
        self.claims[id] = c
        return c

    def not_testable(self, id: str, statement: str, *, source: str = "", reason: str) -> Claim:
        """Declare a claim that cannot be tested offline here, and why."""
        if not reason:
            raise ValueError(f"claim {id!r}: not_testable needs a reason")
        if id in self.claims:
            raise ValueError(f"claim {id!r} is declared twice")
        c = Claim(id=id, statement=statement, source=source, criterion=None, reason=reason,
                  verdict=NOT_TESTABLE)
        self.claims[id] = c
        return c

    def record(self, id: str, value: Any, *, interval: tuple[float, float] | None = None,
               detail: str = "") -> str:
        """Record the measured value (and optionally its interval) and compute the verdict."""
        if id not in self.claims:
            known = ", ".join(self.claims) or "none declared"
            raise KeyError(f"unknown claim {id!r}; declared claims: {known}")
        c = self.claims[id]
        if c.criterion is None:
            raise ValueError(f"claim {id!r} was declared not testable; it takes no value")
        if isinstance(value, bool):
            value = 1.0 if value else 0.0
        value = _number(f"value of claim {id!r}", value)
        if interval is not None:
            lo, hi = (_number(f"interval of claim {id!r}", x) for x in interval)
            interval = (lo, hi)
        c.value, c.interval, c.detail = value, interval, detail
        c.verdict = c.criterion.judge(value, interval)
        return c.verdict

    def verdicts(self) -> dict[str, str]:
        return {k: c.verdict for k, c in self.claims.items()}

    # ----------------------------------------------------------------------------- output
    def to_json(self) -> dict:
        from .provenance import environment, git_commit, peak_memory_mb

        return {
            "chapter": self.chapter, "profile": self.profile, "seed": self.seed,
            "seeds": self.seeds, "parameters": self.parameters,
            "started": self._started, "wall_time_s": round(time.perf_counter() - self._t0, 3),
            "peak_memory_mb": peak_memory_mb(), "device": _device_text(self._device if self._device is not None
                                   or "torch" not in sys.modules else self.device),
            "git_commit": git_commit(), "environment": environment(),
            "claims": [c.to_json() for c in self.claims.values()],
        }

    def save(self, path: str | os.PathLike | None = None) -> str | None:
        """Write the ledger as JSON (atomically). Without a path, write where the runner asked
        (``$REPROBOOK_LEDGER``); when run by hand with no such request, write nothing."""
        path = path or os.environ.get(LEDGER_PATH_ENV)
        if not path:
            return None
        from .atomic import write_text

        write_text(path, json.dumps(self.to_json(), indent=2, default=_json_default))
        return str(path)

    def rows(self) -> list[dict]:
        out = []
        for c in self.claims.values():
            measured = "—" if c.value is None else fmt(c.value)
            if c.interval:
                measured += f" [{fmt(c.interval[0])}, {fmt(c.interval[1])}]"
            out.append({"claim": c.id, "statement": c.statement,
                        "criterion": c.criterion.text if c.criterion else "—",
                        "measured": measured, "verdict": c.verdict,
                        "note": c.reason or c.detail})
        return out

    def __repr__(self) -> str:
        lines = [f"Claims ledger: {self.chapter} (profile {self.profile}, seed {self.seed})"]
        for r in self.rows():
            lines.append(f"- {r['claim']}: {r['verdict']} (measured {r['measured']}, "
                         f"criterion {r['criterion']})" + (f"; {r['note']}" if r["note"] else ""))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("claim", "statement", "criterion", "measured",
                                                   "verdict", "note"))
        body = []
        for r in self.rows():
            cls = "rb-" + r["verdict"].replace(" ", "-")
            body.append("<tr>" + "".join(
                f"<td>{html.escape(str(r[k]))}</td>" for k in ("claim", "statement", "criterion",
                                                                  "measured")
            ) + f'<td class="rb-verdict {cls}">{html.escape(r["verdict"])}</td>'
                f"<td>{html.escape(r['note'])}</td></tr>")
        return (f'<table class="rb-ledger"><caption>Claims ledger: {html.escape(self.chapter)} '
                f"(profile <code>{html.escape(self.profile)}</code>, seed {self.seed})</caption>"
                f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")


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
