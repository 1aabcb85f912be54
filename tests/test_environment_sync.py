"""environment.yml mirrors pyproject.toml: the same requirements, letter for letter."""
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def pyproject_requirements() -> set[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = set(meta["dependencies"])
    for extra in meta.get("optional-dependencies", {}).values():
        reqs |= set(extra)
    return reqs


def environment_requirements() -> set[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [d for d in env["dependencies"] if isinstance(d, dict) and "pip" in d][0]["pip"]
    return {r for r in pip if not r.startswith("-e")}


def test_environment_mirrors_pyproject():
    missing = pyproject_requirements() - environment_requirements()
    extra = environment_requirements() - pyproject_requirements()
    assert not missing and not extra, f"add to environment.yml: {sorted(missing)}; " \
                                      f"remove from it: {sorted(extra)}"


def test_torch_is_pinned_to_the_cpu_build_on_disk():
    assert "torch==2.13.0" in pyproject_requirements()
    # the package named torch, not others whose names start with it (torchdiffeq)
    torch_reqs = [r for r in pyproject_requirements() if re.split(r"[<>=!~\[ ;]", r)[0] == "torch"]
    assert torch_reqs == ["torch==2.13.0"]


def test_environment_python_matches():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
