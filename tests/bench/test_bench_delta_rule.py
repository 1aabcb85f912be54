"""The delta-rule benchmark runs and returns positive times (no timing is asserted)."""
import pytest

from reprobook.bench.delta_rule import cpu_table, inputs, time_interleaved, time_rounds


def test_cpu_table_shape_and_sign():
    table = cpu_table([16, 40], B=1, H=1, D=8, chunks=(16,), repeats=1, fla=False)
    assert list(table) == [16, 40]
    assert all(set(t) == {"ours_chunk16", "ours_rec"} and min(t.values()) > 0 for t in table.values())


def test_time_interleaved_and_inputs():
    q, k, v, beta = inputs(1, 8, 2, 4)
    assert q.shape == (1, 8, 2, 4) and beta.shape == (1, 8, 2)
    assert abs(k.norm(dim=-1) - 1).max() < 1e-5
    times = time_interleaved({"a": lambda: None, "b": lambda: sum(range(10))}, 2)
    assert set(times) == {"a", "b"} and all(t >= 0 for t in times.values())


def test_time_rounds_interleaves_and_pairs_rounds():
    calls = []
    syncs = []
    ticks = iter(range(1000))
    times = time_rounds({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 3,
                        clock=lambda: next(ticks), sync=lambda: syncs.append(1))
    assert calls == ["a", "b"] + ["a", "b"] * 3          # one warm-up each, then in turn
    assert set(times) == {"a", "b"} and all(len(t) == 3 for t in times.values())
    assert all(t == 1 for ts in times.values() for t in ts)   # the fake clock ticks once per read
    assert len(syncs) == 1 + 2 * 6                        # after warm-up, around every timed call
    with pytest.raises(ValueError, match="rounds"):
        time_rounds({"a": lambda: None}, 0)


def test_time_rounds_inner_keeps_the_least_disturbed_call():
    readings = iter([0, 5, 5, 6, 6, 10] * 2)      # call durations 5, 1, 4 in each round
    times = time_rounds({"a": lambda: None}, 2, clock=lambda: next(readings), inner=3)
    assert times == {"a": [1, 1]}
    with pytest.raises(ValueError, match="inner"):
        time_rounds({"a": lambda: None}, 1, inner=0)
