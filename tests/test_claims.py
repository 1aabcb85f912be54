import json
import math

import pytest

from reprobook import Ledger, at_least, at_most, between, close_to, is_true
from reprobook.claims import (INCONCLUSIVE, NOT_RECORDED, NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED,
                              fmt, parameters_from)


def ledger(**params):
    return Ledger.start("stratified-ppi", {"seed": 0, "device": "cpu", "profile": "smoke", **params})


@pytest.mark.parametrize("crit,value,verdict", [
    (at_most(0.85), 0.80, REPRODUCED), (at_most(0.85), 0.90, NOT_REPRODUCED),
    (at_least(0.93), 0.95, REPRODUCED), (at_least(0.93), 0.92, NOT_REPRODUCED),
    (between(1, 2), 1.0, REPRODUCED), (between(1, 2), 2.5, NOT_REPRODUCED),
    (close_to(0.0, 1e-10), 3e-11, REPRODUCED), (close_to(0.0, 1e-10), 1e-9, NOT_REPRODUCED),
    (is_true(), True, REPRODUCED), (is_true(), False, NOT_REPRODUCED),
    (at_least(0), math.nan, NOT_REPRODUCED),
])
def test_point_verdicts(crit, value, verdict):
    led = ledger()
    led.claim("c", "s", source="p", criterion=crit)
    assert led.record("c", value) == verdict


@pytest.mark.parametrize("interval,verdict", [
    ((0.70, 0.84), REPRODUCED), ((0.86, 0.95), NOT_REPRODUCED), ((0.80, 0.90), INCONCLUSIVE),
])
def test_interval_verdicts(interval, verdict):
    led = ledger()
    led.claim("c", "s", source="p", criterion=at_most(0.85))
    assert led.record("c", sum(interval) / 2, interval=interval) == verdict


def test_interval_must_be_ordered():
    led = ledger()
    led.claim("c", "s", source="p", criterion=at_most(1))
    with pytest.raises(ValueError, match="low <= high"):
        led.record("c", 0.5, interval=(0.9, 0.1))


def test_verdict_cannot_be_passed_in_and_errors_name_the_problem():
    led = ledger()
    led.claim("c", "s", source="p", criterion=at_most(1))
    with pytest.raises(TypeError):
        led.record("c", 0.5, verdict="reproduced")  # noqa  there is no such argument
    with pytest.raises(KeyError, match="unknown claim 'nope'"):
        led.record("nope", 1.0)
    with pytest.raises(ValueError, match="declared twice"):
        led.claim("c", "again", source="p", criterion=at_most(1))
    with pytest.raises(TypeError, match="criterion"):
        led.claim("d", "s", source="p", criterion=0.85)
    with pytest.raises(TypeError, match="must be a number"):
        led.record("c", "big")
    with pytest.raises(ValueError, match="low <= high"):
        between(2, 1)


def test_not_testable_and_not_recorded():
    led = ledger()
    led.not_testable("gpu", "runs fast on H100", source="p", reason="needs an H100")
    led.claim("later", "s", source="p", criterion=at_least(0))
    assert led.verdicts() == {"gpu": NOT_TESTABLE, "later": NOT_RECORDED}
    with pytest.raises(ValueError, match="needs a reason"):
        led.not_testable("x", "s", reason="")
    with pytest.raises(ValueError, match="takes no value"):
        led.record("gpu", 1.0)


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


def test_save_writes_json_with_provenance(tmp_path, monkeypatch):
    led = ledger(n=1)
    led.claim("c", "statement", source="paper", criterion=at_least(1))
    led.record("c", 2, interval=(1.5, 2.5), detail="d")
    monkeypatch.delenv("REPROBOOK_LEDGER", raising=False)
    assert led.save() is None  # run by hand: nothing written
    monkeypatch.setenv("REPROBOOK_LEDGER", str(tmp_path / "l.json"))
    path = led.save()
    data = json.loads(open(path).read())
    for key in ("chapter", "profile", "parameters", "seeds", "wall_time_s", "peak_memory_mb",
                "environment", "device", "git_commit", "claims"):
        assert key in data
    assert data["claims"][0]["verdict"] == REPRODUCED
    assert data["environment"]["torch"].startswith("2.13")


def test_rendering_is_deterministic_and_escaped():
    led = ledger()
    led.claim("c", "a < b & c", source="p", criterion=at_most(0.85))
    led.record("c", 0.123456789)
    html = led._repr_html_()
    assert "a &lt; b &amp; c" in html and "0.1235" in html and "rb-reproduced" in html
    assert html == led._repr_html_() and "0.1235" in repr(led)


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
            "L.claim('c', 's', source='x', criterion=at_most(1)); L.record('c', 0.5); "
            "j = L.to_json(); assert 'torch' not in sys.modules, 'torch was loaded'; "
            "print(j['device']); import torch; print(L.device.type)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    desc, dev = out.stdout.split("\n")[:2]
    assert desc.endswith("(torch not used)") and dev in ("cpu", "cuda")


def test_bad_device_is_refused_at_start():
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        ledger(device="tpu")
