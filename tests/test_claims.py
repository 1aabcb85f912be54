import json
import math

import pytest

from reprobook import Ledger, at_least, at_most, between, close_to, intervals, is_true
from reprobook.claims import (INCONCLUSIVE, NOT_IMPLEMENTED, NOT_RECORDED, NOT_REPRODUCED,
                              NOT_TESTABLE, REPRODUCED, LedgerError, fmt, parameters_from,
                              rule_problems)


def ledger(**params):
    return Ledger.start("stratified-ppi", {"seed": 0, "device": "cpu", "profile": "smoke", **params})


def est(lo, hi, n=5):
    """An Estimate with the given interval over n replicates (built through the module)."""
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    t = intervals._t(0.95, n)
    # n samples with mean mid and the standard error that gives exactly this half-width
    sd = half * math.sqrt(n) / t
    base = [-1.0, 1.0] * (n // 2) + ([0.0] if n % 2 else [])
    s = math.sqrt(sum(b * b for b in base) / (n - 1))
    return intervals.mean([mid + sd * b / s for b in base], unit="seed")


@pytest.mark.parametrize("crit,value,verdict", [
    (at_most(0.85), 0.80, REPRODUCED), (at_most(0.85), 0.90, NOT_REPRODUCED),
    (at_least(0.93), 0.95, REPRODUCED), (at_least(0.93), 0.92, NOT_REPRODUCED),
    (between(1, 2), 1.0, REPRODUCED), (between(1, 2), 2.5, NOT_REPRODUCED),
    (close_to(0.0, 1e-10), 3e-11, REPRODUCED), (close_to(0.0, 1e-10), 1e-9, NOT_REPRODUCED),
    (is_true(), True, REPRODUCED), (is_true(), False, NOT_REPRODUCED),
    (at_least(0), math.nan, NOT_REPRODUCED),
])
def test_exact_claims_are_judged_on_their_value(crit, value, verdict):
    led = ledger()
    led.claim("c", "s", source="p", criterion=crit, threshold="ours", exact=True)
    assert led.record("c", value) == verdict


@pytest.mark.parametrize("interval,verdict", [
    ((0.70, 0.84), REPRODUCED), ((0.86, 0.95), NOT_REPRODUCED), ((0.80, 0.90), INCONCLUSIVE),
])
def test_statistical_claims_are_judged_on_the_whole_interval(interval, verdict):
    led = ledger()
    led.claim("c", "s", source="p", criterion=at_most(0.85), threshold="notes")
    e = est(*interval)
    assert e.interval == pytest.approx(interval)
    assert led.record("c", e) == verdict


def test_few_replicates_a_degenerate_interval_or_a_bare_number_are_inconclusive():
    led = ledger()
    for cid in "abcd":
        led.claim(cid, "s", source="p", criterion=at_most(0.85), threshold="ours")
    # two seeds far below the threshold: still no definite verdict
    assert led.record("a", intervals.mean([0.1, 0.11], unit="seed")) == INCONCLUSIVE
    assert "only 2 replicate(s)" in led.claims["a"].result.why
    # five identical replicates: a zero-width interval
    assert led.record("b", intervals.mean([0.2] * 5, unit="seed")) == INCONCLUSIVE
    assert "degenerate" in led.claims["b"].result.why
    # a bare number for a statistical claim
    assert led.record("c", 0.1) == INCONCLUSIVE
    assert "no replicates" in led.claims["c"].result.why
    assert led.record("d", intervals.mean([0.1, 0.12, 0.11], unit="seed")) == REPRODUCED
    with pytest.raises(TypeError, match="Estimate"):
        led.record("d", (0.1, 0.0, 0.2))


def test_controls_are_judged_by_the_claims_criterion_and_must_flip(tmp_path):
    led = ledger()
    led.claim("narrower", "s", source="p", criterion=at_most(0.85), threshold="notes")
    led.claim("exact", "s", source="p", criterion=at_most(1e-10), threshold="ours", exact=True)
    assert led.record("narrower", est(0.7, 0.8)) == REPRODUCED
    assert led.record("exact", 1e-14) == REPRODUCED
    problems = led.problems()
    assert len(problems) == 2 and "'narrower'" in problems[0] and "no control" in problems[0]
    # a control that does not flip does not count: the claim is then not judged
    assert led.control("narrower", "self", est(0.7, 0.8), what="compared with itself") == REPRODUCED
    assert led.verdicts()["narrower"] == INCONCLUSIVE and len(led.problems()) == 1
    # an exact tie (zero-width interval) is inconclusive by degeneracy: it does not count either
    assert led.control("narrower", "tie", intervals.mean([1.0] * 5, unit="seed"),
                       what="the baseline in the method's place, an exact tie") == INCONCLUSIVE
    assert led.verdicts()["narrower"] == INCONCLUSIVE
    assert led.control("narrower", "baseline", est(0.98, 1.02), what="PPI++ swapped in") \
        == NOT_REPRODUCED
    assert led.verdicts()["narrower"] == REPRODUCED
    assert led.control("exact", "sign", 0.3, what="sign flipped in the method") == NOT_REPRODUCED
    assert led.problems() == []
    row = led.claims["narrower"].to_json()
    assert [c["name"] for c in row["controls"]] == ["self", "tie", "baseline"]
    assert row["controls"][2]["estimate"]["n"] == 5
    with pytest.raises(ValueError, match="already has a control"):
        led.control("exact", "sign", 0.3, what="again")
    with pytest.raises(ValueError, match="say what was broken"):
        led.control("exact", "other", 0.3, what="")
    with pytest.raises(ValueError, match="kind"):
        led.control("exact", "other", 0.3, what="x", kind="sideways")
    led.save(tmp_path / "l.json")
    saved = json.loads((tmp_path / "l.json").read_text())
    assert rule_problems(saved["claims"]) == []


def test_no_control_with_a_reason_satisfies_the_rule_and_save_refuses_otherwise(tmp_path):
    led = ledger()
    led.claim("fails", "s", source="p", criterion=at_least(1.3), threshold="paper", exact=True)
    led.claim("never", "s", source="p", criterion=at_least(0), threshold="ours", exact=True)
    led.record("fails", 0.9)
    with pytest.raises(LedgerError) as e:
        led.save(tmp_path / "l.json")
    assert "'fails'" in str(e.value) and "'never' was declared but never recorded" in str(e.value)
    assert (tmp_path / "l.json").exists()  # written first, so the runner can say what is wrong
    led.no_control("fails", "red without any bug; no planted effect exists at this scale")
    led.record("never", 1)
    led.control("never", "neg", -1, what="sign flipped")
    led.save(tmp_path / "l.json")
    with pytest.raises(ValueError, match="needs a reason"):
        led.no_control("fails", " ")


def test_threshold_source_is_required_and_departures_are_shown():
    led = ledger()
    with pytest.raises(TypeError, match="threshold"):
        led.claim("c", "s", source="p", criterion=at_most(1))
    with pytest.raises(ValueError, match="where the threshold came from"):
        led.claim("c", "s", source="p", criterion=at_most(1), threshold="vibes")
    led.claim("c", "s", source="p", criterion=at_least(0.92), threshold="ours",
              departure="the notes ask for 0.935; our n = 100 under-covers")
    row = led.rows()[0]
    assert row["criterion"] == "≥ 0.92 (ours)" and row["note"].startswith("departs: the notes")
    assert led.claims["c"].to_json()["departure"].startswith("the notes")


def test_verdict_cannot_be_passed_in_and_errors_name_the_problem():
    led = ledger()
    led.claim("c", "s", source="p", criterion=at_most(1), threshold="ours", exact=True)
    with pytest.raises(TypeError):
        led.record("c", 0.5, verdict="reproduced")  # noqa  there is no such argument
    with pytest.raises(KeyError, match="unknown claim 'nope'"):
        led.record("nope", 1.0)
    with pytest.raises(ValueError, match="declared twice"):
        led.claim("c", "again", source="p", criterion=at_most(1), threshold="ours")
    with pytest.raises(TypeError, match="criterion"):
        led.claim("d", "s", source="p", criterion=0.85, threshold="ours")
    with pytest.raises(TypeError, match="must be a number"):
        led.record("c", "big")
    with pytest.raises(ValueError, match="low <= high"):
        between(2, 1)
    with pytest.raises(ValueError, match="claim id"):
        led.claim("has space", "s", source="p", criterion=at_most(1), threshold="ours")


def test_not_testable_not_implemented_and_not_recorded():
    led = ledger()
    led.not_testable("gpu", "runs fast on H100", source="p", reason="needs an H100")
    led.not_implemented("kg", "KG acquisition helps", source="p", reason="not built yet")
    led.claim("later", "s", source="p", criterion=at_least(0), threshold="ours")
    assert led.verdicts() == {"gpu": NOT_TESTABLE, "kg": NOT_IMPLEMENTED, "later": NOT_RECORDED}
    with pytest.raises(ValueError, match="needs a reason"):
        led.not_testable("x", "s", reason="")
    with pytest.raises(ValueError, match="takes no value"):
        led.record("gpu", 1.0)
    with pytest.raises(ValueError, match="takes no value"):
        led.control("kg", "x", 1.0, what="y")
    assert rule_problems([c.to_json() for c in led.claims.values()]) == [
        "claim 'later' was declared but never recorded"]


def test_start_seeds_records_parameters_and_seeds():
    import numpy as np

    a = ledger(n_trials=300, label="x", sizes=[1, 2])
    x = np.random.rand()
    b = ledger(n_trials=300, label="x", sizes=[1, 2])
    assert np.random.rand() == x  # start() seeded numpy with the chapter's seed both times
    assert a.parameters == {"seed": 0, "device": "cpu", "profile": "smoke", "n_trials": 300,
                            "label": "x", "sizes": [1, 2]}
    assert b.use_seeds(3) == [0, 1, 2] and b.seeds == [0, 1, 2]
    with pytest.raises(ValueError):
        b.use_seeds(0)


def test_parameters_from_skips_ipython_and_objects():
    ns = {"In": [], "Out": {}, "_": 1, "get_ipython": print, "np": math, "n": 2, "xs": (1, 2),
          "COLORS": ["#000"]}
    assert parameters_from(ns) == {"n": 2, "xs": [1, 2]}


def test_save_writes_json_with_provenance_and_imported_modules(tmp_path, monkeypatch):
    led = ledger(n=1)
    led.claim("c", "statement", source="paper", criterion=at_least(1), threshold="paper")
    led.record("c", est(1.5, 2.5), detail="d")
    led.control("c", "broken", est(0.2, 0.4), what="the key step removed")
    monkeypatch.delenv("REPROBOOK_LEDGER", raising=False)
    assert led.save() is None  # run by hand: nothing written
    monkeypatch.setenv("REPROBOOK_LEDGER", str(tmp_path / "l.json"))
    path = led.save()
    data = json.loads(open(path).read())
    for key in ("chapter", "profile", "parameters", "seeds", "wall_time_s", "peak_memory_mb",
                "environment", "device", "git_commit", "claims", "modules"):
        assert key in data
    c = data["claims"][0]
    assert c["verdict"] == REPRODUCED and c["threshold"] == "paper"
    assert c["estimate"]["unit"] == "seed" and len(c["estimate"]["samples"]) == 5
    assert c["controls"][0]["verdict"] == NOT_REPRODUCED
    assert data["environment"]["torch"].startswith("2.13")
    assert "claims.py" in data["modules"] and "intervals.py" in data["modules"]


def test_rendering_is_deterministic_escaped_and_shows_controls():
    led = ledger()
    led.claim("c", "a < b & c", source="p", criterion=at_most(0.85), threshold="ours", exact=True)
    led.record("c", 0.123456789)
    led.control("c", "swap", 0.95, what="baseline <swapped> in")
    html = led._repr_html_()
    assert "a &lt; b &amp; c" in html and "0.1235" in html and "rb-reproduced" in html
    assert "baseline &lt;swapped&gt; in" in html and "rb-control-row" in html
    assert html == led._repr_html_() and "0.1235" in repr(led)
    assert "control swap: not reproduced" in repr(led)


def test_fmt():
    assert fmt(0.000123456) == "0.0001235" and fmt(3) == "3" and fmt(True) == "True"
    assert fmt(0.0) == "0" and fmt(float("nan")) == "nan"


def test_a_chapter_without_torch_never_loads_it():
    """Ledger.start, record and to_json leave torch unloaded: importing it costs seconds that the
    ledger would count as the chapter's compute. A torch chapter still gets its device."""
    import subprocess
    import sys
    code = ("import sys; from reprobook import Ledger, at_most; "
            "L = Ledger.start('bnp-dro', {'seed': 0, 'device': 'auto', 'profile': 'smoke'}); "
            "L.claim('c', 's', source='x', criterion=at_most(1), threshold='ours', exact=True); "
            "L.record('c', 0.5); "
            "j = L.to_json(); assert 'torch' not in sys.modules, 'torch was loaded'; "
            "print(j['device']); import torch; print(L.device.type)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    desc, dev = out.stdout.split("\n")[:2]
    assert desc.endswith("(torch not used)") and dev in ("cpu", "cuda")


def test_bad_device_is_refused_at_start():
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        ledger(device="tpu")


def test_volatile_digits_are_masked_for_nbval_and_nothing_else():
    """A timing's digits change from run to run: nbval's sanitizer (nbval-sanitize.cfg) masks them,
    while verdicts and every other number are still compared."""
    import re
    from pathlib import Path

    from nbval.plugin import get_sanitize_patterns

    cfg = (Path(__file__).resolve().parents[1] / "nbval-sanitize.cfg").read_text()
    patterns = get_sanitize_patterns(cfg)
    assert len(patterns) == 8

    def run(timing, other, control=(0.5, 0.9), departure="", detail="", raw=False):
        led = ledger()
        led.claim("speedup", "s", source="p", criterion=at_least(1.5), threshold="notes",
                  volatile=True, departure=departure)
        led.claim("exact", "e", source="p", criterion=at_most(1e-6), threshold="ours", exact=True)
        led.record("speedup", est(timing, timing + 1), detail=detail)
        led.control("speedup", "c1", est(*control), what="chunk size 1")
        led.record("exact", other)
        led.control("exact", "bug", 1.0, what="bug")
        out = []
        for text in (led._repr_html_(), repr(led)):
            for regex, replace in patterns if not raw else ():
                text = re.sub(regex, replace, text)
            out.append(text)
        return out

    assert run(2.0, 1e-9) == run(3.0, 1e-9)          # only the timing moved: equal
    assert run(2.0, 1e-9) == run(2.0, 1e-9, (1.2, 1.8))  # its control's verdict moved: equal
    assert run(2.0, 1e-9) != run(2.0, 2e-9)          # another number moved: caught
    assert "(varies)" in run(2.0, 1e-9)[0] and "«(varies)»" in run(2.0, 1e-9)[1]
    # a control that does not separate leaves the timing unjudged, with the reason in its note: the
    # reason is masked too, whatever else the note holds (a departure, a detail, both, neither)
    for dep, det in (("", ""), ("d", ""), ("", "n = 7"), ("d", "n = 7")):
        judged = run(2.0, 1e-9, departure=dep, detail=det)
        unjudged = run(2.0, 1e-9, (1.6, 1.9), departure=dep, detail=det)
        assert judged == unjudged, (dep, det)
        assert "not judged" not in unjudged[0] + unjudged[1]
    assert run(2.0, 1e-9, (1.6, 1.9)) != run(2.0, 2e-9, (1.6, 1.9))   # other numbers still caught
    # a volatile control's interval that collapses in one run (a degenerate-interval note under
    # its row) and not in the next: masked too
    collapsed = run(2.0, 1e-9, (0.875, 0.875))
    assert "degenerate" in run(2.0, 1e-9, (0.875, 0.875), raw=True)[0]
    assert collapsed == run(2.0, 1e-9, (0.5, 0.9))
    assert "degenerate" not in collapsed[0] + collapsed[1]


def test_a_timing_whose_control_does_not_separate_is_not_judged(tmp_path):
    """A volatile claim's control that lands on the claim's own verdict (a loaded machine) leaves the
    claim inconclusive, with the reason and the criterion's own verdict, instead of failing the run;
    a control that separates leaves the verdict alone, and a non-volatile claim is still refused."""
    def run(control, volatile=True):
        led = ledger()
        led.claim("speedup", "s", source="p", criterion=at_least(1.5), threshold="notes",
                  volatile=volatile)
        assert led.record("speedup", est(2.0, 3.0)) == REPRODUCED
        led.control("speedup", "c1", est(*control), what="chunk size 1")
        return led

    led = run((1.6, 1.9))
    assert led.verdicts() == {"speedup": INCONCLUSIVE}
    c = led.to_json()["claims"][0]
    assert c["unseparated"] and c["measured_verdict"] == REPRODUCED and "not judged" in c["why"]
    assert led.problems() == []
    led.save(tmp_path / "l.json")  # no LedgerError
    assert json.loads((tmp_path / "l.json").read_text())["claims"][0]["verdict"] == INCONCLUSIVE
    assert "not judged" in repr(led)

    assert run((0.5, 0.9)).verdicts() == {"speedup": REPRODUCED}   # separated: judged
    assert "unseparated" not in run((0.5, 0.9)).to_json()["claims"][0]


def test_a_deterministic_claim_whose_controls_do_not_separate_is_not_judged(tmp_path):
    """The same rule holds for a deterministic claim: no control separating means the run could
    not tell the method from a broken one, so the claim is inconclusive, with a reason that names
    the scale (not the run, which nbval would mask); a claim with no control at all is refused."""
    led = ledger()
    led.claim("gain", "s", source="p", criterion=at_least(1.5), threshold="notes")
    assert led.record("gain", est(2.0, 3.0)) == REPRODUCED
    led.control("gain", "ablated", est(1.6, 1.9), what="key component removed")
    c = led.to_json()["claims"][0]
    assert c["verdict"] == INCONCLUSIVE and c["measured_verdict"] == REPRODUCED
    assert c["why"].startswith("not judged at this scale") and "in this run" not in c["why"]
    led.save(tmp_path / "l.json")
    bare = ledger()
    bare.claim("gain", "s", source="p", criterion=at_least(1.5), threshold="notes")
    bare.record("gain", est(2.0, 3.0))
    with pytest.raises(LedgerError, match="it has no control"):
        bare.save(tmp_path / "m.json")
    # a waiver keeps the criterion's verdict: the chapter has said why no control is possible
    bare.no_control("gain", "no broken method exists at this scale")
    assert bare.verdicts() == {"gain": REPRODUCED}


def test_an_inconclusive_timing_beside_inconclusive_controls_is_not_judged(tmp_path):
    """A timing whose interval straddles the threshold, with controls that straddle it too (a loaded
    CI machine), is left unjudged rather than refused; its own reason is kept beside the new one.
    A deterministic claim gets the same verdict, with the reason worded for its scale."""
    def run(volatile=True):
        led = ledger()
        led.claim("slope", "s", source="p", criterion=at_most(1.25), threshold="notes",
                  volatile=volatile)
        assert led.record("slope", est(1.0, 1.5)) == INCONCLUSIVE
        led.control("slope", "attention", est(1.1, 2.0), what="attention in its place")
        return led

    led = run()
    c = led.to_json()["claims"][0]
    assert c["verdict"] == INCONCLUSIVE and c["unseparated"]
    assert c["measured_verdict"] == INCONCLUSIVE and "not judged" in c["why"]
    assert led.problems() == []
    led.save(tmp_path / "l.json")
    fixed = run(volatile=False).to_json()["claims"][0]
    assert fixed["verdict"] == INCONCLUSIVE and "not judged at this scale" in fixed["why"]
