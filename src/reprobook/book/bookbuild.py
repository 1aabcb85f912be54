"""Build the Jupyter Book from the runner's executed notebooks (execution off in the book).

The book is built in a staging copy, ``_build/stage-<profile>/``: the prose pages, the executed
notebooks of that profile in place of the committed (output-free) ones, the generated dashboard,
and the static assets the pages need offline: plotly.js from the installed plotly package and
MathJax from the installed ``jupyter-server-mathjax`` package. No page loads anything from the
network.

A book built from quick runs (smoke) still shows the faithful ones: each chapter page gets the
published ``cpu`` ledger beside its own, marked stale when it no longer matches the chapter, and the
landing page gets the book's totals.
"""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ..claims import ledger_html, ledger_rows
from .catalog import papers, parts
from .chapters import book_root, discover
from .dashboard import SHOWN, book_totals, render_dashboard
from .publish import load_published
from .profiles import PROFILES
from .toc import render_toc

__all__ = ["build_book", "stage_book", "BookBuildError"]


class BookBuildError(RuntimeError):
    pass


_GLUE_ROLE = re.compile(r"\{glue(?::[a-z]+)?\}`[^`]+`")
_GLUE_DIRECTIVE = re.compile(r"^```\{glue(?::[a-z]+)?\}[^\n]*\n(.*?\n)?```", re.M | re.S)


def _not_run_note(nb_text: str, profile: str) -> str:
    """The committed notebook with a warning on top; numbers its prose would glue from a run
    read "(not run)", since no run glued them."""
    nb = json.loads(nb_text)
    for cell in nb["cells"]:
        if cell.get("cell_type") == "markdown":
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            src = _GLUE_DIRECTIVE.sub("*(figure not run)*", src)
            cell["source"] = _GLUE_ROLE.sub("*(not run)*", src)
    note = {"cell_type": "markdown", "id": "rb-not-run", "metadata": {}, "source": [
        f"```{{warning}}\nThis chapter has not been run at the `{profile}` profile yet, so this "
        f"page shows its code without results. Run `reprobook run {{slug}} --profile {profile}` "
        "and rebuild the book.\n```"]}
    nb["cells"].insert(0, note)
    return json.dumps(nb)


def _cpu_note(d: dict) -> str:
    """", 120 s of CPU at load 1.2" for a published run that recorded them, else nothing."""
    if d.get("cpu_time_s") is None:
        return ""
    load = d.get("load_average") or []
    return f", {d['cpu_time_s']:.0f} s of CPU" + (f" at load {max(load):.1f}" if load else "")


def _published_cell(pub, profile: str) -> dict:
    """A markdown cell with a chapter's published ledger (e.g. the cpu run, in the smoke book)."""
    d = pub.data
    lines = [f"### The faithful run: `{profile}`, as published", "",
             f"This page executed the chapter at the quick `smoke` profile. The table below is the "
             f"`{profile}` run published in `results/{profile}/{d['part']}/{d['chapter']}.json` on "
             f"{(d.get('published') or '?')[:10]} (commit `{d.get('git_commit', '?')}`, "
             f"{d.get('wall_time_s') or 0:.0f} s{_cpu_note(d)} on "
             f"{html.escape(str(d.get('device', '?')))}).", ""]
    if pub.stale:
        lines += ["```{warning}", "This published result is **stale**: " + "; ".join(pub.stale) +
                  f" since it was published. Re-run `reprobook run {d['chapter']} --profile "
                  f"{profile} --publish`.", "```", ""]
    lines.append(ledger_html(ledger_rows(d["claims"]),
                             f"Published ledger: {html.escape(d['chapter'])} (profile "
                             f"<code>{profile}</code>)"))
    return {"cell_type": "markdown", "id": f"rb-published-{profile}", "metadata": {},
            "source": "\n".join(lines)}


def _with_published(nb_text: str, pub, profile: str) -> str:
    """Insert the published ledger after the chapter's own ledger cell (or at the end)."""
    nb = json.loads(nb_text)
    cells = nb["cells"]
    at = len(cells)
    for i, c in enumerate(cells):
        src = "".join(c.get("source", [])) if isinstance(c.get("source"), list) else c.get("source", "")
        if c.get("cell_type") == "code" and src.lstrip().startswith("# NBVAL_CHECK_OUTPUT"):
            at = i + 1
            break
    cells.insert(at, _published_cell(pub, profile))
    return json.dumps(nb)


def _totals_block(root: Path) -> str:
    t = book_totals(root)
    lines = ["", "## The book so far", "",
             f"{t['written']} of {t['papers']} papers have a chapter. Claims by verdict:", "",
             "| run | chapters | " + " | ".join(("reproduced", "not reproduced", "inconclusive",
                                                   "not testable offline", "not implemented"))
             + " |", "|---|---|---|---|---|---|---|"]
    keys = ("reproduced", "not reproduced", "inconclusive at this scale", "not testable offline",
            "not implemented")
    names = {"smoke": "smoke (CI, every change)", "cpu": "cpu (published, faithful)"}
    for profile in SHOWN:
        p = t["profiles"][profile]
        lines.append(f"| {names[profile]} | {p['chapters']} | " +
                     " | ".join(str(p["claims"].get(k, 0)) for k in keys) + " |")
    lines += ["", "Every claim, with its controls and where its threshold came from, is on "
              "[the claims dashboard](dashboard.md).", ""]
    return "\n".join(lines)


def _part_listing(part: str, chapters) -> str:
    """The papers of a part, with a link to each chapter that exists (generated, not typed)."""
    have = {c.slug for c in chapters}
    lines = ["", "## Papers in this part", "", "| # | paper | tier | chapter |", "|---|---|---|---|"]
    for p in papers():
        if p.part == part:
            ch = f"[{p.slug}](../../notebooks/{part}/{p.slug}.ipynb)" if p.slug in have \
                else "not yet written"
            lines.append(f"| {p.number} | {p.title.replace('|', '/')} | {p.tier} | {ch} |")
    return "\n".join(lines) + "\n"


def _vendor_assets(static: Path) -> None:
    import jupyter_server_mathjax
    import plotly

    static.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js",
                static / "plotly.min.js")
    mj = Path(jupyter_server_mathjax.__file__).parent / "static"
    shutil.copytree(mj, static / "mathjax", dirs_exist_ok=True)


def stage_book(profile: str = "smoke", root: Path | None = None) -> Path:
    """Assemble the sources of the book for ``profile``; return the staging folder."""
    if profile not in PROFILES:
        raise BookBuildError(f"unknown profile {profile!r}; profiles: {', '.join(PROFILES)}")
    root = book_root(root)
    stage = root / "_build" / f"stage-{profile}"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    shutil.copy(root / "_config.yml", stage / "_config.yml")
    (stage / "_toc.yml").write_text(render_toc(root))
    shutil.copytree(root / "book", stage / "book")
    (stage / "book" / "dashboard.md").write_text(render_dashboard(root))
    intro = stage / "book" / "intro.md"
    intro.write_text(intro.read_text() + _totals_block(root))
    shutil.copy(root / "CONTRIBUTING.md", stage / "CONTRIBUTING.md")
    chapters = discover(root)
    for part in parts():
        page = stage / "book" / "parts" / f"{part.id}.md"
        page.write_text(page.read_text() + _part_listing(part.id, chapters))
    for ch in chapters:
        dest = stage / "notebooks" / ch.part / f"{ch.slug}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        executed = root / "runs" / profile / ch.part / f"{ch.slug}.ipynb"
        if executed.exists():
            text = executed.read_text()
        else:
            text = _not_run_note(ch.notebook.read_text(), profile).replace("{slug}", ch.slug)
        for shown in SHOWN:
            pub = load_published(ch, shown, root) if shown != profile and shown != "smoke" \
                else None
            if pub is not None:
                text = _with_published(text, pub, shown)
        dest.write_text(text)
    _vendor_assets(stage / "book" / "_static")
    return stage


def build_book(profile: str = "smoke", root: Path | None = None, strict: bool = True,
               quiet: bool = False) -> Path:
    """Stage and build the HTML book; return the path of its ``index.html``."""
    root = book_root(root)
    stage = stage_book(profile, root)
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(stage), "--builder",
           "html", "--keep-going"]
    if strict:
        cmd += ["-W", "-n"]
    proc = subprocess.run(cmd, cwd=stage, text=True, capture_output=True)
    if proc.returncode != 0:
        raise BookBuildError(f"jupyter-book build failed (exit {proc.returncode}):\n"
                             f"{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}")
    if not quiet:
        print(proc.stdout[-1500:])
    html = root / "_build" / "html" / profile
    if html.exists():
        shutil.rmtree(html)
    shutil.copytree(stage / "_build" / "html", html)
    return html / "index.html"
