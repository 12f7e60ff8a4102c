#!/usr/bin/env bash
# One device call for the decode (M = 1) and grouped (M = 2..16, 31) work: GPU facts,
# on-device preflight, a quick correctness smoke, the bench (decode + grouped rows), the
# batch-invariance certificates, then the family-smoke sweep run twice (the second run must
# find every cell published). The corpus collection has its own script, corpus.sh. At most 8 files come back from $OUT, so the
# results travel as a few archives:
#   $OUT/bench.tar.gz          decode.csv best.csv grouped.csv samples.csv resources.csv logs
#   $OUT/certificates.jsonl    one certificate per line
#   $OUT/sweep.tar.gz          the sweep directory and its log
#   bash scripts/device/decode.sh [extra bench args]     (BENCH=0 / CERTIFY=0 / SWEEP=0 skip steps)
set -euo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RUST_BACKTRACE=1
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/device}
CACHE=${CACHE:-/tmp/vnni-cubin-cache}
WORK=${WORK:-/tmp/vnni-work}
mkdir -p "$OUT" "$WORK/bench"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$WORK/bench/gpu.txt"
"$BIN" preflight --cache "$CACHE" --out "$WORK/bench/resources-preflight.csv" | tail -1
"$BIN" bench --cache "$CACHE" --shapes 4096x4096,24576x4096 --grouped-shapes 4096x4096 --grouped-m 3,31 --modes eager --samples 3 --warmups 1 --out "$WORK/smoke" 2>&1 | tail -3
if [ "${BENCH:-1}" = 1 ]; then
  "$BIN" bench --cache "$CACHE" --out "$WORK/bench" "$@" 2>"$WORK/bench/bench.log" | tee "$WORK/bench/bench.txt"
  tar -C "$WORK" -czf "$OUT/bench.tar.gz" bench
fi
if [ "${CERTIFY:-1}" = 1 ]; then
  "$BIN" certify --backend cuda --cache "$CACHE" --out "$OUT/certificates.jsonl" 2>"$WORK/certify.log" | tail -2
  tail -12 "$WORK/certify.log"
fi
if [ "${SWEEP:-1}" = 1 ]; then
  "$BIN" sweep --backend cuda --profile family-smoke --cache "$CACHE" --out "$WORK/sweep" 2>"$WORK/sweep.log"
  "$BIN" sweep --backend cuda --profile family-smoke --cache "$CACHE" --out "$WORK/sweep" 2>>"$WORK/sweep.log"
  tar -C "$WORK" -czf "$OUT/sweep.tar.gz" sweep sweep.log
fi
