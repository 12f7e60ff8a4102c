#!/usr/bin/env bash
# One device call: what sampling windows of the weight-copy rotation change (issue 17, items 1
# and 3), against the older protocol whose every sample replayed whole rotations.
# 1. Bias: `bench` on the same shapes three times (windows, whole rotations, windows again: the
#    two window runs give the run-to-run noise the bias is compared with).
# 2. Throughput: `sweep` one shard of a profile with whole rotations, then with windows, each
#    under a time limit; every published cell records how long it took (cells.csv).
# Everything lands in $OUT/throughput.tar.gz; scripts/perf/rotation.py makes the tables.
#   BIN=... [BENCH=1] [SWEEP=1] [SWEEPS="whole window"] [SHAPES=...] [CODEBOOKS=s4,u4,s8] [PROFILE=core] [SHARD=0/40] [LIMIT=120] \
#     bash scripts/device/throughput.sh
set -euo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/device}
CACHE=${CACHE:-/tmp/vnni-cubin-cache}
WORK=${WORK:-/tmp/vnni-throughput}
SHAPES=${SHAPES:-256x1536,1024x4096,2048x2048,4096x4096,14336x4096,24576x4096,151936x4096}
CODEBOOKS=${CODEBOOKS:-s4,u4,s8}
GROUPED=${GROUPED:-256x1536,4096x4096}
PROFILE=${PROFILE:-core}
SHARD=${SHARD:-0/40}
LIMIT=${LIMIT:-120}
mkdir -p "$OUT" "$WORK"
pack() { tar -C "$WORK" --exclude='*.samples.csv*' -czf "$OUT/throughput.tar.gz" . || true; }
trap pack EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$WORK/gpu.txt"
bench() { # name, extra flags
  local start; start=$(date +%s)
  "$BIN" bench --cache "$CACHE" --shapes "$SHAPES" --codebooks "$CODEBOOKS" --modes graph,eager \
    --grouped-shapes "$GROUPED" --grouped-m 8 --prefill-shapes '' --prefill-m '' \
    --out "$WORK/bench-$1" "${@:2}" 2>"$WORK/bench-$1.log" >"$WORK/bench-$1.txt" || echo "bench $1 failed"
  echo "bench $1: $(( $(date +%s) - start )) s" | tee -a "$WORK/summary.txt"
  grep -E '^[a-z0-9]+ [0-9]+x[0-9]+: ' "$WORK/bench-$1.log" | tee -a "$WORK/summary.txt" || true
}
if [ "${BENCH:-1}" = 1 ]; then
  bench window-a
  bench whole --whole-rotations
  bench window-b
fi
sweep() { # name, extra flags
  local start rc=0; start=$(date +%s)
  timeout "$LIMIT" "$BIN" sweep --backend cuda --cache "$CACHE" --profile "$PROFILE" --shard "$SHARD" \
    --out "$WORK/sweep-$1" "${@:2}" >"$WORK/sweep-$1.log" 2>&1 || rc=$?
  echo "sweep $1 ($PROFILE, shard $SHARD): rc $rc, $(( $(date +%s) - start )) s, $(grep -c '^cell .* rows' "$WORK/sweep-$1.log" || true) cells" \
    | tee -a "$WORK/summary.txt"
}
if [ "${SWEEP:-1}" = 1 ]; then
  for s in ${SWEEPS:-whole window}; do
    if [ "$s" = whole ]; then sweep whole --whole-rotations; else sweep "$s"; fi
  done
fi
echo "---"; cat "$WORK/summary.txt"
