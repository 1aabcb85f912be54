"""Timing helpers shared by the benchmarks."""
from __future__ import annotations

import statistics
import time

__all__ = ["median_time"]


def median_time(fn, repeats: int, clock=time.perf_counter) -> float:
    """Median time of ``repeats`` calls of ``fn`` after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)
