"""Every command in the README is run by a test, as a new user would type it.

Commands are read from the README's ``bash`` blocks. Each one is either run here as written, or run
here with ``--dry-run`` appended (the runner then checks the chapters, the profile and every
parameter, the part of the command that can be wrong, without spending minutes of compute), or
named with the test that exercises it. A command this file does not know fails the suite, so a new
README line cannot go untested.
"""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from reprobook.book.chapters import book_root

pytestmark = pytest.mark.e2e

ROOT = book_root(Path(__file__).resolve().parents[2])
VENV_BIN = Path(sys.executable).parent

#: Commands exercised elsewhere: pattern -> the test that runs them.
ELSEWHERE = {
    r"^make test$": ".ci/run (CI runs exactly this)",
    r"^make book$": "the Makefile's `chapters` and `html` targets, which `make test` runs",
    r"^\.venv/bin/dask (scheduler|worker) ": "tests/e2e/test_dask.py (a real scheduler and worker)",
    r"^\.venv/bin/jupyter lab notebooks/": "tests/e2e/test_jupyterlab.py (a real JupyterLab)",
}
#: reprobook commands that run minutes of compute: run with --dry-run (checks, runs nothing).
DRY = (r"^\.venv/bin/reprobook run ",)


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            cmd = line.split("#", 1)[0].strip()
            if cmd:
                out.append(cmd)
    return out


def how(cmd: str) -> str:
    for pat, where in ELSEWHERE.items():
        if re.search(pat, cmd):
            return "elsewhere"
    if any(re.search(p, cmd) for p in DRY):
        return "dry"
    if cmd.startswith(".venv/bin/reprobook "):
        return "run"
    return "unknown"


def test_the_readme_has_commands_and_each_is_covered():
    cmds = readme_commands()
    assert len(cmds) >= 10
    unknown = [c for c in cmds if how(c) == "unknown"]
    assert not unknown, f"README commands no test runs: {unknown}"


@pytest.mark.parametrize("cmd", [c for c in readme_commands() if how(c) in ("run", "dry")])
def test_readme_command(cmd):
    argv = shlex.split(cmd)
    argv[0] = str(VENV_BIN / Path(argv[0]).name)
    if how(cmd) == "dry":
        argv.append("--dry-run")
    res = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1200,
                         env={**os.environ, "COLUMNS": "160"})
    assert res.returncode == 0, f"{cmd!r} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
