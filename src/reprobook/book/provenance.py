"""Where a result came from: package versions, git commit, peak memory."""
from __future__ import annotations

import functools
import os
import platform
import resource
import subprocess
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["environment", "git_commit", "peak_memory_mb", "TRACKED_PACKAGES"]

#: Packages whose versions every ledger records (those that are installed).
TRACKED_PACKAGES = ("reprobook", "torch", "triton", "numpy", "scipy", "pandas", "scikit-learn",
                    "plotly", "gpytorch", "botorch", "hnswlib", "networkx", "ppi-python",
                    "papermill", "flash-linear-attention", "natten")

GIT_COMMIT_ENV = "REPROBOOK_GIT_COMMIT"


@functools.lru_cache(maxsize=1)
def environment() -> dict:
    versions = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def git_commit(root: str | os.PathLike | None = None) -> str:
    """The commit of the book's checkout (``+dirty`` when it has uncommitted changes)."""
    if os.environ.get(GIT_COMMIT_ENV):
        return os.environ[GIT_COMMIT_ENV]
    root = Path(root) if root else Path(__file__).resolve().parents[3]
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, text=True,
                             capture_output=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               text=True, capture_output=True, timeout=10).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def peak_memory_mb() -> float:
    """Peak resident memory of this process (and of CUDA tensors, when a GPU was used), in MB."""
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    peak = rss_kb / 1024.0
    torch = sys.modules.get("torch")  # a run that never loaded torch has no GPU memory to add
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        peak += torch.cuda.max_memory_allocated() / 2**20
    return round(peak, 1)
