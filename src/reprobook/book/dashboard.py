"""The claims dashboard page, generated from run results (never typed).

Two sources stand side by side: ``smoke``, the last runs in ``runs/smoke/`` (what CI executes),
and ``cpu``, the faithful runs published in ``results/cpu/`` (committed, marked stale when the
chapter or the code it imports changed since). The page opens with a picture, a verdict matrix of
every paper's claims at both profiles, and per-part counts; then the papers, every claim with its
controls and where its threshold came from, the gaps (``not implemented``) and the cost of each run.
"""
from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..claims import (INCONCLUSIVE, NOT_IMPLEMENTED, NOT_RECORDED, NOT_REPRODUCED, NOT_TESTABLE,
                      REPRODUCED, fmt)
from .catalog import papers, parts
from .chapters import Chapter, book_root, discover
from .publish import load_published

__all__ = ["collect", "render_dashboard", "book_totals", "Column"]

#: The dashboard's two columns: CI's smoke runs and the published faithful runs.
SHOWN = ("smoke", "cpu")
ORDER = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTABLE, NOT_IMPLEMENTED, NOT_RECORDED)


@dataclass
class Column:
    """One chapter's result at one profile: its claims, where they came from, and whether stale."""

    profile: str
    claims: list[dict] = field(default_factory=list)
    status: str = "ok"          # ok | failed
    error: str = ""
    date: str = ""
    commit: str = ""
    wall_time_s: float | None = None
    cpu_time_s: float | None = None
    load_average: list | None = None
    peak_memory_mb: float | None = None
    device: str = ""
    source: str = ""            # "runs/smoke" or "results/cpu (published)"
    stale: list[str] = field(default_factory=list)

    @property
    def verdicts(self) -> list[str]:
        return [c["verdict"] for c in self.claims]


def _from_runs(root: Path, ch: Chapter, profile: str) -> Column | None:
    base = root / "runs" / profile / ch.part
    rec_path = base / f"{ch.slug}.run.json"
    if not rec_path.exists():
        return None
    rec = json.loads(rec_path.read_text())
    col = Column(profile, date=(rec.get("finished") or "")[:10], source=f"runs/{profile}",
                 wall_time_s=rec.get("wall_time_s"), cpu_time_s=rec.get("cpu_time_s"),
                 load_average=rec.get("load_average"))
    if rec.get("status") not in ("ok", "cached"):
        col.status, col.error = "failed", (rec.get("error") or "")[:300]
        return col
    led_path = base / f"{ch.slug}.ledger.json"
    if not led_path.exists():
        return None
    led = json.loads(led_path.read_text())
    col.claims, col.commit = led["claims"], led.get("git_commit", "")
    col.peak_memory_mb, col.device = led.get("peak_memory_mb"), led.get("device", "")
    return col


def _from_published(root: Path, ch: Chapter, profile: str) -> Column | None:
    pub = load_published(ch, profile, root)
    if pub is None:
        return None
    d = pub.data
    return Column(profile, claims=d["claims"], date=(d.get("published") or "")[:10],
                  commit=d.get("git_commit", ""), wall_time_s=d.get("wall_time_s"),
                  cpu_time_s=d.get("cpu_time_s"), load_average=d.get("load_average"),
                  peak_memory_mb=d.get("peak_memory_mb"), device=d.get("device", ""),
                  source=f"results/{profile} (published)", stale=pub.stale)


def collect(root: Path | None = None) -> dict[tuple[str, str], Column]:
    """``{(slug, profile): Column}`` for smoke (runs) and cpu (published results)."""
    root = book_root(root)
    found = {}
    for ch in discover(root):
        smoke = _from_runs(root, ch, "smoke")
        if smoke:
            found[(ch.slug, "smoke")] = smoke
        cpu = _from_published(root, ch, "cpu")
        if cpu:
            found[(ch.slug, "cpu")] = cpu
    return found


def _badge(verdict: str, text: str | None = None) -> str:
    return (f'<span class="rb-verdict rb-{verdict.replace(" ", "-")}">'
            f"{html.escape(text or verdict)}</span>")


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _count(verdicts: list[str]) -> dict[str, int]:
    return {v: verdicts.count(v) for v in ORDER if v in verdicts}


def _summary(col: Column | None) -> str:
    if col is None:
        return "—"
    if col.status != "ok":
        return _badge(NOT_RECORDED, "run failed")
    parts_ = [f"{n} {_badge(v)}" for v, n in _count(col.verdicts).items()]
    out = ", ".join(parts_) or "no claims"
    if col.stale:
        out += ' <span class="rb-stale">stale</span>'
    return out


def book_totals(root: Path | None = None) -> dict:
    """Chapters written and claims by verdict at each shown profile (for the landing page)."""
    root = book_root(root)
    results = collect(root)
    out = {"written": len(discover(root)), "papers": len(papers()), "profiles": {}}
    for profile in SHOWN:
        vs = [v for (s, p), col in results.items() if p == profile for v in col.verdicts]
        out["profiles"][profile] = {"chapters": sum(1 for (s, p) in results if p == profile),
                                    "claims": _count(vs)}
    return out


def _matrix(chapters: dict[str, Chapter], results: dict) -> list[str]:
    """An HTML grid: a row per paper, a square per claim, smoke on the left and cpu on the right."""
    titles = {p.id: p.title for p in parts()}
    rows = ['<div class="rb-matrix" role="img" aria-label="verdict of every claim, smoke and cpu">',
            '<div class="rb-matrix-head"><span></span><span>smoke (CI)</span>'
            '<span>cpu (published)</span></div>']
    order = {part.id: i for i, part in enumerate(parts())}
    current = None
    for p in sorted(papers(), key=lambda p: (order[p.part], p.number)):
        if p.part != current:
            current = p.part
            rows.append(f'<div class="rb-matrix-part">{html.escape(titles[p.part])}</div>')
        ch = chapters.get(p.slug)
        label = (f'<a href="../notebooks/{p.part}/{p.slug}.html">{p.number} {p.slug}</a>'
                 if ch else f'<span class="rb-unwritten">{p.number} {p.slug}</span>')
        cells = []
        for profile in SHOWN:
            col = results.get((p.slug, profile))
            if ch is None:
                cells.append('<span class="rb-sq-row"></span>')
                continue
            if col is None:
                cells.append('<span class="rb-sq-row"><span class="rb-sq-none">not run</span></span>')
                continue
            if col.status != "ok":
                cells.append('<span class="rb-sq-row"><span class="rb-sq rb-not-recorded" '
                             'title="the run failed"></span></span>')
                continue
            sq = "".join(
                f'<span class="rb-sq rb-{c["verdict"].replace(" ", "-")}" '
                f'title="{html.escape(p.slug)} · {html.escape(c["id"])}: '
                f'{html.escape(c["verdict"])}"></span>' for c in col.claims)
            if col.stale:
                sq += '<span class="rb-stale" title="' + html.escape("; ".join(col.stale)) + \
                      '">stale</span>'
            cells.append(f'<span class="rb-sq-row">{sq}</span>')
        rows.append(f'<div class="rb-matrix-row">{label}{"".join(cells)}</div>')
    legend = " ".join(f'<span class="rb-sq rb-{v.replace(" ", "-")}"></span> {v}'
                      for v in ORDER[:-1])
    rows.append(f'<div class="rb-matrix-legend">{legend}</div></div>')
    return rows


def _part_counts(chapters: dict[str, Chapter], results: dict) -> list[str]:
    out = ["| part | chapters | profile | " + " | ".join(ORDER[:-1]) + " |",
           "|---|---|---|" + "---|" * (len(ORDER) - 1)]
    for part in parts():
        mine = [p for p in papers() if p.part == part.id]
        written = sum(1 for p in mine if p.slug in chapters)
        for profile in SHOWN:
            vs = [v for p in mine for v in (results[(p.slug, profile)].verdicts
                                           if (p.slug, profile) in results else [])]
            counts = _count(vs)
            out.append(f"| {part.title if profile == 'smoke' else ''} | "
                       f"{f'{written} of {len(mine)}' if profile == 'smoke' else ''} | {profile} | "
                       + " | ".join(str(counts.get(v, 0)) for v in ORDER[:-1]) + " |")
    return out


def _claim_text(c: dict | None) -> tuple[str, str]:
    if c is None:
        return "—", "—"
    measured = "—" if c.get("value") is None else fmt(c["value"])
    iv = c.get("interval")
    if iv and None not in iv:
        measured += f" [{fmt(iv[0])}, {fmt(iv[1])}]"
    e = c.get("estimate")
    if e:
        measured += f" (n={e['n']} {e['unit']})"
    return measured, _badge(c["verdict"])


def _controls_text(c: dict | None) -> str:
    if c is None:
        return ""
    if c.get("no_control"):
        return f"none: {_cell(c['no_control'])}"
    return "; ".join(f"`{k['name']}` {_badge(k['verdict'])}" for k in c.get("controls") or [])


def render_dashboard(root: Path | None = None) -> str:
    root = book_root(root)
    chapters: dict[str, Chapter] = {c.slug: c for c in discover(root)}
    results = collect(root)
    titles = {p.id: p.title for p in parts()}
    totals = book_totals(root)
    out = ["# Claims dashboard", "",
           "Every paper of the book, every claim a chapter checks, and the verdict computed from what "
           "its run measured. Two runs stand side by side: **smoke**, the last run of each chapter at "
           "the smoke profile (what CI executes on every change, seconds per chapter), and **cpu**, "
           "the faithful run published in `results/cpu/` (minutes per chapter on 2 cores). A "
           "published result is marked *stale* when the chapter, the code it imports or its "
           "parameters changed after it was published. Nothing on this page is typed by hand; "
           "verdicts are explained in [the methodology](methodology.md).", ""]
    line = [f"**{totals['written']} of {totals['papers']} chapters written.**"]
    for profile in SHOWN:
        t = totals["profiles"][profile]
        counts = ", ".join(f"{n} {_badge(v)}" for v, n in t["claims"].items()) or "none yet"
        line.append(f"At `{profile}` ({t['chapters']} chapters): {counts}.")
    out += [" ".join(line), ""]
    out += ["## The verdict matrix", "",
            "One row per paper, one square per claim, in the order the chapter declares them; hover "
            "a square for the claim. Grey rows are papers without a chapter yet.", ""]
    out += _matrix(chapters, results) + [""]
    out += ["## Per part", ""] + _part_counts(chapters, results) + [""]
    # ---- papers
    out += ["## Papers", "", "| # | paper | part | tier | chapter | smoke | cpu (published) |",
            "|---|---|---|---|---|---|---|"]
    for p in papers():
        ch = chapters.get(p.slug)
        if ch is None:
            out.append(f"| {p.number} | {_cell(p.title)} | {titles[p.part]} | {p.tier} | "
                       "not yet written | | |")
            continue
        link = f"[{p.slug}](../notebooks/{p.part}/{p.slug}.ipynb)"
        out.append(f"| {p.number} | {_cell(p.title)} | {titles[p.part]} | {p.tier} | {link} | "
                   f"{_summary(results.get((p.slug, 'smoke')))} | "
                   f"{_summary(results.get((p.slug, 'cpu')))} |")
    # ---- claims, smoke and cpu side by side
    out += ["", "## Claims", "",
            "The threshold's source is `paper`, `notes` (the pass criterion of the reproduction "
            "notes) or `ours` (fixed before the run); a departure from the paper or the notes is "
            "stated. Controls re-run the check on a broken method and must reach a different "
            "verdict.", "",
            "| chapter | claim | statement | criterion | smoke | smoke verdict | cpu | cpu verdict "
            "| controls (cpu, else smoke) |",
            "|---|---|---|---|---|---|---|---|---|"]
    failed = []
    for slug, ch in chapters.items():
        cols = {pr: results.get((slug, pr)) for pr in SHOWN}
        for pr, col in cols.items():
            if col is not None and col.status != "ok":
                failed.append(f"| {slug} | {pr} | {_cell(col.error[:200])} | {col.date} |")
        ids: list[str] = []
        by = {}
        for pr, col in cols.items():
            if col is not None and col.status == "ok":
                by[pr] = {c["id"]: c for c in col.claims}
                ids += [i for i in by[pr] if i not in ids]
        for cid in ids:
            s, c = by.get("smoke", {}).get(cid), by.get("cpu", {}).get(cid)
            ref = c or s
            crit = ref["criterion"]["text"] if ref.get("criterion") else "—"
            if ref.get("threshold"):
                crit += f" ({ref['threshold']})"
            if ref.get("departure"):
                crit += f"; departs: {_cell(ref['departure'])}"
            if not ref.get("criterion"):
                crit = _cell(ref.get("reason", ""))
            sm, sv = _claim_text(s)
            cm, cv = _claim_text(c)
            if c is not None and cols["cpu"].stale:
                cv += ' <span class="rb-stale">stale</span>'
            out.append(f"| {slug} | `{cid}` | {_cell(ref['statement'])} | {crit} | {sm} | {sv} | "
                       f"{cm} | {cv} | {_controls_text(c or s)} |")
    if failed:
        out += ["", "### Failed runs", "", "| chapter | profile | error | date |",
                "|---|---|---|---|"] + failed
    # ---- gaps
    gaps = []
    for slug, ch in chapters.items():
        seen = set()
        for pr in SHOWN:
            col = results.get((slug, pr))
            for c in (col.claims if col and col.status == "ok" else []):
                if c["verdict"] == NOT_IMPLEMENTED and c["id"] not in seen:
                    seen.add(c["id"])
                    gaps.append(f"| {slug} | `{c['id']}` | {_cell(c['statement'])} | "
                                f"{_cell(c.get('reason', ''))} |")
    out += ["", "## Gaps: claims not implemented yet", "",
            "Claims a chapter could test offline but does not yet. Each one is work to do, not a "
            "limit of the machine.", ""]
    out += (["| chapter | claim | statement | why not yet |", "|---|---|---|---|"] + gaps
            if gaps else ["None."])
    # ---- cost
    out += ["", "## Cost", "", "Wall time of the whole notebook, the CPU time of its executor and "
            "kernel, the machine's 1-minute load average at the start and the end of the run, and "
            "the kernel's peak resident memory, as measured by the run that produced the ledger. On "
            "a shared machine wall time grows with the load; CPU time much less (runs from before "
            "CPU time was recorded show a dash).", "",
            "| chapter | profile | wall time (s) | CPU time (s) | load | peak memory (MB) | device "
            "| date | commit |",
            "|---|---|---|---|---|---|---|---|---|"]
    for (slug, profile), col in sorted(results.items()):
        if col.status == "ok":
            cpu = fmt(col.cpu_time_s) if col.cpu_time_s is not None else "—"
            load = ("—" if not col.load_average else
                    " → ".join(f"{v:.1f}" for v in col.load_average))
            out.append(f"| {slug} | {profile} | {fmt(col.wall_time_s or 0)} | {cpu} | {load} | "
                       f"{fmt(col.peak_memory_mb or 0)} | {_cell(col.device)} | {col.date} | "
                       f"`{col.commit}` |")
    return "\n".join(out) + "\n"
