#!/usr/bin/env bash
# The checks that need a GPU, as one command (about 8 minutes on one H100/H200):
#   1. the Triton kernels' unit tests compiled natively (TRITON_INTERPRET unset);
#   2. the four kernels chapters at the `gpu` profile, through the runner;
#   3. the kernel benchmarks, with TFLOP/s.
# Here, first (needs network): scripts/gpu-wheels.sh, for the packages the GPU image lacks.
# There: scripts/gpu-check.sh [OUT_DIR]   (default $OUT, else _build/gpu-check): logs and the gpu
# ledgers land there; the exit status is 0 only if every step passed. PY=... picks the Python.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-_build/gpu-check}}
mkdir -p "$out"
if [ -n "${PY:-}" ]; then :; elif [ -x .venv/bin/python ]; then PY=$PWD/.venv/bin/python; else PY=$(command -v python3); fi
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/reprobook-site .whl/*.whl || exit 2
  export PYTHONPATH=/tmp/reprobook-site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}
else
  export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
fi
unset TRITON_INTERPRET REPROBOOK_STATIC
"$PY" -c 'import sys, torch
if not torch.cuda.is_available(): sys.exit("gpu-check: torch sees no CUDA device")
print("GPU:", torch.cuda.get_device_name(), "| torch", torch.__version__)' || exit 2

rc=0
step() {  # step NAME SECONDS COMMAND...: run with a time limit, keep its log, show its tail
  local name=$1 limit=$2 start r
  shift 2
  echo "== $name (at most ${limit} s)"
  start=$(date +%s)
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  r=$?
  echo "   exit $r after $(( $(date +%s) - start )) s (log: $out/$name.log)"
  tail -n 30 "$out/$name.log"
  [ "$r" -eq 0 ] || rc=1
}
step unit 150 "$PY" -m pytest tests/kernels -q -p no:cacheprovider -x
step chapters 300 "$PY" -m reprobook.book.cli run --part kernels --profile gpu --jobs 1 --force \
    --timeout 240
step bench 90 "$PY" -m reprobook.book.cli bench kernels
cp runs/gpu/kernels/*.ledger.json "$out/" 2>/dev/null || true
exit $rc
