import json

import pytest

from conftest import ROOT, make_chapter
from reprobook.book.bookbuild import BookBuildError, stage_book
from reprobook.book.dashboard import render_dashboard


def fake_result(root, slug="h-pmd", part="rl", profile="smoke", verdict="reproduced", status="ok"):
    base = root / "runs" / profile / part
    base.mkdir(parents=True, exist_ok=True)
    (base / f"{slug}.run.json").write_text(json.dumps({"status": status, "wall_time_s": 3.21,
                                                       "error": "boom" if status != "ok" else None,
                                                       "finished": "2026-11-30T00:00:00"}))
    if status == "ok":
        (base / f"{slug}.ledger.json").write_text(json.dumps({
            "started": "2026-11-30T00:00:00", "git_commit": "abc", "peak_memory_mb": 321.0,
            "device": "cpu", "claims": [{"id": "rate", "statement": "a | b", "value": 0.5,
                                         "interval": [0.4, 0.6], "verdict": verdict,
                                         "criterion": {"text": "≤ 0.85"}, "reason": ""}]}))


def test_dashboard_lists_every_paper_claims_and_costs(tiny_book):
    make_chapter(tiny_book, "h-pmd")
    make_chapter(tiny_book, "clipped-sgd")
    fake_result(tiny_book)
    fake_result(tiny_book, "clipped-sgd", "optimization", status="error")
    md = render_dashboard()
    assert md.count("not yet written") == 74
    assert "[h-pmd](../notebooks/rl/h-pmd.ipynb)" in md
    assert "| h-pmd | `rate` | a \\| b | 0.5 [0.4, 0.6] | ≤ 0.85 |" in md
    assert "run failed: boom" in md
    assert "| h-pmd | smoke | 3.21 | 321 | cpu |" in md
    assert "2 of 76 chapters written" in md


def test_stage_book_uses_executed_notebooks_and_vendors_assets(tiny_book):
    import shutil

    shutil.copytree(ROOT / "book", tiny_book / "book")
    shutil.copy(ROOT / "CONTRIBUTING.md", tiny_book / "CONTRIBUTING.md")
    make_chapter(tiny_book, "h-pmd")
    make_chapter(tiny_book, "clipped-sgd")
    fake_result(tiny_book)
    executed = tiny_book / "runs/smoke/rl/h-pmd.ipynb"
    executed.write_text((tiny_book / "notebooks/rl/h-pmd.ipynb").read_text().replace(
        "# h-pmd", "# executed h-pmd"))
    stage = stage_book("smoke")
    assert "# executed h-pmd" in (stage / "notebooks/rl/h-pmd.ipynb").read_text()
    assert "has not been run" in (stage / "notebooks/optimization/clipped-sgd.ipynb").read_text()
    assert (stage / "book/_static/plotly.min.js").stat().st_size > 1_000_000
    assert (stage / "book/_static/mathjax/MathJax.js").exists()
    assert "not yet written" in (stage / "book/parts/vision.md").read_text()
    assert "h-pmd" in (stage / "_toc.yml").read_text()
    with pytest.raises(BookBuildError, match="unknown profile"):
        stage_book("tpu")
