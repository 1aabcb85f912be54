"""A real Dask scheduler and worker on 127.0.0.1, and two chapters run through `--scheduler`.

The chapters run in a copy of the book, so the results of `make test`'s own run stay untouched;
the executed notebooks and ledgers come back to the caller over the wire (no shared folder).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reprobook.book.chapters import book_root, discover

pytestmark = pytest.mark.e2e

ROOT = book_root(Path(__file__).resolve().parents[2])
BIN = Path(sys.executable).parent
PREFERRED = ["stratified-ppi", "h-pmd"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster(tmp_path):
    port = free_port()
    addr = f"tcp://127.0.0.1:{port}"
    logs = open(tmp_path / "dask.log", "w")
    sched = subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port",
                              str(port), "--no-dashboard"], stdout=logs, stderr=logs)
    worker = subprocess.Popen([str(BIN / "dask"), "worker", addr, "--nworkers", "1", "--nthreads",
                               "2", "--no-dashboard", "--memory-limit", "0", "--host",
                               "127.0.0.1", "--local-directory", str(tmp_path / "worker")],
                              stdout=logs, stderr=logs, cwd=tmp_path)
    try:
        from distributed import Client

        deadline = time.time() + 60
        while True:
            try:
                with Client(addr, timeout="5s") as c:
                    if c.scheduler_info()["workers"]:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                pytest.fail("the Dask worker did not connect: " + (tmp_path / "dask.log").read_text())
            time.sleep(1)
        yield addr
    finally:
        for p in (worker, sched):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        logs.close()


def test_two_chapters_through_a_dask_scheduler(cluster, tmp_path):
    chapters = discover(ROOT)
    names = [c.slug for c in chapters if c.slug in PREFERRED] or [c.slug for c in chapters][:2]
    book = tmp_path / "book"
    book.mkdir()
    shutil.copytree(ROOT / "notebooks", book / "notebooks")
    shutil.copy(ROOT / "_config.yml", book / "_config.yml")
    env = {**os.environ, "REPROBOOK_ROOT": str(book)}
    res = subprocess.run([str(BIN / "reprobook"), "run", *names, "--scheduler", cluster],
                         env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    for ch in [c for c in chapters if c.slug in names]:
        base = book / "runs" / "smoke" / ch.part
        rec = json.loads((base / f"{ch.slug}.run.json").read_text())
        assert rec["status"] == "ok" and rec["where"] == f"dask {cluster}"
        assert rec["mismatches"] == []
        ledger = json.loads((base / f"{ch.slug}.ledger.json").read_text())
        assert {c["id"]: c["verdict"] for c in ledger["claims"]} == ch.expected
        nb = json.loads((base / f"{ch.slug}.ipynb").read_text())
        assert any(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")


def test_unreachable_scheduler_is_a_clear_error(tmp_path):
    env = {**os.environ, "REPROBOOK_ROOT": str(ROOT)}
    slug = discover(ROOT)[0].slug
    res = subprocess.run([str(BIN / "reprobook"), "run", slug, "--force", "--scheduler",
                          f"tcp://127.0.0.1:{free_port()}"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2 and "cannot reach the Dask scheduler" in res.stderr
