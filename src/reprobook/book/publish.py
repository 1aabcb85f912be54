"""Published results: the faithful (``cpu``) ledgers, committed so the book shows them.

``reprobook run --profile cpu --publish`` writes ``results/cpu/<part>/<slug>.json`` for each chapter
that finished: its claims (values, intervals with their samples, controls, verdicts), the
parameters, wall time, peak memory, device, commit and date, and the digests of what it depended
on. No notebook is kept, so the file stays small.

A published result is **stale** when the chapter's notebook, the ``reprobook`` files it imported or
its parameters for that profile have changed since; the book and ``reprobook list`` say so. The
installed environment is not compared: a result published on another machine is not stale for that.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .atomic import write_text
from .chapters import Chapter, book_root

__all__ = ["Published", "publish", "load_published", "published_path", "RESULTS_DIR"]

RESULTS_DIR = "results"


def published_path(chapter: Chapter, profile: str, root: Path | None = None) -> Path:
    return book_root(root) / RESULTS_DIR / profile / chapter.part / f"{chapter.slug}.json"


def _digests(chapter: Chapter, parameters: dict, modules: list[str] | None) -> dict:
    from .runner import modules_digest, notebook_digest

    return {"notebook": notebook_digest(chapter.notebook),
            "modules": modules_digest(modules),
            "parameters": json.dumps(parameters, sort_keys=True)}


def publish(chapter: Chapter, profile: str, ledger: dict, record: dict,
            root: Path | None = None) -> Path:
    """Write the published result of one finished run (its ledger and run record)."""
    params = chapter.parameters_for(profile)
    data = {
        "chapter": chapter.slug, "part": chapter.part, "profile": profile,
        "paper": chapter.paper.number, "published": record.get("finished"),
        "git_commit": ledger.get("git_commit"), "wall_time_s": record.get("wall_time_s"),
        "cpu_time_s": record.get("cpu_time_s"), "load_average": record.get("load_average"),
        "ledger_wall_time_s": ledger.get("wall_time_s"),
        "peak_memory_mb": ledger.get("peak_memory_mb"), "device": ledger.get("device"),
        "environment": ledger.get("environment"), "seeds": ledger.get("seeds"),
        "parameters": ledger.get("parameters"), "modules": ledger.get("modules"),
        "digests": _digests(chapter, params, ledger.get("modules")),
        "claims": ledger["claims"],
    }
    path = published_path(chapter, profile, root)
    write_text(path, json.dumps(data, indent=1, sort_keys=False) + "\n")
    return path


@dataclass
class Published:
    data: dict
    stale: list[str]            # why it is out of date; empty when current

    @property
    def verdicts(self) -> dict[str, str]:
        return {c["id"]: c["verdict"] for c in self.data["claims"]}


def load_published(chapter: Chapter, profile: str, root: Path | None = None) -> Published | None:
    """The published result of ``chapter`` at ``profile`` with the reasons it is stale, or None."""
    path = published_path(chapter, profile, root)
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    now = _digests(chapter, chapter.parameters_for(profile), data.get("modules"))
    then = data.get("digests", {})
    why = []
    if now["notebook"] != then.get("notebook"):
        why.append("the notebook changed")
    if now["modules"] != then.get("modules"):
        why.append("code it imports changed")
    if now["parameters"] != then.get("parameters"):
        why.append(f"its {profile} parameters changed")
    return Published(data, why)
