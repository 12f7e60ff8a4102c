#!/usr/bin/env bash
# One device call for the decode (M = 1) work: GPU facts, on-device preflight, a quick
# correctness smoke on a small shape, then the full bench. Everything lands in $OUT.
# Run from the repository root on the device machine, with the release binary carried:
#   bash scripts/device/decode.sh [extra bench args]
set -euo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RUST_BACKTRACE=1
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/device}
CACHE=${CACHE:-/tmp/vnni-cubin-cache}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
"$BIN" preflight --cache "$CACHE" --out "$OUT/resources.csv" | tail -3
"$BIN" bench --cache "$CACHE" --shapes 4096x4096,24576x4096 --modes eager --samples 3 --warmups 1 --out "$OUT/smoke" 2>&1 | tail -20
"$BIN" bench --cache "$CACHE" --out "$OUT" "$@" 2>"$OUT/bench.log"
