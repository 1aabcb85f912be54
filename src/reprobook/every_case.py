r"""Claims that must hold in *every* case: which case's estimate decides the verdict.

Some claims are universal over a finite set of cases ("the Monte Carlo estimate is unbiased at each
of these ten parameters", "r# beats Pearson's r in each scenario"). Each case has its own
:class:`~reprobook.intervals.Estimate` over the same replicates; the ledger takes one. The claim
is judged as an intersection of the per-case claims:

* **reproduced** if every case's interval meets the criterion (an intersection-union test: no
  multiplicity correction is needed for this direction);
* **not reproduced** if some case's interval misses the criterion entirely (with many cases this
  direction is anti-conservative: each case may fail by chance at the interval's level);
* **inconclusive** otherwise.

:func:`deciding_case` returns the index of the case whose estimate, judged alone, gives exactly
that verdict, so a chapter records it and says in the detail which case it was and out of how many.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from .claims import INCONCLUSIVE, NOT_REPRODUCED, Criterion
from .intervals import Estimate

__all__ = ["case_verdict", "deciding_case"]


def case_verdict(estimate: Estimate, criterion: Criterion) -> str:
    """The verdict one case's estimate would earn alone (the ledger's rule for an Estimate)."""
    if estimate.why_inconclusive():
        return INCONCLUSIVE
    return criterion.judge(estimate.value, estimate.interval)


def _outside(e: Estimate, c: Criterion) -> float:
    """How far the interval lies beyond the criterion's set (positive: wholly outside)."""
    return max(c.low - e.high, e.low - c.high)


def _reach(e: Estimate, c: Criterion) -> float:
    """How far the interval reaches beyond the criterion's set (negative: wholly inside)."""
    return max(c.low - e.low, e.high - c.high)


def deciding_case(estimates: Sequence[Estimate], criterion: Criterion) -> int:
    """The index of the case whose estimate decides an every-case claim (see the module).

    A case that fails outright decides (the one furthest outside); else a case that is inconclusive
    (the one reaching furthest outside the criterion); else, all passing, the one closest to the
    criterion's edge.
    """
    if not estimates:
        raise ValueError("deciding_case() needs at least one case")
    if not isinstance(criterion, Criterion):
        raise TypeError("criterion must come from reprobook (at_most, between, ...)")
    verdicts = [case_verdict(e, criterion) for e in estimates]

    def best(indices, key):
        def score(i):                  # an unbounded interval (too few replicates) reaches furthest
            v = key(estimates[i], criterion)
            return math.inf if math.isnan(v) else v
        return max(indices, key=score)

    failed = [i for i, v in enumerate(verdicts) if v == NOT_REPRODUCED]
    if failed:
        return best(failed, _outside)
    unsure = [i for i, v in enumerate(verdicts) if v == INCONCLUSIVE]
    if unsure:
        return best(unsure, _reach)
    return best(range(len(estimates)), _reach)
