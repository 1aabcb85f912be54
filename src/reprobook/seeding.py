"""One place that seeds every random number generator the book uses.

A chapter never calls ``random.seed``, ``np.random.seed`` or ``torch.manual_seed`` itself: it calls
:func:`seed_everything` (the :class:`~reprobook.claims.Ledger` does so on start), so that the same
seed gives the same numbers on the same machine and library versions.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import os
import random
import sys

import numpy as np

__all__ = ["seed_everything", "rng"]


def seed_everything(seed: int, deterministic: bool = True) -> int:
    """Seed Python's ``random``, NumPy's legacy global RNG and torch (CPU and CUDA).

    With ``deterministic=True`` torch is asked for deterministic algorithms where it has them
    (``warn_only`` so an op without one still runs) and cuDNN autotuning is switched off.
    Returns the seed, so ``seed = seed_everything(seed)`` reads naturally.

    If torch is not imported yet it is seeded the moment it is: importing torch costs seconds
    that a chapter without torch should not pay (and the ledger would count as its compute), and
    no torch random number can be drawn before torch exists, so the numbers are the same.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__} ({seed!r})")
    if not 0 <= int(seed) < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)  # inherited by child processes only
    if deterministic:
        # cuBLAS reads this when CUDA starts; harmless on CPU
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if "torch" in sys.modules:
        _seed_torch(sys.modules["torch"], seed, deterministic)
    else:
        _TORCH_HOOK.arm(seed, deterministic)
    return seed


def _seed_torch(torch, seed: int, deterministic: bool) -> None:
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if deterministic:
        _deterministic_algorithms(torch)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True


def _deterministic_algorithms(torch) -> None:
    """``torch.use_deterministic_algorithms(True, warn_only=True)`` without its first line, which
    imports ``torch._inductor`` (seconds, and Triton with it, before a chapter could switch on the
    Triton interpreter) only to set a flag of ``torch.compile``. The compiler's flag is set when it
    is already loaded; a chapter that compiles imports it before calling :func:`seed_everything`."""
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:  # pragma: no cover - a torch without the private setter
        torch.use_deterministic_algorithms(True, warn_only=True)
        return
    setter(True, warn_only=True)
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:
        inductor.deterministic = True


class _SeedTorchOnImport(importlib.abc.MetaPathFinder):
    """A one-shot import hook: when torch is first imported, seed it right after it loads."""

    def __init__(self):
        self.pending: tuple[int, bool] | None = None

    def arm(self, seed: int, deterministic: bool) -> None:
        self.pending = (seed, deterministic)
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" or self.pending is None:
            return None
        sys.meta_path.remove(self)  # one shot, and lets the lookup below find the real torch
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _SeedingLoader(spec.loader, self)
        return spec


class _SeedingLoader(importlib.abc.Loader):
    """torch's own loader, followed by the seeding; anything else is asked of the real loader."""

    def __init__(self, real, hook: _SeedTorchOnImport):
        self._real, self._hook = real, hook

    def create_module(self, spec):
        return self._real.create_module(spec)

    def exec_module(self, module):
        self._real.exec_module(module)
        pending, self._hook.pending = self._hook.pending, None
        if pending is not None:
            _seed_torch(module, *pending)

    def __getattr__(self, name):  # get_resource_reader, is_package, get_filename, ...
        return getattr(self._real, name)


_TORCH_HOOK = _SeedTorchOnImport()


def rng(seed: int, *streams: int) -> np.random.Generator:
    """An independent NumPy generator for ``seed`` and an optional stream index (e.g. a trial).

    ``rng(seed, trial)`` gives reproducible, non-overlapping streams via ``SeedSequence`` spawning,
    which is how multi-seed experiments should draw their randomness.
    """
    return np.random.default_rng(np.random.SeedSequence([int(seed), *map(int, streams)]))
