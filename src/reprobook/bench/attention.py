"""Benchmark: softmax attention, tiled online softmax vs naive vs torch SDPA, over sequence length.

On CPU it prints, for each length ``S``, the median forward time of the naive reference and of the
tiled torch form divided by that of ``torch.nn.functional.scaled_dot_product_attention`` (ratios
measured in one run; absolute times depend on the machine). On a GPU it also times the Triton
forward kernel against SDPA with ``triton.testing.do_bench`` and prints TFLOP/s with
``FLOPs = 4·B·H·Sq·Sk·D`` (halved when causal), the count the FlashAttention papers use.

    python -m reprobook.bench.attention [--quick]
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from reprobook.kernels.attention import attention_flops, flash_attn_func
from reprobook.bench._timing import median_time


def _inputs(B, S, H, D, device, dtype=torch.float32, seed=0):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randn(B, S, H, D, generator=gen, dtype=dtype).to(device) for _ in range(3)]


def _sdpa(q, k, v, causal):
    # SDPA takes [B, H, S, D]; the transposes are views, as in a model that keeps [B, S, H, D].
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         is_causal=causal)
    return out.transpose(1, 2)


def cpu_ratios(lengths, B=1, H=4, D=64, causal=False, block=128, repeats=3):
    """``{S: (naive / sdpa, tiled / sdpa)}`` median forward-time ratios (float32, CPU)."""
    out = {}
    with torch.inference_mode():
        for S in lengths:
            q, k, v = _inputs(B, S, H, D, "cpu")
            t_sdpa = median_time(lambda: _sdpa(q, k, v, causal), repeats)
            t_naive = median_time(lambda: flash_attn_func(q, k, v, causal=causal, impl="reference"), repeats)
            t_tiled = median_time(
                lambda: flash_attn_func(q, k, v, causal=causal, impl="torch", block_q=block, block_k=block),
                repeats)
            out[S] = (t_naive / t_sdpa, t_tiled / t_sdpa)
    return out


def gpu_table(lengths, total_tokens=16384, H=16, D=128, causal=False):  # pragma: no cover - GPU
    """GPU only: ms and TFLOP/s of the Triton forward and of torch SDPA (fp16, FA3-style sweep)."""
    import triton

    print(f"GPU fp16 forward, {total_tokens} tokens per batch, H={H}, D={D}, causal={causal}; "
          "TFLOP/s = 4*B*H*S*S*D / time (halved if causal)")
    print(f"{'S':>6} {'B':>4} {'triton ms':>10} {'TFLOP/s':>8} {'sdpa ms':>8} {'TFLOP/s':>8}")
    for S in lengths:
        B = max(1, total_tokens // S)
        q, k, v = _inputs(B, S, H, D, "cuda", dtype=torch.float16)
        flops = attention_flops(B, H, S, S, D, causal)
        with torch.no_grad():
            ms_tri = triton.testing.do_bench(
                lambda: flash_attn_func(q, k, v, causal=causal, impl="triton", block_q=128, block_k=64))
            ms_sdpa = triton.testing.do_bench(lambda: _sdpa(q, k, v, causal))
        print(f"{S:>6} {B:>4} {ms_tri:>10.3f} {flops / ms_tri / 1e9:>8.1f} "
              f"{ms_sdpa:>8.3f} {flops / ms_sdpa / 1e9:>8.1f}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="reprobook.bench.attention", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three short lengths, three repeats (< 30 s)")
    parser.add_argument("--lengths", type=int, nargs="+", default=None, help="override the lengths")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per measurement")
    args = parser.parse_args(argv)
    lengths = args.lengths or ([256, 512, 1024] if args.quick else [256, 512, 1024, 2048, 4096])
    repeats = args.repeats or (3 if args.quick else 5)
    ratios = cpu_ratios(lengths, repeats=repeats)
    print("softmax attention forward, CPU float32, B=1, H=4, D=64, tiles 128x128: "
          "time / torch SDPA time (median of repeats)")
    print(f"{'S':>6} {'naive/sdpa':>11} {'tiled/sdpa':>11}")
    for S, (r_naive, r_tiled) in ratios.items():
        print(f"{S:>6} {r_naive:>11.2f} {r_tiled:>11.2f}")
    if torch.cuda.is_available():  # pragma: no cover
        for causal in (False, True):
            gpu_table([512, 1024, 2048, 4096, 8192, 16384], causal=causal)
    return ratios


if __name__ == "__main__":
    main()
