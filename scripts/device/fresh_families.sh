#!/usr/bin/env bash
# One device call: time every decode candidate (M = 1, graph) on projection and vocabulary
# shapes of model families in no inventory of this repository, twice (two independent bench
# runs: the second is the noise floor of scoring a pick measured in one run in the other).
#   BIN=... bash scripts/device/fresh_families.sh SHAPES
# CODEBOOKS=s4,nl4,... limits the codebooks (default: every one), so a set timed before a
# codebook existed can be timed again as it was; GPU=H200 refuses (exit 3, nothing timed) a
# machine whose name does not contain it, before any kernel is built; RUNS="1" times one run
# only (no noise floor, and scripts/perf/absorb_bench.py cannot use the set), when device time
# is short. SEED_CACHE: a carried cubin cache (scripts/device/seed_cache.sh).
set -euo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/device}
CACHE=${CACHE:-/tmp/vnni-cubin-cache}
WORK=${WORK:-/tmp/vnni-work}
SHAPES=$1
mkdir -p "$OUT" "$WORK"
. "$(dirname "${BASH_SOURCE[0]}")/seed_cache.sh"
# A machine still warm from an earlier call keeps its runs: never pack those as this set's.
rm -rf "$WORK"/run[0-9] "$WORK"/run[0-9].log "$WORK"/run[0-9].txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$WORK/gpu.txt"
if [ -n "${GPU:-}" ] && ! grep -q "$GPU" "$WORK/gpu.txt"; then
  echo "not a $GPU: nothing timed" >&2
  exit 3
fi
for run in ${RUNS:-1 2}; do
  start=$(date +%s)
  "$BIN" bench --cache "$CACHE" --shapes "$SHAPES" --modes graph --grouped-m '' --prefill-m '' \
    --grouped-shapes '' --prefill-shapes '' ${CODEBOOKS:+--codebooks "$CODEBOOKS"} --out "$WORK/run$run" 2>"$WORK/run$run.log" >"$WORK/run$run.txt"
  echo "run $run: $(( $(date +%s) - start )) s"
done
tar -C "$WORK" -czf "$OUT/fresh-families.tar.gz" gpu.txt $(cd "$WORK" && ls -d run[0-9] run[0-9].log)
ls -la "$OUT"
