"""The runner's promises, on a throw-away book of tiny chapters (each runs a real kernel)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import GOOD_BODY, make_chapter
from reprobook.book.cli import main
from reprobook.book.runner import cache_key

pytestmark = pytest.mark.slow


def record(root, part, slug, profile="smoke"):
    p = root / "runs" / profile / part / f"{slug}.run.json"
    return json.loads(p.read_text()) if p.exists() else None


def test_failures_are_reported_and_the_others_go_on(tiny_book, capsys):
    make_chapter(tiny_book, "clipped-sgd")
    make_chapter(tiny_book, "bc-horizon", body="x = 1\nraise ValueError('planted failure')")
    # 15 s, not less: on a loaded CI machine the kernel's start-up alone can take several seconds,
    # and a timeout that fires before the first cell leaves no cell to report.
    make_chapter(tiny_book, "tds-discrepancy", body="import time\ntime.sleep(300)",
                 sidecar={"timeout": 15})
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
    assert "timed out after 15 s" in text
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


def test_cache_key_depends_on_notebook_parameters_and_imported_modules(tiny_book):
    from reprobook.book.chapters import find

    make_chapter(tiny_book, "clipped-sgd")
    ch = find("clipped-sgd")
    mods = ["claims.py", "intervals.py"]
    k = cache_key(ch, {"profile": "smoke"}, mods)
    assert k == cache_key(ch, {"profile": "smoke"}, mods)
    assert k != cache_key(ch, {"profile": "smoke", "n": 2}, mods)
    assert k != cache_key(ch, {"profile": "smoke"}, None)  # never run: no stored key matches
    make_chapter(tiny_book, "clipped-sgd", params="n = 3\nm = 1")
    assert cache_key(find("clipped-sgd"), {"profile": "smoke"}, mods) != k


def test_an_edit_to_an_unrelated_module_keeps_a_chapter_cached(tiny_book, tmp_path, monkeypatch):
    """The key hashes only the reprobook files the chapter imported in its last run."""
    import shutil

    import reprobook.book.runner as runner

    pkg = tmp_path / "pkg"  # a copy of the package to edit (the kernel imports the real one)
    shutil.copytree(runner.PACKAGE_DIR, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(runner, "PACKAGE_DIR", pkg)
    make_chapter(tiny_book, "clipped-sgd")
    assert main(["run", "clipped-sgd"]) == 0
    first = record(tiny_book, "optimization", "clipped-sgd")
    assert "claims.py" in first["modules"] and "stats/ppi.py" not in first["modules"]
    (pkg / "stats" / "ppi.py").write_text((pkg / "stats" / "ppi.py").read_text() + "\n# edit\n")
    assert main(["run", "clipped-sgd"]) == 0
    assert record(tiny_book, "optimization", "clipped-sgd")["finished"] == first["finished"]
    (pkg / "claims.py").write_text((pkg / "claims.py").read_text() + "\n# edit\n")
    assert main(["run", "clipped-sgd"]) == 0
    assert record(tiny_book, "optimization", "clipped-sgd")["finished"] != first["finished"]


def test_a_file_edited_while_a_chapter_runs_leaves_its_result_stale(tiny_book, tmp_path, monkeypatch):
    """The key records the notebook and the package as the run found them: an edit made during the
    run (a notebook cell, an imported module) is not credited to it, so the next run redoes it."""
    import shutil

    import reprobook.book.runner as runner

    pkg = tmp_path / "pkg"
    shutil.copytree(runner.PACKAGE_DIR, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(runner, "PACKAGE_DIR", pkg)
    make_chapter(tiny_book, "clipped-sgd")
    real = runner.execute_payload
    nb = tiny_book / "notebooks" / "optimization" / "clipped-sgd.ipynb"

    def edit_during(what):
        def run(*a, **k):
            out = real(*a, **k)
            if what == "notebook":
                data = json.loads(nb.read_text())
                data["cells"][-1]["source"] = "".join(data["cells"][-1]["source"]) + "\n# edited"
                nb.write_text(json.dumps(data))
            else:
                (pkg / "claims.py").write_text((pkg / "claims.py").read_text() + "\n# edited\n")
            return out
        return run

    for what in ("notebook", "module"):
        monkeypatch.setattr(runner, "execute_payload", edit_during(what))
        assert main(["run", "clipped-sgd", "--force"]) == 0
        first = record(tiny_book, "optimization", "clipped-sgd")
        monkeypatch.setattr(runner, "execute_payload", real)
        assert main(["run", "clipped-sgd"]) == 0          # the edit was not credited: runs again
        second = record(tiny_book, "optimization", "clipped-sgd")
        assert second["finished"] != first["finished"] and second["key"] != first["key"]
        assert main(["run", "clipped-sgd"]) == 0          # and is then up to date
        assert record(tiny_book, "optimization", "clipped-sgd")["finished"] == second["finished"]


def test_a_ledger_that_breaks_the_rules_fails_the_chapter_naming_the_claim(tiny_book, capsys):
    body = GOOD_BODY.replace('ledger.control("positive", "negated", -n, what="n negated")\n', "")
    make_chapter(tiny_book, "clipped-sgd", body=body)
    bypass_save = (  # a chapter that writes its ledger without Ledger.save's check
        "import json, os\n"
        "def save(path=None):\n"
        "    data = ledger.to_json()\n"
        "    data['claims'] = [{**c, 'controls': []} for c in data['claims']]\n"
        "    open(os.environ['REPROBOOK_LEDGER'], 'w').write(json.dumps(data))\n"
        "ledger.save = save\n")
    make_chapter(tiny_book, "h-pmd", body=GOOD_BODY + bypass_save)
    assert main(["run", "--all", "--jobs", "1"]) == 1
    err = capsys.readouterr().err.replace("\n", " ")
    bad = record(tiny_book, "optimization", "clipped-sgd")
    assert bad["status"] == "error" and "'positive'" in bad["error"]
    assert "no control" in err
    # a chapter that bypasses Ledger.save's own check is refused by the runner
    bypass = record(tiny_book, "rl", "h-pmd")
    assert bypass["status"] == "error" and "breaks the book's rules" in bypass["error"]


def test_prose_that_refers_to_an_unglued_number_fails(tiny_book):
    import nbformat

    path = make_chapter(tiny_book, "clipped-sgd")
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source += "\n\nn was {glue:text}`positive.value:.0f`, m was {glue:text}`m:.1f`."
    nbformat.write(nb, path)
    assert main(["run", "clipped-sgd"]) == 1
    rec = record(tiny_book, "optimization", "clipped-sgd")
    assert "glue key(s) no cell glued: m" in rec["error"]


def test_publish_writes_small_results_and_marks_them_stale(tiny_book, capsys):
    import nbformat

    from reprobook.book.chapters import find
    from reprobook.book.publish import load_published

    path = make_chapter(tiny_book, "clipped-sgd", sidecar={"profiles": {"cpu": {"n": 5}}})
    assert main(["run", "clipped-sgd", "--publish"]) == 2  # smoke is never published
    assert main(["run", "clipped-sgd", "--profile", "cpu", "--publish", "-p", "n=2"]) == 2
    assert main(["run", "clipped-sgd", "--profile", "cpu", "--publish"]) == 0
    out = tiny_book / "results/cpu/optimization/clipped-sgd.json"
    data = json.loads(out.read_text())
    assert data["parameters"]["n"] == 5 and data["claims"][0]["verdict"] == "reproduced"
    assert data["claims"][0]["controls"][0]["verdict"] == "not reproduced"
    assert out.stat().st_size < 20_000
    pub = load_published(find("clipped-sgd"), "cpu")
    assert pub.stale == [] and pub.verdicts == {"positive": "reproduced"}
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source += "\n\nEdited."
    nbformat.write(nb, path)
    assert load_published(find("clipped-sgd"), "cpu").stale == ["the notebook changed"]
    capsys.readouterr()
    assert main(["list"]) == 0
    assert "stale: the notebook changed" in capsys.readouterr().out
    make_chapter(tiny_book, "h-pmd")  # never published
    assert main(["run", "--all", "--profile", "cpu", "--stale", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "clipped-sgd" in out and "h-pmd" in out
    assert main(["run", "--all", "--profile", "cpu", "--stale", "--publish"]) == 0
    capsys.readouterr()
    assert main(["run", "--all", "--profile", "cpu", "--stale", "--dry-run"]) == 0
    assert "no chapters selected" in capsys.readouterr().err
    assert main(["run", "--all", "--stale"]) == 2


def test_dry_run_checks_everything_and_runs_nothing(tiny_book, capsys):
    make_chapter(tiny_book, "clipped-sgd")
    assert main(["run", "clipped-sgd", "-p", "n=7", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "n=7" in out and "run" in out and not (tiny_book / "runs").exists()
    assert main(["run", "clipped-sgd", "-p", "k=7", "--dry-run"]) == 2


def test_a_runner_killed_with_sigkill_leaves_no_chapter_running(tiny_book):
    import psutil

    make_chapter(tiny_book, "clipped-sgd", body="import time\ntime.sleep(60)\n" + GOOD_BODY)
    env = {**os.environ, "REPROBOOK_ROOT": str(tiny_book)}
    proc = subprocess.Popen([sys.executable, "-m", "reprobook.book.cli", "run", "clipped-sgd"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    runner = psutil.Process(proc.pid)
    deadline, kids = time.time() + 90, []
    while time.time() < deadline:  # wait for the kernel to be up and running the sleep
        kids = runner.children(recursive=True)
        if any("ipykernel" in " ".join(k.cmdline()) for k in kids if k.is_running()):
            break
        time.sleep(0.5)
    else:
        pytest.fail("the chapter's kernel never started")
    time.sleep(2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)

    def alive(p):
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.time() + 15
    while time.time() < deadline and any(alive(k) for k in kids):
        time.sleep(0.5)
    assert not [k.pid for k in kids if alive(k)], "processes outlived the killed runner"
    assert record(tiny_book, "optimization", "clipped-sgd") is None


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


def test_a_volatile_claim_may_expect_several_verdicts_and_no_other_claim_may():
    from reprobook.book.runner import Outcome, _mismatches
    both = ["reproduced", "inconclusive at this scale"]
    out = Outcome("deltanet", "kernels", "smoke", "ok",
                  verdicts={"speed": "inconclusive at this scale", "exact": "reproduced"},
                  volatile=["speed"], expected={"speed": both, "exact": "reproduced"})
    assert _mismatches(out) == []
    out.verdicts["speed"] = "not reproduced"
    assert _mismatches(out) == [f"speed: expected one of {both!r}, got 'not reproduced'"]
    out.verdicts["speed"] = "reproduced"
    out.expected["exact"] = both
    assert _mismatches(out) == [f"exact: the sidecar allows several verdicts {both!r}, but only "
                                "a volatile (timing) claim may have more than one"]


def test_the_kernels_cpu_time_and_the_load_are_recorded_and_published(tiny_book):
    # the kernel burns at least 1.5 s of its own CPU time: the record must count it (a lower bound,
    # whatever the machine's load), not only the executor's
    burn = ("import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5:\n    pass\n")
    make_chapter(tiny_book, "clipped-sgd", body=burn + GOOD_BODY)
    assert main(["run", "clipped-sgd", "--profile", "cpu", "--publish"]) == 0
    rec = record(tiny_book, "optimization", "clipped-sgd", "cpu")
    assert rec["cpu_time_s"] >= 1.5
    assert len(rec["load_average"]) == 2 and all(v >= 0 for v in rec["load_average"])
    pub = json.loads((tiny_book / "results/cpu/optimization/clipped-sgd.json").read_text())
    assert pub["cpu_time_s"] == rec["cpu_time_s"] and pub["load_average"] == rec["load_average"]
