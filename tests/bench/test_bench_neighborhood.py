"""The neighborhood-attention benchmark runs, and its memory counter is exact and deterministic."""

import torch

import pytest

from reprobook.bench.neighborhood import (
    SPEED_FORMS, count_work, cpu_times, local_attention, main, median_times, na_flops, speed_rounds,
    timing_rounds, track_memory,
)
from reprobook.kernels.neighborhood import na1d


def test_track_memory_counts_new_storages_only():
    x = torch.randn(100, 10)                       # created outside: never counted

    def f(t):
        a = t * 2                                  # 4000 bytes
        b = a.view(-1)                             # a view: no new bytes
        c = torch.cat([b, b])                      # 8000 bytes, a alive too -> 12000
        del a, b
        return c.sum()                             # c freed after; result 4 bytes

    m = track_memory(f, x)
    assert m["peak"] == 12000 and m["largest"] == 8000 and m["result_bytes"] == 4


def test_track_memory_is_deterministic_and_separates_forms():
    q, k, v = (torch.randn(1, 256, 2, 16) for _ in range(3))
    runs = [track_memory(na1d, q, k, v, 15, impl="torch") for _ in range(2)]
    assert runs[0] == runs[1]
    dense = track_memory(na1d, q, k, v, 15, impl="reference")
    assert dense["largest"] >= 2 * 256 * 256 * 4          # the H x L x L scores
    assert runs[0]["largest"] < dense["largest"]


def test_cpu_times_and_main(capsys):
    t = cpu_times([32], kernel_size=5, H=1, D=8, repeats=1, forms=("blocked", "dense", "naive", "gemm"))
    assert set(t[32]) == {"blocked", "dense", "naive", "gemm"} and all(x > 0 for x in t[32].values())
    out = main(["--quick", "--lengths", "40", "--kernel-size", "7", "--repeats", "1",
                "--threads", "1"])
    assert list(out["1d"]) == [40]
    printed = capsys.readouterr().out
    assert "naive/blocked" in printed and "gemm/blocked" in printed and "dense/blocked" in printed


def test_median_times_and_flops():
    calls = []
    med = median_times({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 2)
    assert set(med) == {"a", "b"} and calls == ["a", "b", "a", "b", "a", "b"]
    assert na_flops(1, 2, 10, 3, 4) == 2 * 1 * 2 * 10 * 3 * 8


def test_timing_rounds_interleaves_and_repeats_short_calls():
    calls = []
    t = timing_rounds({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 3)
    assert calls == ["a", "b"] * 4 and all(len(x) == 3 for x in t.values())
    calls.clear()
    syncs = []
    t = timing_rounds({"a": lambda: calls.append("a")}, 2, sync=lambda: syncs.append(1),
                      min_time=0.5)
    n = (len(calls) - 2) // 2                  # calls per round after warm-up and calibration
    assert n > 1 and len(calls) == 2 + 2 * n and len(syncs) == 6 and len(t["a"]) == 2
    with pytest.raises(ValueError, match="rounds"):
        timing_rounds({}, 0)
    with pytest.raises(ValueError, match="min_time"):
        timing_rounds({}, 1, min_time=-1)
    with pytest.raises(ValueError, match="best_of"):
        timing_rounds({}, 1, best_of=0)


def test_best_of_keeps_the_fastest_call_of_each_round():
    import time as _time

    delays = iter([0.0, 0.05, 0.0, 0.05, 0.05, 0.0, 0.05])  # warm-up, then 2 rounds x best of 3
    t = timing_rounds({"a": lambda: _time.sleep(next(delays))}, 2, best_of=3)
    assert len(t["a"]) == 2 and max(t["a"]) < 0.04


def test_speed_rounds_times_every_form_on_the_cpu():
    out = speed_rounds([32], kernel_size=5, H=1, D=8, rounds=2)
    assert list(out) == [32] and set(out[32]) == set(SPEED_FORMS)
    assert all(len(x) == 2 and min(x) > 0 for x in out[32].values())
    with pytest.raises(ValueError, match="unknown forms"):
        speed_rounds([32], kernel_size=5, forms=("fused", "natten"))


def test_speed_rounds_clock():
    import time as _time

    with pytest.raises(ValueError, match="clock"):
        speed_rounds([32], kernel_size=5, H=1, D=8, rounds=1, forms=("fused",), clock="gpu")
    with pytest.raises(ValueError, match="cannot time GPU work"):
        speed_rounds([32], kernel_size=5, rounds=1, forms=("fused",), device="cuda", clock="cpu")
    seen = []

    def clock():
        seen.append(1)
        return _time.thread_time()

    t = timing_rounds({"a": lambda: sum(range(1000))}, 2, clock=clock)
    assert len(seen) == 4 and len(t["a"]) == 2          # two reads per timed round


def test_count_work_counts_matmul_flops_and_bytes_written():
    a, b = torch.randn(3, 4, 5), torch.randn(3, 5, 6)

    def f(x, y):
        z = torch.bmm(x, y)                      # 2*3*4*5*6 FLOPs, 72 floats written
        z.mul_(2.0)                              # in place, rewrites 72 floats
        return z.transpose(1, 2)                 # a view: nothing written

    w = count_work(f, a, b)
    assert w == {"flops": 2 * 3 * 4 * 5 * 6, "bytes_written": 2 * 72 * 4}
    q, k, v = (torch.randn(1, 2, 16, 8) for _ in range(3))
    sdpa = count_work(torch.nn.functional.scaled_dot_product_attention, q, k, v)
    assert sdpa["flops"] == 2 * 2 * 16 * 16 * (8 + 8)


def test_count_work_separates_the_na_forms():
    q, k, v = (torch.randn(1, 256, 2, 16) for _ in range(3))
    work = {impl: count_work(na1d, q, k, v, 15, impl=impl) for impl in ("naive", "gemm", "torch")}
    assert work["naive"]["flops"] == na_flops(1, 2, 256, 15, 16)    # the minimum: 2 N k (D + Dv)
    assert work["gemm"]["flops"] == work["torch"]["flops"] > work["naive"]["flops"]
    # the unfused forms write more than the blocked form; the naive form most (gathered K and V)
    assert work["naive"]["bytes_written"] > work["gemm"]["bytes_written"] > work["torch"]["bytes_written"]


def test_local_attention_is_block_diagonal_attention():
    q, k, v = (torch.randn(1, 24, 2, 4, dtype=torch.float64) for _ in range(3))
    blk = torch.arange(24) // 8
    mask = blk[:, None] == blk[None, :]
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask).transpose(1, 2)
    assert (local_attention(q, k, v, 8) - ref).abs().max() < 1e-12
    with pytest.raises(ValueError, match="block"):
        local_attention(q, k, v, 0)
    with pytest.raises(ValueError, match="multiple of block"):
        local_attention(q, k, v, 5)
