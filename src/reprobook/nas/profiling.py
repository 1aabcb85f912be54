r"""Latency of sub-networks measured on the host CPU, in interleaved rounds.

:func:`measure_latency` times the forward pass of every model once per round, in a freshly
shuffled order each round, for ``rounds`` rounds. Interleaving spreads slow periods of a shared
machine (another process waking up, frequency changes) over all models instead of charging them
to whichever model happened to be timed then, so the repeats of one model are closer to exchangeable
draws of the machine's noise. The noise that remains is the point: it is what a latency surrogate
must predict an interval for. Times are wall-clock (``time.perf_counter``) in milliseconds, of one
forward pass under ``torch.inference_mode`` after ``warmup`` untimed passes of every model.

Two clocks are read around every call: the wall clock (``time.perf_counter``: the latency a user
waits for, including any time the operating system gives to other processes) and the calling
thread's CPU clock (``time.thread_time``: the time the CPU spent on this forward pass, which leaves
out the time the thread was descheduled). With torch limited to one thread, the forward pass runs
in the calling thread, so the second is the compute cost of the model on this CPU; on a loaded,
shared machine the first is dominated by scheduling.
"""
from __future__ import annotations

import time

import numpy as np
import torch

__all__ = ["measure_latency"]


def measure_latency(models, tokens: torch.Tensor, rounds: int, rng: np.random.Generator,
                    warmup: int = 1, calls: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``(wall, cpu)``: two ``[n_models, rounds]`` arrays of times (ms) of ``model(tokens)`` by the
    wall clock and by the thread's CPU clock; each entry is the mean of ``calls`` back-to-back
    calls (more calls average out timer resolution on fast models)."""
    models = list(models)
    if not models:
        raise ValueError("models must be a non-empty list of callables")
    for name, v in (("rounds", rounds), ("calls", calls)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    wall, cpu = np.empty((len(models), rounds)), np.empty((len(models), rounds))
    with torch.inference_mode():
        for m in models:
            for _ in range(warmup):
                m(tokens)
        for r in range(rounds):
            for i in rng.permutation(len(models)):
                c0, t0 = time.thread_time(), time.perf_counter()
                for _ in range(calls):
                    models[i](tokens)
                wall[i, r] = (time.perf_counter() - t0) * 1e3 / calls
                cpu[i, r] = (time.thread_time() - c0) * 1e3 / calls
    return wall, cpu
