import json

import pytest

from conftest import ROOT, make_chapter
from reprobook.book.bookbuild import BookBuildError, stage_book
from reprobook.book.dashboard import book_totals, render_dashboard


def claim(cid="rate", verdict="reproduced", control_verdict="not reproduced", **extra):
    return {"id": cid, "statement": "a | b", "value": 0.5, "interval": [0.4, 0.6],
            "estimate": {"value": 0.5, "low": 0.4, "high": 0.6, "n": 5, "unit": "seed",
                         "method": "t", "level": 0.95, "samples": [0.5] * 5},
            "verdict": verdict, "criterion": {"text": "≤ 0.85"}, "threshold": "notes",
            "departure": "", "reason": "", "detail": "", "why": "",
            "controls": [{"name": "swap", "what": "baseline in its place", "kind": "broken",
                          "value": 1.0, "interval": None, "estimate": None,
                          "verdict": control_verdict, "why": "", "detail": ""}],
            "no_control": "", **extra}


def fake_result(root, slug="h-pmd", part="rl", profile="smoke", status="ok", claims=None):
    base = root / "runs" / profile / part
    base.mkdir(parents=True, exist_ok=True)
    (base / f"{slug}.run.json").write_text(json.dumps({"status": status, "wall_time_s": 3.21,
                                                       "error": "boom" if status != "ok" else None,
                                                       "finished": "2026-11-30T00:00:00"}))
    if status == "ok":
        (base / f"{slug}.ledger.json").write_text(json.dumps({
            "started": "2026-11-30T00:00:00", "git_commit": "abc", "peak_memory_mb": 321.0,
            "device": "cpu", "claims": claims or [claim()]}))


def fake_published(root, slug="h-pmd", part="rl", claims=None):
    """Publish through the real code path, from a fake cpu run."""
    from reprobook.book.chapters import find
    from reprobook.book.publish import publish

    led = {"claims": claims or [claim(verdict="not reproduced", control_verdict="reproduced")],
           "git_commit": "def", "device": "cpu", "peak_memory_mb": 10.0, "modules": ["claims.py"],
           "parameters": {"n": 3}}
    return publish(find(slug), "cpu", led, {"finished": "2026-12-01T00:00:00", "wall_time_s": 99,
                                            "cpu_time_s": 87.5, "load_average": [1.25, 2.0]})


def test_dashboard_shows_matrix_smoke_and_published_cpu_controls_and_gaps(tiny_book):
    make_chapter(tiny_book, "h-pmd")
    make_chapter(tiny_book, "clipped-sgd")
    fake_result(tiny_book, claims=[claim(), {
        "id": "lfa", "statement": "linear FA", "criterion": None, "verdict": "not implemented",
        "reason": "not built yet", "value": None, "interval": None, "controls": []}])
    fake_result(tiny_book, "clipped-sgd", "optimization", status="error")
    fake_published(tiny_book)
    md = render_dashboard()
    assert md.count("not yet written") == 74
    assert "[h-pmd](../notebooks/rl/h-pmd.ipynb)" in md
    assert 'class="rb-matrix"' in md and md.count('class="rb-matrix-row"') == 76
    assert 'title="h-pmd · rate: not reproduced"' in md  # cpu square
    row = next(line for line in md.splitlines() if line.startswith("| h-pmd | `rate` |"))
    assert "≤ 0.85 (notes)" in row and "0.5 [0.4, 0.6] (n=5 seed)" in row
    assert row.count("rb-reproduced") >= 2 and "rb-not-reproduced" in row  # smoke, cpu, controls
    assert "`swap`" in row
    assert "| h-pmd | `lfa` | linear FA | not built yet |" in md  # the gaps table
    assert "boom" in md
    assert "| h-pmd | smoke | 3.21 | — | — | 321 | cpu |" in md   # a run from before CPU time was kept
    assert "| h-pmd | cpu | 99 | 87.5 | 1.2 → 2.0 | 10 | cpu |" in md
    assert "2 of 76 chapters written" in md
    t = book_totals()
    assert t["profiles"]["cpu"]["claims"] == {"not reproduced": 1}
    assert t["profiles"]["smoke"]["claims"] == {"reproduced": 1, "not implemented": 1}


def test_a_stale_published_result_is_marked(tiny_book):
    import nbformat

    path = make_chapter(tiny_book, "h-pmd")
    fake_published(tiny_book)
    assert "stale" not in render_dashboard().split("## Claims")[0].split("## Papers")[1]
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source += "\n\nchanged"
    nbformat.write(nb, path)
    md = render_dashboard()
    assert 'title="the notebook changed">stale' in md


def test_stage_book_uses_executed_notebooks_shows_published_and_vendors_assets(tiny_book):
    import shutil

    shutil.copytree(ROOT / "book", tiny_book / "book")
    shutil.copy(ROOT / "CONTRIBUTING.md", tiny_book / "CONTRIBUTING.md")
    make_chapter(tiny_book, "h-pmd")
    import nbformat

    unrun = make_chapter(tiny_book, "clipped-sgd")
    nb = nbformat.read(unrun, as_version=4)
    nb.cells[0].source += "\n\nThe ratio was {glue:text}`positive.value:.2f`."
    nbformat.write(nb, unrun)
    fake_result(tiny_book)
    fake_published(tiny_book)
    executed = tiny_book / "runs/smoke/rl/h-pmd.ipynb"
    executed.write_text((tiny_book / "notebooks/rl/h-pmd.ipynb").read_text().replace(
        "# h-pmd", "# executed h-pmd"))
    stage = stage_book("smoke")
    page = json.loads((stage / "notebooks/rl/h-pmd.ipynb").read_text())
    assert "# executed h-pmd" in "".join(page["cells"][0]["source"])
    srcs = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in page["cells"]]
    at = next(i for i, x in enumerate(srcs) if x.startswith("# NBVAL_CHECK_OUTPUT"))
    assert srcs[at + 1].startswith("### The faithful run: `cpu`, as published")
    assert "Published ledger" in srcs[at + 1] and "baseline in its place" in srcs[at + 1]
    assert "99 s, 88 s of CPU at load 2.0 on cpu" in srcs[at + 1]
    unrun = (stage / "notebooks/optimization/clipped-sgd.ipynb").read_text()
    assert "has not been run" in unrun
    assert "{glue" not in unrun and "*(not run)*" in unrun  # no run glued the prose's numbers
    assert (stage / "book/_static/plotly.min.js").stat().st_size > 1_000_000
    assert (stage / "book/_static/mathjax/MathJax.js").exists()
    assert "not yet written" in (stage / "book/parts/vision.md").read_text()
    assert "h-pmd" in (stage / "_toc.yml").read_text()
    assert "## The book so far" in (stage / "book/intro.md").read_text()
    with pytest.raises(BookBuildError, match="unknown profile"):
        stage_book("tpu")
