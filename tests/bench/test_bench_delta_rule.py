"""The delta-rule benchmark runs and returns positive times (no timing is asserted)."""
from reprobook.bench.delta_rule import cpu_table, inputs, time_interleaved


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
