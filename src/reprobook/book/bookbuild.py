"""Build the Jupyter Book from the runner's executed notebooks (execution off in the book).

The book is built in a staging copy, ``_build/stage-<profile>/``: the prose pages, the executed
notebooks of that profile in place of the committed (output-free) ones, the generated dashboard,
and the static assets the pages need offline: plotly.js from the installed plotly package and
MathJax from the installed ``jupyter-server-mathjax`` package. No page loads anything from the
network.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from .catalog import papers, parts
from .chapters import book_root, discover
from .dashboard import render_dashboard
from .profiles import PROFILES
from .toc import render_toc

__all__ = ["build_book", "stage_book", "BookBuildError"]


class BookBuildError(RuntimeError):
    pass


def _not_run_note(nb_text: str, profile: str) -> str:
    nb = json.loads(nb_text)
    note = {"cell_type": "markdown", "metadata": {}, "source": [
        f"```{{warning}}\nThis chapter has not been run at the `{profile}` profile yet, so this "
        f"page shows its code without results. Run `reprobook run {{slug}} --profile {profile}` "
        "and rebuild the book.\n```"]}
    nb["cells"].insert(0, note)
    return json.dumps(nb)


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
            shutil.copy(executed, dest)
        else:
            dest.write_text(_not_run_note(ch.notebook.read_text(), profile)
                            .replace("{slug}", ch.slug))
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
