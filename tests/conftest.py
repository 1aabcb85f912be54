"""Shared fixtures: a throw-away book with tiny chapters, for testing the runner and the CLI."""
from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
import torch
import yaml

from reprobook.book.catalog import paper_by_slug

ROOT = Path(__file__).resolve().parents[1]

GOOD_BODY = """\
from reprobook import Ledger, at_least
ledger = Ledger.start(SLUG, globals())
ledger.claim("positive", "n is positive", source="test", criterion=at_least(1), threshold="ours",
             exact=True)
ledger.record("positive", n)
ledger.control("positive", "negated", -n, what="n negated")
"""


def make_chapter(root: Path, slug: str, body: str = GOOD_BODY, params: str = "n = 3",
                 sidecar: dict | None = None) -> Path:
    """Write a tiny chapter ``slug`` (a real catalog slug) into the book at ``root``."""
    part = paper_by_slug(slug).part
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell(f"# {slug}"),
        nbformat.v4.new_code_cell(f'seed = 0\ndevice = "auto"\nprofile = "smoke"\n{params}\n',
                                  metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(body.replace("SLUG", repr(slug))),
        nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nledger"),
        nbformat.v4.new_code_cell("ledger.save()"),
    ]
    path = root / "notebooks" / part / f"{slug}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    side = {"paper": paper_by_slug(slug).number, "profiles": {"cpu": {}},
            "expected": {"positive": "reproduced"}}
    side.update(sidecar or {})
    path.with_suffix(".yml").write_text(yaml.safe_dump(side))
    return path


@pytest.fixture
def tiny_book(tmp_path, monkeypatch):
    """An empty book at ``tmp_path`` that ``book_root()`` finds (via ``$REPROBOOK_ROOT``)."""
    (tmp_path / "_config.yml").write_text((ROOT / "_config.yml").read_text())
    (tmp_path / "notebooks").mkdir()
    monkeypatch.setenv("REPROBOOK_ROOT", str(tmp_path))
    return tmp_path


@pytest.fixture
def one_torch_thread():
    """Torch on one thread for the test: modules of many tiny tensor operations only gain
    synchronisation from a second thread on a busy machine. Use it with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    from reprobook.threads import single_threaded_torch

    with single_threaded_torch():
        yield


@pytest.fixture
def float64_default():
    """torch's default dtype set to float64 for exact checks, restored afterwards so that other
    test modules are unaffected. Use it with ``pytestmark = pytest.mark.usefixtures(...)``."""
    import torch

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


@pytest.fixture
def one_thread():
    """Run a test on one torch thread: tiny nets only gain contention from a second one."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
