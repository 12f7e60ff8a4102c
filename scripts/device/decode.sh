#!/usr/bin/env bash
# One device call for the decode (M = 1) work: GPU facts, on-device preflight, a quick
# correctness smoke on small shapes, the full bench, then the cell sweep run twice (the
# second run must find every cell published and only re-aggregate). Results land in $OUT
# (at most 8 files come back: the sweep travels as one tarball).
#   bash scripts/device/decode.sh [extra bench args]
set -euo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RUST_BACKTRACE=1
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/device}
CACHE=${CACHE:-/tmp/vnni-cubin-cache}
WORK=${WORK:-/tmp/vnni-work}
mkdir -p "$OUT" "$WORK"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
"$BIN" preflight --cache "$CACHE" --out "$OUT/resources.csv" | tail -1
"$BIN" bench --cache "$CACHE" --shapes 4096x4096,24576x4096 --modes eager --samples 3 --warmups 1 --out "$WORK/smoke" 2>&1 | tail -3
"$BIN" bench --cache "$CACHE" --out "$OUT" "$@" 2>"$OUT/bench.log"
if [ "${SWEEP:-1}" = 1 ]; then
  "$BIN" sweep --cache "$CACHE" --out "$WORK/sweep" 2>"$WORK/sweep.log"
  "$BIN" sweep --cache "$CACHE" --out "$WORK/sweep" 2>>"$WORK/sweep.log"
  tar -C "$WORK" -czf "$OUT/sweep.tar.gz" sweep sweep.log
fi
