"""Unit tests of reprobook.every_case."""
import numpy as np
import pytest

from reprobook import at_most, between, intervals
from reprobook.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from reprobook.every_case import case_verdict, deciding_case


def est(centre, half=0.1, n=5):
    # five replicates whose t interval is centre +- half (approximately)
    x = centre + np.array([-1, -0.5, 0, 0.5, 1.0]) * half
    return intervals.mean(x[:n], unit="replicate")


def test_all_inside_picks_the_case_closest_to_the_edge():
    crit = between(-1.0, 1.0)
    cases = [est(0.0), est(0.6), est(-0.2)]
    i = deciding_case(cases, crit)
    assert i == 1 and case_verdict(cases[i], crit) == REPRODUCED


def test_one_failure_decides_even_when_another_case_straddles():
    crit = at_most(0.0)
    cases = [est(-1.0), est(0.05, half=0.5), est(0.8), est(1.5)]   # passes, straddles, fails, fails
    i = deciding_case(cases, crit)
    assert i == 3 and case_verdict(cases[i], crit) == NOT_REPRODUCED


def test_straddling_case_decides_when_none_fails():
    crit = at_most(0.0)
    cases = [est(-1.0), est(-0.05, half=0.5), est(0.02, half=0.5)]
    i = deciding_case(cases, crit)
    assert i == 2 and case_verdict(cases[i], crit) == INCONCLUSIVE


def test_too_few_replicates_is_inconclusive_and_bad_input():
    crit = at_most(0.0)
    few = intervals.mean([-1.0, -1.1], unit="replicate")
    assert case_verdict(few, crit) == INCONCLUSIVE
    assert deciding_case([est(-1.0), few], crit) == 1
    with pytest.raises(ValueError, match="at least one"):
        deciding_case([], crit)
    with pytest.raises(TypeError, match="criterion"):
        deciding_case([est(0.0)], 0.5)
