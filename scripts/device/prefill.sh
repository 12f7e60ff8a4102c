#!/usr/bin/env bash
# One device call for the prefill (M >= 32) IMMA tiles: GPU facts, on-device preflight of
# every kernel (prefill tiles included), a correctness smoke, the batch-invariance
# certificates of every codebook at M = 32..4096 against M = 1 decode, then the prefill bench
# (24576x4096 and 4096x12288 at M = 512, 2048 beside cuBLAS fp16 and cuBLASLt int8), then the
# h200-prefill sweep (decode M = 1 and prefill cells, sealed). Steps are skipped with SMOKE=0
# / CERTIFY=0 / BENCH=0 / SWEEP=0; extra arguments go to the bench. Results:
#   $OUT/prefill-certificates.jsonl   one certificate per line
#   $OUT/prefill-bench.tar.gz         decode.csv prefill.csv samples.csv resources.csv logs
#   $OUT/prefill-sweep.tar.gz         the sealed h200-prefill corpus and the sweep log
#   bash scripts/device/prefill.sh [extra bench args]
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RUST_BACKTRACE=1
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/device}
CACHE=${CACHE:-/tmp/vnni-cubin-cache}
WORK=${WORK:-/tmp/vnni-prefill}
# One source format per codebook (aliases run the same kernels).
FORMATS=${FORMATS:-Q4_0,IQ4_NL,Q4_1,Q5_0,Q5_1,Q6_K,Q8_0}
mkdir -p "$OUT" "$WORK/bench"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$WORK/bench/gpu.txt"
start=$SECONDS
"$BIN" preflight --cache "$CACHE" --out "$WORK/bench/resources-preflight.csv" > "$WORK/bench/preflight.txt" 2>&1
echo "preflight rc=$? ($((SECONDS - start)) s): $(tail -1 "$WORK/bench/preflight.txt")"
grep prefill "$WORK/bench/preflight.txt" | grep -v " ok$" | head -20
# Archive whatever the steps left (also when one was cut short).
pack() {
  local names=()
  for f in bench smoke.log certify.log; do [ -e "$WORK/$f" ] && names+=("$f"); done
  tar -C "$WORK" -czf "$OUT/prefill-bench.tar.gz" "${names[@]}"
}
if [ "${SMOKE:-1}" = 1 ]; then
  "$BIN" certify --backend cuda --surface prefill --cache "$CACHE" --formats Q4_0,Q4_1,Q5_0,Q6_K,IQ4_NL,Q8_0 \
    --shapes 258x512 --m 32,100 --m1 decode.kpar.tn64.cpt1.kb3 --out "$WORK/smoke.jsonl" > "$WORK/smoke.log" 2>&1
  rc=$?
  grep -v "^ *[0-9]*: \|^ *at " "$WORK/smoke.log" | tail -8
  if [ $rc != 0 ]; then
    pack
    echo "smoke failed (rc=$rc): stopping before the long steps"
    exit 1
  fi
fi
if [ "${CERTIFY:-1}" = 1 ]; then
  start=$SECONDS
  timeout "${CERTIFY_S:-240}" "$BIN" certify --backend cuda --surface prefill --cache "$CACHE" --formats "$FORMATS" \
    --shapes 2048x4096,1002x2304 --m1 decode.wide.tn128.cpt2,decode.kpar.tn128.cpt1.waves2 \
    --out "$OUT/prefill-certificates.jsonl" 2>"$WORK/certify.log" | tail -2
  echo "certify rc=${PIPESTATUS[0]}: $((SECONDS - start)) s"
  grep "certificates in\|MISMATCH" "$WORK/certify.log" | head -20
fi
if [ "${BENCH:-1}" = 1 ]; then
  start=$SECONDS
  timeout "${BENCH_S:-300}" "$BIN" bench --cache "$CACHE" --shapes 24576x4096,4096x12288 --grouped-shapes "" \
    --prefill-shapes 24576x4096,4096x12288 --prefill-m 512,2048 --out "$WORK/bench" "$@" \
    2>"$WORK/bench/bench.log" | tee "$WORK/bench/bench.txt" | tail -40
  echo "bench rc=${PIPESTATUS[0]}: $((SECONDS - start)) s"
  tail -5 "$WORK/bench/bench.log"
fi
pack
if [ "${SWEEP:-1}" = 1 ]; then
  start=$SECONDS
  timeout "${SWEEP_S:-420}" "$BIN" sweep --backend cuda --profile h200-prefill --cache "$CACHE" --out "$WORK/sweep" \
    > "$WORK/sweep.log" 2>&1
  echo "sweep rc=$?: $((SECONDS - start)) s"
  grep -v "^ *[0-9]*: \|^ *at " "$WORK/sweep.log" | tail -6
  if [ -d "$WORK/sweep/corpus" ]; then
    tar -C "$WORK" -czf "$OUT/prefill-sweep.tar.gz" sweep/corpus sweep.log
  else  # cut short: the published cells, to resume from
    tar -C "$WORK" -czf "$OUT/prefill-sweep.tar.gz" sweep sweep.log
  fi
fi
