"""Benchmark: the chunkwise delta rule against the recurrence, and against fla's torch references.

On CPU it prints, for each sequence length ``T``, ratios of median forward times measured in one
run (the implementations are interleaved within each repeat, so slow drifts of a shared machine
hit them alike):

* ``rec/chunkC``: our recurrence (``fused_recurrent_delta_rule(impl="reference")``) over our
  chunkwise torch form (``chunk_delta_rule(impl="torch", chunk_size=C)``), C = 64 and 32 — the
  paper's parallelisation gain;
* ``fla/ours C=…``: fla's pure-torch chunkwise reference (``fla.ops.delta_rule.naive.
  delta_rule_chunkwise``; its default chunk is 32) over ours at the same chunk size — above 1
  means ours is faster;
* ``fla rec/fla chunk32``: the same gain inside fla's own references, for comparison.

fla columns are blank when ``fla`` (PyPI ``fla-core`` or ``flash-linear-attention``) is absent.
On a GPU it also times our Triton chunk and recurrent forward kernels (and fla's ``chunk_delta_rule``
in bf16 when installed) with ``triton.testing.do_bench`` and prints TFLOP/s with the formula shown.

    python -m reprobook.bench.delta_rule [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch

from reprobook.kernels.delta_rule import chunk_delta_rule, fused_recurrent_delta_rule, l2norm

__all__ = ["inputs", "time_rounds", "time_interleaved", "cpu_table", "main"]


def inputs(B, T, H, D, device="cpu", dtype=torch.float32, seed=0):
    """``q, k, v, beta`` as in the paper's tests: Gaussian q, v; L2-normalised k; beta in (0, 1)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, H, D, generator=g, dtype=dtype)
    k = l2norm(torch.randn(B, T, H, D, generator=g, dtype=dtype))
    v = torch.randn(B, T, H, D, generator=g, dtype=dtype)
    beta = torch.rand(B, T, H, generator=g, dtype=dtype).sigmoid()
    return tuple(x.to(device) for x in (q, k, v, beta))


def time_rounds(fns: dict, rounds: int, clock=time.perf_counter, sync=None, inner: int = 1) -> dict:
    """Per-round times of each callable in ``fns``: one warm-up of each, then ``rounds`` rounds
    in which every callable runs once, in turn. Returns ``{name: [seconds per round]}``.

    Interleaving puts slow drifts of a shared machine into every callable's times alike, so round
    ``r`` of two callables is a paired replicate. ``clock=time.thread_time`` counts only the CPU
    time of the calling thread: with torch on one thread that is the work itself, and other
    processes no longer inflate it. ``sync`` (``torch.cuda.synchronize`` on a GPU) is called
    before the clock starts and before it stops, so asynchronous kernels are timed to completion.
    ``inner > 1``: a round times each callable ``inner`` times back to back and keeps the minimum
    (timeit's advice: the least disturbed run), which damps the spikes of a busy machine.
    """
    for name, x in (("rounds", rounds), ("inner", inner)):
        if isinstance(x, bool) or not isinstance(x, int) or x < 1:
            raise ValueError(f"{name} must be a positive int, got {x!r}")
    for f in fns.values():
        f()
    if sync is not None:
        sync()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, f in fns.items():
            best = float("inf")
            for _ in range(inner):
                if sync is not None:
                    sync()
                t0 = clock()
                f()
                if sync is not None:
                    sync()
                best = min(best, clock() - t0)
            times[name].append(best)
    return times


def time_interleaved(fns: dict, repeats: int, clock=time.perf_counter) -> dict:
    """Median time of each callable in ``fns`` over ``repeats`` interleaved rounds
    (:func:`time_rounds`)."""
    return {name: statistics.median(ts) for name, ts in time_rounds(fns, repeats, clock).items()}


def _fla_naive():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from fla.ops.delta_rule import naive
        return naive
    except Exception:  # noqa: BLE001 - fla is optional
        return None


def cpu_table(lengths, B=1, H=4, D=64, chunks=(32, 64), repeats=5, fla=True) -> dict:
    """``{T: {name: median seconds}}``: ours (chunkwise at each C in ``chunks``, and the recurrence)
    and, when importable, fla's naive references (chunkwise at the same C, and its recurrence)."""
    naive = _fla_naive() if fla else None
    out = {}
    with torch.inference_mode():
        for T in lengths:
            q, k, v, beta = inputs(B, T, H, D)
            fns = {"ours_rec": lambda: fused_recurrent_delta_rule(q, k, v, beta)}
            for C in chunks:
                fns[f"ours_chunk{C}"] = lambda C=C: chunk_delta_rule(q, k, v, beta, chunk_size=C)
            if naive is not None:
                qh, kh, vh, bh = (x.transpose(1, 2).contiguous() for x in (q, k, v, beta))
                fns["fla_rec"] = lambda: naive.delta_rule_recurrence(qh, kh, vh, bh)
                for C in chunks:
                    if T % C == 0:    # fla's chunkwise reference needs T to be a multiple of C
                        fns[f"fla_chunk{C}"] = lambda C=C: naive.delta_rule_chunkwise(qh, kh, vh, bh,
                                                                                      chunk_size=C)
            out[T] = time_interleaved(fns, repeats)
    return out


def gpu_table(lengths, B=4, H=16, D=128, chunk=64):  # pragma: no cover - needs a GPU
    """GPU only: ms and TFLOP/s of the Triton forward kernels and, if importable, fla's kernel."""
    import triton

    try:
        from fla.ops.delta_rule import chunk_delta_rule as fla_chunk
    except Exception:  # noqa: BLE001 - fla is optional
        fla_chunk = None
    C = chunk
    print(f"DeltaNet chunk forward FLOPs ≈ B*H*T*(6*C*K + 4*C*V + 6*K*V + C^2/3), C={C}, K=V={D} "
          "(the count of kernels.md §6.2); fp32 inputs for ours, bf16 for fla")
    print(f"{'T':>6} {'chunk ms':>9} {'TFLOP/s':>8} {'rec ms':>8} {'fla ms':>8}")
    for T in lengths:
        q, k, v, beta = inputs(B, T, H, D, device="cuda")
        with torch.no_grad():
            ms = triton.testing.do_bench(lambda: chunk_delta_rule(q, k, v, beta, chunk_size=C,
                                                                  impl="triton"), quantiles=[0.5])
            ms_rec = triton.testing.do_bench(lambda: fused_recurrent_delta_rule(q, k, v, beta,
                                                                                impl="triton"),
                                             quantiles=[0.5])
            ms = ms[0] if isinstance(ms, (list, tuple)) else ms
            ms_rec = ms_rec[0] if isinstance(ms_rec, (list, tuple)) else ms_rec
            fla_ms = float("nan")
            if fla_chunk is not None:
                qb, kb, vb, bb = (x.bfloat16() for x in (q, k, v, beta))
                fla_ms = triton.testing.do_bench(lambda: fla_chunk(qb, kb, vb, bb), quantiles=[0.5])
                fla_ms = fla_ms[0] if isinstance(fla_ms, (list, tuple)) else fla_ms
        flops = B * H * T * (6 * C * D + 4 * C * D + 6 * D * D + C * C / 3)
        print(f"{T:>6} {ms:>9.3f} {flops / ms / 1e9:>8.2f} {ms_rec:>8.3f} {fla_ms:>8.3f}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="reprobook.bench.delta_rule",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two short lengths, three repeats (< 30 s)")
    args = parser.parse_args(argv)
    lengths = [256, 512] if args.quick else [256, 512, 1024, 2048]
    table = cpu_table(lengths, repeats=3 if args.quick else 5)
    print(f"delta rule, forward, CPU torch fp32, B=1, H=4, K=V=64, {torch.get_num_threads()} thread(s); "
          "ratios of median times (higher = the second one is faster)")
    print(f"{'T':>6} {'rec/chunk64':>12} {'rec/chunk32':>12} {'fla/ours C=32':>14} {'fla/ours C=64':>14} "
          f"{'fla rec/fla chunk32':>20}")

    def ratio(t, a, b, width, fmt=".2f"):
        return f"{t[a] / t[b]:>{width}{fmt}}" if a in t and b in t else f"{'-':>{width}}"

    for T, t in table.items():
        print(f"{T:>6} {ratio(t, 'ours_rec', 'ours_chunk64', 12, '.1f')} "
              f"{ratio(t, 'ours_rec', 'ours_chunk32', 12, '.1f')} "
              f"{ratio(t, 'fla_chunk32', 'ours_chunk32', 14)} {ratio(t, 'fla_chunk64', 'ours_chunk64', 14)} "
              f"{ratio(t, 'fla_rec', 'fla_chunk32', 20, '.1f')}")
    if torch.cuda.is_available():  # pragma: no cover
        gpu_table([512 * 2 ** i for i in range(5)])
    return table


if __name__ == "__main__":
    main()
