#!/usr/bin/env bash
# One device call for the grouped surface (issue 18): on-device preflight, grouped
# certificates of every grouped candidate (M = 2, 5, 16, 31; zero mismatches expected), the
# bench of M = 1 and the grouped rows (M = 2..31 at the best M = 1 candidate's bpp, graph) on
# the issue's shapes, and llama.cpp's matmul on the same shapes in the same call (its build
# runs in the background while ours times; its own timing runs after ours). Prints a short
# table last: per shape, codebook and M, the best grouped time before generation 3's IMMA
# tiles (rows / mma16), the best IMMA tile, and time(M) / time(M = 1).
#   BIN=target/device-bin/vnni-dispatch PEERS=target/peers/ggml-d99724f-cuda.tar.gz \
#     bash scripts/device/grouped.sh
#   $OUT/grouped.tar.gz   bench CSVs, certificates, resources, peer timings, logs
set -euo pipefail
WORK=${WORK:-/tmp/vnni-grouped}
SHAPES=${SHAPES:-151936x4096,248320x5120,28672x8192,4096x14336}
MS=${MS:-2,4,8,16,31}
CODEBOOKS=${CODEBOOKS:-s4,nl4,u4,s5,u5,s6d,s8}
# llama.cpp's type names for our codebooks' first source formats.
PEER_CASES=${PEER_CASES:-"q4_0,q4_K,q8_0,q6_K,iq4_nl:151936x4096:1,8,16;q4_0,q4_K,q8_0:248320x5120:1,8,16;q4_0,q4_K,q8_0,q6_K:28672x8192:1,8,16;q4_0,q4_K,q8_0:4096x14336:1,8,16"}
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
PEER_SH=$(dirname "${BASH_SOURCE[0]}")/../../target/peers/ggml-perf.sh
if [ -n "${PEERS:-}" ]; then  # build while ours runs (low priority: ours times in graph mode)
  (nice -n 19 bash "$PEER_SH" "$PEERS" 'q4_0:4096x4096:1' /dev/null >"$WORK/peer-build.log" 2>&1 || true) &
  BUILD_PID=$!
fi
run preflight "$BIN" preflight --cache "$CACHE" --out "$WORK/resources.csv"
run certify "$BIN" certify --backend cuda --cache "$CACHE" --shapes 4096x4096,1536x8960,1000x2304 --m 2,5,16,31 \
  --out "$WORK/certificates-grouped.jsonl"
run bench "$BIN" bench --cache "$CACHE" --shapes "$SHAPES" --grouped-shapes "$SHAPES" --grouped-m "$MS" \
  --prefill-shapes '' --prefill-m '' --codebooks "$CODEBOOKS" --modes graph --samples 12 --warmups 2 --out "$WORK/bench"
if [ -n "${PEERS:-}" ]; then
  wait "$BUILD_PID" || true
  run peers bash "$PEER_SH" "$PEERS" "$PEER_CASES" "$WORK/peers.txt"
fi
tar -C "$WORK" -czf "$OUT/grouped.tar.gz" --exclude='*.timing.csv.zst' .
echo
python3 - "$WORK/bench/decode.csv" <<'EOF'
import csv, sys, collections
best = collections.defaultdict(dict)  # (n, k, cb, m) -> {kind: (us, cand)}
for r in csv.DictReader(open(sys.argv[1])):
    if r["codebook"] == "-" or r["eligible"] != "true" or r["mode"] != "graph":
        continue
    m = int(r["m"])
    kind = "m1" if m == 1 else ("imma" if r["candidate"].startswith("grouped.imma") else "old")
    key = (int(r["n"]), int(r["k"]), r["codebook"], m)
    us = float(r["median_us"])
    if kind not in best[key] or us < best[key][kind][0]:
        best[key][kind] = (us, r["candidate"])
print(f"{'shape':<13} {'cb':<4} {'M':>3} {'M=1 us':>8} {'old us':>8} {'imma us':>8} {'old/imma':>8} {'xM=1':>6}  imma tile")
for (n, k, cb, m), v in sorted(best.items()):
    if m == 1:
        continue
    m1 = best.get((n, k, cb, 1), {}).get("m1", (float("nan"), ""))[0]
    old = v.get("old", (float("nan"), ""))[0]
    imma, tile = v.get("imma", (float("nan"), "-"))
    fastest = min(old, imma)
    print(f"{n}x{k:<6} {cb:<4} {m:>3} {m1:8.1f} {old:8.1f} {imma:8.1f} {old / imma:8.2f} {fastest / m1:6.2f}  {tile}")
EOF
echo; [ -f "$WORK/peers.txt" ] && cat "$WORK/peers.txt"
echo; grep -h "mismatch" "$WORK/certify.out" | tail -3 || true
echo; cat "$WORK/table.txt"
