"""Benchmark: chunked against recurrent gated slot attention (and GLA) over sequence length.

On CPU it prints, for each ``T``, the median forward time of the token-by-token recurrence divided
by that of the chunked two-pass form (a ratio measured in one run; absolute times depend on the
machine).  On a GPU it also times the Triton forward kernel (and fla's ``chunk_gsa`` if installed)
with ``triton.testing.do_bench`` and prints TFLOP/s using the formula printed with the table.

    python -m reprobook.bench.gsa [--quick]
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from reprobook.kernels.gla import chunk_gla
from reprobook.kernels.gsa import chunk_gsa
from reprobook.bench._timing import median_time


def _inputs(B, T, H, K, V, M, device, dtype=torch.float32, seed=0):
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype).to(device)

    q, k, v = r(B, T, H, K), r(B, T, H, K), r(B, T, H, V)
    g = F.logsigmoid(r(B, T, H, M)) / 8  # the layer's gate_logit_normalizer
    gk = F.logsigmoid(r(B, T, H, K)) / 8
    return q, k, v, 1 - g.exp(), g, gk


def cpu_ratios(lengths, B=2, H=2, K=64, V=64, M=32, chunk=64, repeats=3):
    """``{T: (gsa_ratio, gla_ratio)}``: recurrent time / chunked time, forward only."""
    out = {}
    with torch.inference_mode():
        for T in lengths:
            q, k, v, s, g, gk = _inputs(B, T, H, K, V, M, "cpu")
            t_gsa_rec = median_time(lambda: chunk_gsa(q, k, v, s, g, impl="reference"), repeats)
            t_gsa_chk = median_time(lambda: chunk_gsa(q, k, v, s, g, chunk_size=chunk), repeats)
            t_gla_rec = median_time(lambda: chunk_gla(q, k, v, gk, impl="reference"), repeats)
            t_gla_chk = median_time(lambda: chunk_gla(q, k, v, gk, chunk_size=chunk), repeats)
            out[T] = (t_gsa_rec / t_gsa_chk, t_gla_rec / t_gla_chk)
    return out


def gpu_table(lengths, B=16, H=4, K=128, V=128, M=64):  # pragma: no cover - needs a GPU
    """GPU only: ms and TFLOP/s of the Triton forward and, if importable, fla's chunk_gsa."""
    import triton

    try:
        from fla.ops.gsa import chunk_gsa as fla_chunk_gsa
    except Exception:  # noqa: BLE001 - fla is optional
        fla_chunk_gsa = None
    print("GSA forward FLOPs = two chunked GLA passes: B*H*T*(2C*(K+M) + 4K*M) + B*H*T*(2C*(M+V) + 4M*V),"
          " C = 16 (Triton) / 64 (fla)")
    print(f"{'T':>6} {'triton ms':>10} {'TFLOP/s':>8} {'fla ms':>8}")
    for T in lengths:
        q, k, v, s, g, _ = (x.contiguous() for x in _inputs(B, T, H, K, V, M, "cuda"))
        with torch.no_grad():
            ms = triton.testing.do_bench(lambda: chunk_gsa(q, k, v, s, g, impl="triton"), quantiles=[0.5])
            C = 16
            flops = B * H * T * (2 * C * (K + M) + 4 * K * M) + B * H * T * (2 * C * (M + V) + 4 * M * V)
            fla_ms = float("nan")
            if fla_chunk_gsa is not None:
                qb, kb, vb, sb, gb = (x.bfloat16() for x in (q, k, v, s, g))
                fla_ms = triton.testing.do_bench(lambda: fla_chunk_gsa(qb, kb, vb, sb, gb), quantiles=[0.5])
        print(f"{T:>6} {ms:>10.3f} {flops / ms / 1e9:>8.2f} {fla_ms:>8.3f}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="reprobook.bench.gsa", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two short lengths, two repeats (< 30 s)")
    args = parser.parse_args(argv)
    lengths = [64, 256] if args.quick else [256, 512, 1024, 2048]
    ratios = cpu_ratios(lengths, repeats=2 if args.quick else 5)
    print("gated slot attention / GLA, forward, CPU torch: recurrent time / chunked time "
          "(B=2, H=2, K=V=64, M=32, chunk 64; median of repeats)")
    print(f"{'T':>6} {'GSA ratio':>10} {'GLA ratio':>10}")
    for T, (r_gsa, r_gla) in ratios.items():
        print(f"{T:>6} {r_gsa:>10.1f} {r_gla:>10.1f}")
    if torch.cuda.is_available():  # pragma: no cover
        gpu_table([128 * 2 ** i for i in range(6)])
    return ratios


if __name__ == "__main__":
    main()
