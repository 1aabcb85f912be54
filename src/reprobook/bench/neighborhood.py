"""Benchmark: neighborhood attention, its fused, GEMM, naive and dense forms, NATTEN and SDPA.

On CPU it prints, for each length ``L`` (1-D, kernel 63 by default), the median forward time of
each form divided by that of our blocked (fused) form (ratios measured in one run; absolute times
depend on the machine):

* ``dense``: dense attention with the ``L x L`` neighbourhood mask (``impl="reference"``);
* ``naive``: gather the ``k`` neighbours of every query, matrix-vector products (``impl="naive"``);
* ``gemm``: the paper's unfused GEMM form: tile GEMMs, the ``L x k`` weights stored in between
  (``impl="gemm"``);
* ``natten``: ``natten.na1d(..., backend="flex-fna")`` when NATTEN is importable (its CPU path);
* ``sdpa``: dense full self-attention, ``torch.nn.functional.scaled_dot_product_attention``.

A ratio above 1 means the blocked form is that many times faster. The work the blocked form does is
about ``L * (T + k - 1)`` scores (tile ``T``) against ``L**2`` for dense attention.

It also provides :func:`speed_rounds` (interleaved timing rounds, the chapter's replicates) and
re-exports the deterministic counters :func:`track_memory` and :func:`count_work`.

On a GPU it times the Triton kernel, the GEMM and naive forms and SDPA (and NATTEN, if installed)
in half precision with ``triton.testing.do_bench`` and prints TFLOP/s with NATTEN's count
``FLOPs = 2·B·H·N·prod(k)·(D + Dv)`` (dense SDPA: ``2·B·H·N²·(D + Dv)``).

    python -m reprobook.bench.neighborhood [--quick]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F

from reprobook.bench._counters import count_work, track_memory
from reprobook.kernels.neighborhood import na1d, na2d

__all__ = ["track_memory", "count_work", "median_time", "median_times", "timing_rounds",
           "speed_rounds", "SPEED_FORMS", "local_attention", "local_block", "cpu_times", "main",
           "na_flops"]


# --------------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------------
def median_time(fn, repeats: int = 5) -> float:
    """Median wall time of ``fn()`` over ``repeats`` calls after one warm-up call (seconds)."""
    return median_times({"fn": fn}, repeats)["fn"]


def median_times(fns: dict, repeats: int = 5) -> dict:
    """Median wall time of each ``fns[name]()`` (seconds), timed round-robin after a warm-up.

    Interleaving the repeats (a, b, c, a, b, c, ...) exposes every form to the same bursts of
    load from other processes, which keeps the *ratios* steadier than timing one form at a time.
    """
    return {name: statistics.median(ts) for name, ts in timing_rounds(fns, repeats).items()}


def timing_rounds(fns: dict, rounds: int, sync=None, min_time: float = 0.0, best_of: int = 1,
                  clock=time.perf_counter) -> dict:
    """Wall time of each ``fns[name]()`` in each of ``rounds`` interleaved rounds (seconds per call).

    One warm-up call of every function first (a GPU kernel compiles there); then each round times
    every function in turn, so all forms see the same bursts of load from other processes. Round
    ``r`` of every form is one paired replicate: ``{name: [t_1, ..., t_rounds]}``.

    ``min_time``: a function whose call (timed once more after its warm-up, which may include a
    compilation) took less than this is called ``ceil(min_time / that time)`` times per round and
    its mean time per call recorded, so that one scheduling hiccup does not decide a short call's
    time. ``best_of``: each form is timed that many times in a row within a round and the fastest
    kept (load from other processes only ever adds time, so the minimum is the steadiest
    estimate). ``sync`` (e.g. ``torch.cuda.synchronize``) is called around each timed stretch, so
    asynchronous launches are timed to completion. ``clock``: the timer, wall time by default;
    :func:`time.thread_time` measures the CPU time of the calling thread, which other processes on
    a shared machine cannot inflate (valid when all the work runs on that thread: one torch thread).
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive int, got {rounds!r}")
    if not min_time >= 0:
        raise ValueError(f"min_time must be >= 0 seconds, got {min_time!r}")
    if isinstance(best_of, bool) or not isinstance(best_of, int) or best_of < 1:
        raise ValueError(f"best_of must be a positive int, got {best_of!r}")
    sync = sync or (lambda: None)
    for fn in fns.values():
        fn()
    sync()
    calls = dict.fromkeys(fns, 1)
    if min_time > 0:
        for name, fn in fns.items():
            t0 = clock()
            fn()
            sync()
            once = clock() - t0
            calls[name] = max(1, math.ceil(min_time / once)) if once > 0 else 1
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            best = math.inf
            for _ in range(best_of):
                sync()
                t0 = clock()
                for _ in range(calls[name]):
                    fn()
                sync()
                best = min(best, (clock() - t0) / calls[name])
            times[name].append(best)
    return times


#: The forms :func:`speed_rounds` can time (1-D NA forward, heads-last [B, L, H, D]).
SPEED_FORMS = {
    "fused": "fused NA: our blocked torch form on a CPU, the Triton kernel on a GPU",
    "gemm": "the paper's unfused GEMM NA: tile GEMMs, the L x k weights stored (impl='gemm')",
    "naive": "naive NA: gather the k neighbours of each query, matrix-vector products (impl='naive')",
    "dense": "dense attention with the L x L NA mask (torch SDPA with a boolean attn_mask)",
    "full": "dense self-attention without a mask (torch SDPA)",
    "local": "block-local attention: SDPA inside disjoint blocks of local_block(k) tokens (no "
             "sliding window; about NA's FLOPs)",
    "fused-no-halo": "the fused form with planted_bug('no-halo'): every tile visits all keys",
    "gemm-no-halo": "the GEMM form with planted_bug('no-halo'): every tile's span is its whole group",
}


def local_block(kernel_size: int) -> int:
    """Block size of :func:`local_attention` for a window ``kernel_size``: the next power of two."""
    return 1 << max(0, (int(kernel_size) - 1).bit_length())


def local_attention(q, k, v, block: int):
    """Attention inside disjoint blocks of ``block`` consecutive tokens (``[B, L, H, D]``, ``L`` a
    multiple of ``block``): what NA becomes with its per-query sliding window removed, at about
    NA's FLOP count, as one batched SDPA."""
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be a positive int, got {block!r}")
    b, L, h, _ = q.shape
    if L % block:
        raise ValueError(f"local_attention needs the length {L} to be a multiple of block {block}")

    def blocks(t):
        return t.reshape(b * L // block, block, h, t.shape[-1]).transpose(1, 2)

    o = F.scaled_dot_product_attention(blocks(q), blocks(k), blocks(v))
    return o.transpose(1, 2).reshape(b, L, h, v.shape[-1])


def speed_rounds(lengths, kernel_size=63, B=1, H=4, D=64, rounds=5, forms=tuple(SPEED_FORMS),
                 device="cpu", dtype=torch.float32, seed=0, min_time=0.0, best_of=1,
                 clock="auto") -> dict:
    """``{L: {form: [seconds per round]}}`` of the 1-D forward at each length, forms interleaved.

    The fused form is ``impl="torch"`` (blocked) on a CPU and ``impl="triton"`` on a CUDA device
    (compiled; its inputs must be there). The dense mask is built once per length, outside the
    timed calls, as a model would cache it. Inference mode; ``torch.cuda.synchronize`` around
    every timed stretch on a GPU. ``min_time`` and ``best_of`` as in :func:`timing_rounds`.
    ``clock="auto"``: on a CPU running one torch thread, the CPU time of this thread
    (:func:`time.thread_time`, steady on a shared machine); otherwise wall time. ``"wall"`` or
    ``"cpu"`` force one.
    """
    from reprobook.kernels.neighborhood import neighborhood_mask, planted_bug

    unknown = [f for f in forms if f not in SPEED_FORMS]
    if unknown:
        raise ValueError(f"unknown forms {unknown}; choose from {tuple(SPEED_FORMS)}")
    if clock not in ("auto", "wall", "cpu"):
        raise ValueError(f"clock must be 'auto', 'wall' or 'cpu', got {clock!r}")
    device = torch.device(device)
    if clock == "cpu" and device.type == "cuda":
        raise ValueError("clock='cpu' cannot time GPU work; use 'wall' or 'auto'")
    if clock == "auto":
        clock = "cpu" if device.type == "cpu" and torch.get_num_threads() == 1 else "wall"
    timer = time.thread_time if clock == "cpu" else time.perf_counter
    fused_impl = "triton" if device.type == "cuda" else "torch"
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    out = {}
    with torch.inference_mode():
        for L in lengths:
            q, k, v = _inputs((B, L, H, D), device=device, dtype=dtype, seed=seed)
            mask = neighborhood_mask(L, kernel_size, device=device) if "dense" in forms else None

            def bugged(impl):
                def run():
                    with planted_bug("no-halo"):
                        return na1d(q, k, v, kernel_size, impl=impl)
                return run

            fns = {
                "fused": lambda: na1d(q, k, v, kernel_size, impl=fused_impl),
                "gemm": lambda: na1d(q, k, v, kernel_size, impl="gemm"),
                "naive": lambda: na1d(q, k, v, kernel_size, impl="naive"),
                "dense": lambda: _sdpa(q, k, v, mask),
                "full": lambda: _sdpa(q, k, v),
                "local": lambda: local_attention(q, k, v, local_block(kernel_size)),
                "fused-no-halo": bugged(fused_impl),
                "gemm-no-halo": bugged("gemm"),
            }
            out[L] = timing_rounds({f: fns[f] for f in forms}, rounds, sync=sync,
                                   min_time=min_time, best_of=best_of, clock=timer)
            del q, k, v, mask
    return out


def _natten():
    try:
        import natten
    except Exception:  # natten is optional
        return None
    return natten


def _sdpa(q, k, v, mask=None):
    # SDPA takes [B, H, L, D]; the transposes are views of the heads-last tensors
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                          v.transpose(1, 2), attn_mask=mask).transpose(1, 2)


def _inputs(shape, device="cpu", dtype=torch.float32, seed=0):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randn(*shape, generator=gen, dtype=dtype).to(device) for _ in range(3)]


def cpu_times(lengths, kernel_size=63, B=1, H=4, D=64, repeats=5,
              forms=("blocked", "dense", "naive", "gemm", "sdpa", "natten"), dims=1) -> dict:
    """``{L: {form: median seconds}}`` of the forward pass (float32, CPU, inference mode).

    ``dims=2`` runs ``na2d`` on ``L x L`` maps with a ``kernel_size x kernel_size`` window.
    ``"natten"`` is skipped silently when NATTEN is not importable.
    """
    na = na1d if dims == 1 else na2d
    natten = _natten() if "natten" in forms else None
    out = {}
    with torch.inference_mode():
        for L in lengths:
            shape = (B, L, H, D) if dims == 1 else (B, L, L, H, D)
            q, k, v = _inputs(shape)
            fns = {
                "blocked": lambda: na(q, k, v, kernel_size, impl="torch"),
                "dense": lambda: na(q, k, v, kernel_size, impl="reference"),
                "naive": lambda: na(q, k, v, kernel_size, impl="naive"),
                "gemm": lambda: na(q, k, v, kernel_size, impl="gemm"),
                "sdpa": (lambda: _sdpa(q, k, v)) if dims == 1 else (
                    lambda: _sdpa(*(t.reshape(B, L * L, H, D) for t in (q, k, v)))),
            }
            if natten is not None:
                nat = natten.na1d if dims == 1 else natten.na2d
                fns["natten"] = lambda: nat(q, k, v, kernel_size=kernel_size, backend="flex-fna")
            out[L] = median_times({f: fns[f] for f in forms if f in fns}, repeats)
    return out


def na_flops(B, H, N, kernel_volume, D, Dv=None) -> float:
    """NATTEN's forward FLOP count: two GEMMs over ``N * prod(k)`` scores."""
    Dv = D if Dv is None else Dv
    return 2.0 * B * H * N * kernel_volume * (D + Dv)


def _print_table(title, times):
    forms = [f for f in ("dense", "naive", "gemm", "natten", "sdpa")
             if any(f in t for t in times.values())]
    print(title)
    print(f"{'L':>6} " + " ".join(f"{f + '/blocked':>15}" for f in forms))
    for L, t in times.items():
        print(f"{L:>6} " + " ".join(
            f"{t[f] / t['blocked']:>15.2f}" if f in t else f"{'-':>15}" for f in forms))


def gpu_table(lengths, kernel_size=127, B=1, H=8, D=128):  # pragma: no cover - needs a GPU
    """GPU only: ms and TFLOP/s of the Triton forward, the GEMM and naive forms, SDPA and NATTEN
    (fp16, 1-D). The naive form is skipped where its gathered keys would exceed 8 GiB."""
    import triton

    natten = _natten()
    print(f"GPU fp16 forward, B={B}, H={H}, D={D}, kernel {kernel_size}; NA TFLOP/s = "
          "2*B*H*N*k*(D+Dv)/time, SDPA TFLOP/s = 2*B*H*N*N*(D+Dv)/time")
    print(f"{'L':>6} {'triton ms':>10} {'TFLOP/s':>8} {'gemm ms':>8} {'naive ms':>9} {'sdpa ms':>8} "
          f"{'TFLOP/s':>8} {'natten ms':>10}")
    for L in lengths:
        q, k, v = _inputs((B, L, H, D), device="cuda", dtype=torch.float16)
        with torch.no_grad():
            ms_tri = triton.testing.do_bench(lambda: na1d(q, k, v, kernel_size, impl="triton"))
            ms_gemm = triton.testing.do_bench(lambda: na1d(q, k, v, kernel_size, impl="gemm"))
            ms_naive = (triton.testing.do_bench(lambda: na1d(q, k, v, kernel_size, impl="naive"))
                        if 2 * B * H * L * kernel_size * D * 2 < 8 * 2 ** 30 else float("nan"))
            ms_sdpa = triton.testing.do_bench(lambda: _sdpa(q, k, v))
            ms_nat = (triton.testing.do_bench(lambda: natten.na1d(q, k, v, kernel_size))
                      if natten is not None else float("nan"))
        f_na = na_flops(B, H, L, kernel_size, D)
        f_sd = na_flops(B, H, L, L, D)
        print(f"{L:>6} {ms_tri:>10.3f} {f_na / ms_tri / 1e9:>8.1f} {ms_gemm:>8.3f} {ms_naive:>9.3f} "
              f"{ms_sdpa:>8.3f} {f_sd / ms_sdpa / 1e9:>8.1f} {ms_nat:>10.3f}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="reprobook.bench.neighborhood",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="lengths 256..1024, three repeats, no NATTEN (< 30 s)")
    parser.add_argument("--lengths", type=int, nargs="+", default=None, help="override the lengths")
    parser.add_argument("--kernel-size", type=int, default=63)
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per measurement")
    parser.add_argument("--no-natten", action="store_true", help="skip NATTEN even if installed")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's; 1 is steadier on a busy machine)")
    args = parser.parse_args(argv)
    threads_before = torch.get_num_threads()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        return _run(args)
    finally:
        torch.set_num_threads(threads_before)     # do not leak into other benchmarks


def _run(args) -> dict:
    lengths = args.lengths or ([256, 512, 1024] if args.quick else [512, 1024, 2048, 4096])
    repeats = args.repeats or (3 if args.quick else 5)
    forms = ["blocked", "dense", "naive", "gemm", "sdpa"]
    if not (args.quick or args.no_natten):
        forms.append("natten")
    times = cpu_times(lengths, kernel_size=args.kernel_size, repeats=repeats, forms=forms)
    natten_note = "" if "natten" in forms and _natten() else " (NATTEN not run)"
    _print_table(f"1-D neighborhood attention forward, CPU float32, B=1, H=4, D=64, kernel "
                 f"{args.kernel_size}, {torch.get_num_threads()} thread(s): time / blocked time "
                 f"(median of {repeats}){natten_note}",
                 times)
    result = {"1d": times}
    if not args.quick:
        times2 = cpu_times([32, 64], kernel_size=13, repeats=repeats, forms=forms, dims=2)
        _print_table("2-D neighborhood attention, X = Y = L, kernel 13x13, same settings", times2)
        result["2d"] = times2
    if torch.cuda.is_available():  # pragma: no cover
        gpu_table([1024, 4096, 16384, 65536])
    return result


if __name__ == "__main__":
    main()
