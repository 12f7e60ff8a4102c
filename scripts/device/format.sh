#!/usr/bin/env bash
# One device call for newly added weight formats (issue 21): on-device preflight, grouped and
# prefill certificates of the format (zero mismatches expected), the bench of M = 1 (against
# the copy roofline) and grouped rows on the issue's shapes for the format's codebook beside a
# reference codebook, and llama.cpp's matmul of both formats in the same call (its build runs
# in the background while ours times; its timing runs after ours). REFRESH=1 adds the CUDA
# refresh of the family-smoke profile (every format, the new one included: sweep, staged fit,
# certificates, tables; a proxy verdict). FORMAT, CODEBOOK and PEER_TYPE may list several
# formats (comma-separated, in the same order); the peers run once per shape, each under its
# own time limit (llama.cpp quantizes the weights of the iq* types slowly on the host, so each
# iq* type runs alone; PEER_DEADLINE, seconds from the call's start, skips runs past it).
# RAGGED=1 adds the grouped certificates at the ragged N = 1000 x 2304 that every codebook
# needs; BENCH=0 skips the bench; SEED_CACHE names a carried cubin cache (`preflight --static
# --cache DIR` here, NVRTC 13.0.88 like the GPU machine's) copied in before the preflight, so the
# call spends no time compiling. Every step packs what ran so far into $OUT/format.tar.gz.
# Prints a short table last.
#   BIN=target/device-bin/vnni-dispatch PEERS=target/peers/ggml-d99724f-cuda.tar.gz \
#     FORMAT=MXFP4 CODEBOOK=e2m1 PEER_TYPE=mxfp4 bash scripts/device/format.sh
#   FORMAT=IQ3_XXS,IQ3_S CODEBOOK=nl3,o4 PEER_TYPE=iq3_xxs,iq3_s ... (two formats in one call)
#   $OUT/format.tar.gz   bench CSVs, certificates, resources, peer timings, logs
set -euo pipefail
WORK=${WORK:-/tmp/vnni-format}
FORMAT=${FORMAT:-MXFP4}
CODEBOOK=${CODEBOOK:-e2m1}
PEER_TYPE=${PEER_TYPE:-mxfp4}
# A 4-bit codebook we already ship and llama.cpp's type for its first source format.
REFERENCE=${REFERENCE:-s4}
REFERENCE_TYPE=${REFERENCE_TYPE:-q4_0}
SHAPES=${SHAPES:-151936x4096,248320x5120}
MS=${MS:-2,4,8,16,31}
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
# What ran comes back even when a step fails or the call is stopped (after every step too).
SNAPSHOT="$OUT/format.tar.gz"
trap 'tar -C "$WORK" -czf "$OUT/format.tar.gz" --exclude="*.timing.csv.zst" . 2>/dev/null || true' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/seed_cache.sh"
PEER_SH=$(dirname "${BASH_SOURCE[0]}")/../../target/peers/ggml-perf.sh
if [ -n "${PEERS:-}" ]; then  # build while ours runs (low priority: ours times in graph mode)
  (nice -n 19 bash "$PEER_SH" "$PEERS" 'q4_0:4096x4096:1' /dev/null >"$WORK/peer-build.log" 2>&1 || true) &
  BUILD_PID=$!
fi
run preflight "$BIN" preflight --cache "$CACHE" --out "$WORK/resources.csv"
run certify-grouped "$BIN" certify --backend cuda --cache "$CACHE" --formats "$FORMAT" \
  --out "$WORK/certificates-grouped.jsonl"
if [ "${RAGGED:-0}" = 1 ]; then
  run certify-ragged "$BIN" certify --backend cuda --cache "$CACHE" --formats "$FORMAT" --shapes 1000x2304 \
    --out "$WORK/certificates-ragged.jsonl"
fi
run certify-prefill "$BIN" certify --backend cuda --surface prefill --cache "$CACHE" --formats "$FORMAT" \
  --out "$WORK/certificates-prefill.jsonl"
if [ "${BENCH:-1}" = 1 ]; then
  run bench "$BIN" bench --cache "$CACHE" --shapes "$SHAPES" --grouped-shapes "$SHAPES" --grouped-m "$MS" \
  --prefill-shapes '' --prefill-m '' --codebooks "$CODEBOOK,$REFERENCE" --modes graph --samples 12 --warmups 2 \
  --out "$WORK/bench"
fi
if [ "${REFRESH:-0}" = 1 ]; then
  run refresh "$BIN" refresh --backend cuda --profile family-smoke --cache "$CACHE" --out "$WORK/refresh" --random 100000
fi
if [ -n "${PEERS:-}" ]; then
  wait "$BUILD_PID" || true
  echo "type n k m us" >"$WORK/peers.txt"
  # The k- and legacy types quantize fast and share one run per shape; each iq* type gets its
  # own run (ggml quantizes those slowly on the host), so one slow type loses only itself.
  # PEER_DEADLINE (seconds since the call began) skips the runs that would start after it.
  fast=$REFERENCE_TYPE slow=()
  for t in ${PEER_TYPE//,/ }; do case "$t" in iq*) slow+=("$t") ;; *) fast+=",$t" ;; esac; done
  # Every shape's fast run first, then the slow types shape by shape (a slow type may not finish).
  runs=()
  for s in ${SHAPES//,/ }; do runs+=("$s $fast"); done
  for t in "${slow[@]}"; do for s in ${SHAPES//,/ }; do runs+=("$s $t"); done; done
  for r in "${runs[@]}"; do
    s=${r% *} types=${r#* }
    left=$(( ${PEER_DEADLINE:-100000} - SECONDS ))
    [ "$left" -gt 20 ] || { status "peers-$s-$types" "skipped: PEER_DEADLINE"; continue; }
    limit=$(( left < ${PEER_LIMIT:-240} ? left : ${PEER_LIMIT:-240} ))
    run "peers-$s-${types//,/-}" timeout "$limit" bash "$PEER_SH" "$PEERS" "$types:$s:1,8" "$WORK/peers-$s-${types//,/-}.txt"
    [ -f "$WORK/peers-$s-${types//,/-}.txt" ] && tail -n +2 "$WORK/peers-$s-${types//,/-}.txt" >>"$WORK/peers.txt"
  done
fi
echo
[ -f "$WORK/bench/decode.csv" ] && python3 - "$WORK/bench/decode.csv" "$WORK/peers.txt" "$CODEBOOK,$REFERENCE" "$PEER_TYPE,$REFERENCE_TYPE" <<'EOF'
import csv, os, sys
best = {}  # (n, k, codebook, m) -> (us, pct_copy, candidate)
for r in csv.DictReader(open(sys.argv[1])):
    if r["codebook"] == "-" or r["eligible"] != "true" or r["mode"] != "graph":
        continue
    key = (int(r["n"]), int(r["k"]), r["codebook"], int(r["m"]))
    us = float(r["median_us"])
    if key not in best or us < best[key][0]:
        best[key] = (us, float(r["pct_copy_bw"]), r["candidate"])
peer = {}
if os.path.exists(sys.argv[2]):
    for r in csv.DictReader(open(sys.argv[2]), delimiter=" "):
        peer[(r["type"], int(r["n"]), int(r["k"]), int(r["m"]))] = float(r["us"])
pairs = list(zip(sys.argv[3].split(","), sys.argv[4].split(",")))
print(f"{'shape':<13} {'codebook':<9} {'M':>3} {'ours us':>9} {'% copy':>7} {'llama.cpp us':>12} {'speedup':>8}  candidate")
for (n, k, cb, m), (us, pct, cand) in sorted(best.items()):
    ptype = dict(pairs).get(cb)
    p = peer.get((ptype, n, k, m), float("nan"))
    print(f"{n}x{k:<6} {cb:<9} {m:>3} {us:9.1f} {pct if m == 1 else float('nan'):7.1f} {p:12.1f} {p / us:8.2f}  {cand}")
EOF
echo; grep -h "mismatch" "$WORK"/certify-*.out | tail -4 || true
[ -f "$WORK/refresh.out" ] && { echo; tail -6 "$WORK/refresh.out"; }
echo; cat "$WORK/table.txt"
