#!/usr/bin/env bash
# One device call: time again, as explicit pairs, the development cells a fit lists as failing
# cross-validation (`fit --report R` writes R/remeasure.csv), twice per list (two independent
# runs: the second is the pair measurement's own noise floor).
#   BIN=... PASSES=4 SAMPLES=24 bash scripts/device/pairs.sh NAME=remeasure.csv [...]
set -euo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/device}
CACHE=${CACHE:-/tmp/vnni-cubin-cache}
WORK=${WORK:-/tmp/vnni-pairs}
mkdir -p "$OUT" "$WORK"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$WORK/gpu.txt"
for spec in "$@"; do
  name=${spec%%=*}
  file=${spec#*=}
  for run in 1 2; do
    start=$(date +%s)
    "$BIN" bench --cache "$CACHE" --pairs "$file" --modes eager,graph --passes "${PASSES:-4}" \
      --samples "${SAMPLES:-24}" --out "$WORK/$name-run$run" 2>"$WORK/$name-run$run.log" | tail -1
    echo "$name run $run: $(( $(date +%s) - start )) s"
  done
done
tar -C "$WORK" -czf "$OUT/pairs.tar.gz" .
ls -la "$OUT"
