"""The runner's promises, on a throw-away book of tiny chapters (each runs a real kernel)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import make_chapter
from reprobook.book.cli import main
from reprobook.book.runner import cache_key

pytestmark = pytest.mark.slow


def record(root, part, slug, profile="smoke"):
    p = root / "runs" / profile / part / f"{slug}.run.json"
    return json.loads(p.read_text()) if p.exists() else None


def test_failures_are_reported_and_the_others_go_on(tiny_book, capsys):
    make_chapter(tiny_book, "clipped-sgd")
    make_chapter(tiny_book, "bc-horizon", body="x = 1\nraise ValueError('planted failure')")
    make_chapter(tiny_book, "tds-discrepancy", body="import time\ntime.sleep(300)",
                 sidecar={"timeout": 4})
    make_chapter(tiny_book, "h-pmd", sidecar={"expected": {"positive": "not reproduced"}})
    rc = main(["run", "--all", "--jobs", "2"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert rc == 1
    assert record(tiny_book, "optimization", "clipped-sgd")["status"] == "ok"
    bad = record(tiny_book, "rl", "bc-horizon")
    assert bad["status"] == "error" and "planted failure" in bad["error"]
    assert "raise ValueError('planted failure')" in bad["cell"]["source"]
    assert "planted failure" in text and "raise ValueError" in text
    hung = record(tiny_book, "optimization", "tds-discrepancy")
    assert hung["status"] == "timeout" and "time.sleep(300)" in hung["cell"]["source"]
    assert "timed out after 4 s" in text
    changed = record(tiny_book, "rl", "h-pmd")
    assert changed["mismatches"] == ["positive: expected 'not reproduced', got 'reproduced'"]
    assert "VERDICTS DIFFER" in text
    ledger = json.loads((tiny_book / "runs/smoke/optimization/clipped-sgd.ledger.json").read_text())
    assert ledger["claims"][0]["verdict"] == "reproduced" and ledger["parameters"]["n"] == 3
    assert (tiny_book / "runs/smoke/rl/bc-horizon.error.ipynb").exists()


def test_up_to_date_chapters_are_skipped_and_keys_cover_parameters(tiny_book, capsys):
    make_chapter(tiny_book, "clipped-sgd")
    assert main(["run", "clipped-sgd"]) == 0
    first = record(tiny_book, "optimization", "clipped-sgd")
    assert main(["run", "clipped-sgd"]) == 0
    assert "cached" in capsys.readouterr().out
    assert record(tiny_book, "optimization", "clipped-sgd")["finished"] == first["finished"]
    assert main(["run", "clipped-sgd", "-p", "n=4"]) == 0  # other parameters: runs again
    again = record(tiny_book, "optimization", "clipped-sgd")
    assert again["key"] != first["key"]
    led = json.loads((tiny_book / "runs/smoke/optimization/clipped-sgd.ledger.json").read_text())
    assert led["parameters"]["n"] == 4


def test_cache_key_depends_on_notebook_and_parameters(tiny_book):
    from reprobook.book.chapters import find

    make_chapter(tiny_book, "clipped-sgd")
    ch = find("clipped-sgd")
    k = cache_key(ch, {"profile": "smoke"})
    assert k == cache_key(ch, {"profile": "smoke"})
    assert k != cache_key(ch, {"profile": "smoke", "n": 2})
    make_chapter(tiny_book, "clipped-sgd", params="n = 3\nm = 1")
    assert cache_key(find("clipped-sgd"), {"profile": "smoke"}) != k


@pytest.mark.parametrize("argv,match", [
    (["run", "clipped-sgd", "-p", "n_trials=5"], "unknown parameter 'n_trials'"),
    (["run", "clipped-sgd", "-p", "n=abc"], "parameter 'n' must be int"),
    (["run", "clipped-sgd", "--profile", "tpu"], "unknown profile 'tpu'"),
    (["run", "no-such-chapter"], "unknown chapter(s) 'no-such-chapter'"),
    (["run", "--part", "physics"], "unknown part 'physics'"),
    (["run", "clipped-sgd", "--jobs", "0"], "--jobs must be at least 1"),
])
def test_bad_input_is_a_clear_error_before_anything_runs(tiny_book, capsys, argv, match):
    make_chapter(tiny_book, "clipped-sgd")
    assert main(argv) == 2
    assert match in capsys.readouterr().err.replace("\n", " ")
    assert not (tiny_book / "runs").exists()


def test_killed_half_way_keeps_finished_results_and_resumes(tiny_book):
    make_chapter(tiny_book, "clipped-sgd")
    slow = make_chapter(tiny_book, "h-pmd", body="import time\ntime.sleep(120)\n" +
                        "from reprobook import Ledger, at_least\n"
                        "ledger = Ledger.start('h-pmd', globals())\n"
                        "ledger.claim('positive', 's', source='t', criterion=at_least(1),"
                        " threshold='ours', exact=True)\n"
                        "ledger.record('positive', n)\n"
                        "ledger.control('positive', 'neg', -n, what='negated')")
    env = {**os.environ, "REPROBOOK_ROOT": str(tiny_book)}
    proc = subprocess.Popen([sys.executable, "-m", "reprobook.book.cli", "run", "--all", "--jobs", "1"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while record(tiny_book, "optimization", "clipped-sgd") is None and time.time() < deadline:
        time.sleep(0.5)
    time.sleep(3)  # the second chapter is now running
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert "finished chapters are kept" in out
    done = record(tiny_book, "optimization", "clipped-sgd")
    assert done["status"] == "ok"
    json.loads((tiny_book / "runs/smoke/optimization/clipped-sgd.ledger.json").read_text())
    assert record(tiny_book, "rl", "h-pmd") is None  # interrupted: no half result
    leftovers = [p for p in (tiny_book / "runs").rglob("*") if p.name.endswith(".tmp")]
    assert not leftovers
    # resume: the finished chapter is skipped, the interrupted one runs
    make_chapter(tiny_book, "h-pmd")
    res = subprocess.run([sys.executable, "-m", "reprobook.book.cli", "run", "--all"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "cached" in res.stdout and record(tiny_book, "rl", "h-pmd")["status"] == "ok"
    assert record(tiny_book, "optimization", "clipped-sgd")["finished"] == done["finished"]
