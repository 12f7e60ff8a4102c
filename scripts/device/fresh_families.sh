#!/usr/bin/env bash
# One device call: time every decode candidate (M = 1, graph) on projection and vocabulary
# shapes of model families in no inventory of this repository, twice (two independent bench
# runs: the second is the noise floor of scoring a pick measured in one run in the other).
#   BIN=... bash scripts/device/fresh_families.sh SHAPES
set -euo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/device}
CACHE=${CACHE:-/tmp/vnni-cubin-cache}
WORK=${WORK:-/tmp/vnni-work}
SHAPES=$1
mkdir -p "$OUT" "$WORK"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$WORK/gpu.txt"
for run in 1 2; do
  start=$(date +%s)
  "$BIN" bench --cache "$CACHE" --shapes "$SHAPES" --modes graph --grouped-m '' --prefill-m '' \
    --grouped-shapes '' --prefill-shapes '' --out "$WORK/run$run" 2>"$WORK/run$run.log" >"$WORK/run$run.txt"
  echo "run $run: $(( $(date +%s) - start )) s"
done
tar -C "$WORK" -czf "$OUT/fresh-families.tar.gz" gpu.txt run1 run2 run1.log run2.log
ls -la "$OUT"
