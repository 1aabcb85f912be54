"""One place that seeds every random number generator the book uses.

A chapter never calls ``random.seed``, ``np.random.seed`` or ``torch.manual_seed`` itself: it calls
:func:`seed_everything` (the :class:`~reprobook.claims.Ledger` does so on start), so that the same
seed gives the same numbers on the same machine and library versions.
"""
from __future__ import annotations

import os
import random

import numpy as np

__all__ = ["seed_everything", "rng"]


def seed_everything(seed: int, deterministic: bool = True) -> int:
    """Seed Python's ``random``, NumPy's legacy global RNG and torch (CPU and CUDA).

    With ``deterministic=True`` torch is asked for deterministic algorithms where it has them
    (``warn_only`` so an op without one still runs) and cuDNN autotuning is switched off.
    Returns the seed, so ``seed = seed_everything(seed)`` reads naturally.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__} ({seed!r})")
    if not 0 <= int(seed) < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)  # inherited by child processes only
    try:
        import torch
    except ImportError:  # torch is a dependency, but the book machinery must not need it
        return seed
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        # cuBLAS needs this to be deterministic; harmless on CPU.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    return seed


def rng(seed: int, *streams: int) -> np.random.Generator:
    """An independent NumPy generator for ``seed`` and an optional stream index (e.g. a trial).

    ``rng(seed, trial)`` gives reproducible, non-overlapping streams via ``SeedSequence`` spawning,
    which is how multi-seed experiments should draw their randomness.
    """
    return np.random.default_rng(np.random.SeedSequence([int(seed), *map(int, streams)]))
