#!/usr/bin/env bash
# One device call for mid-size decode (issue 23): on-device preflight, a grouped certificate
# (its reference side is the decode kernels), the bench of every decode candidate on the
# 10-60 MB shapes launched plainly, then again with programmatic dependent launch, and one
# Llama-3-8B decoder layer's seven projections timed end to end (plain and programmatic in
# the same rounds, each layer's outputs compared bit for bit between the two). Prints a short
# table last: per shape, codebook and mode the best candidate's % of copy bandwidth both ways,
# then the chain against its bytes at the copy bandwidth. Last, family-smoke's M = 1 stage
# collected with `sweep --programmatic`.
#   BIN=target/device-bin/vnni-dispatch bash scripts/device/chain.sh
#   $OUT/chain.tar.gz   both benches' CSVs, chain.csv, certificates, resources, logs
set -euo pipefail
WORK=${WORK:-/tmp/vnni-chain}
LAYER=${LAYER:-4096x4096,1024x4096,1024x4096,4096x4096,14336x4096,14336x4096,4096x14336}
SHAPES=${SHAPES:-14336x3584,3584x14336,3072x8192,8192x3072,4096x12288,4096x14336,14336x4096,6144x4096,4096x4096,1024x4096}
CODEBOOKS=${CODEBOOKS:-s4,nl4,u4,s5,u5,s6d,s8}
MODES=${MODES:-graph,eager}
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
run preflight "$BIN" preflight --cache "$CACHE" --out "$WORK/resources.csv"
run certify "$BIN" certify --backend cuda --cache "$CACHE" --shapes 4096x4096,1000x2304 --m 2,16 \
  --out "$WORK/certificates-grouped.jsonl"
common=(--cache "$CACHE" --shapes "$SHAPES" --grouped-shapes '' --grouped-m '' --prefill-shapes '' --prefill-m ''
  --codebooks "$CODEBOOKS" --modes "$MODES" --samples 12 --warmups 2)
run plain "$BIN" bench "${common[@]}" --chain "$LAYER" --out "$WORK/plain"
run programmatic "$BIN" bench "${common[@]}" --programmatic --out "$WORK/programmatic"
# The M = 1 stage of family-smoke collected programmatically (the plan records it).
run sweep-programmatic "$BIN" sweep --backend cuda --profile family-smoke --m1-only --programmatic --cache "$CACHE" \
  --out "$WORK/sweep-programmatic"
tar -C "$WORK" -czf "$OUT/chain.tar.gz" --exclude='*.timing.csv.zst' .
echo
python3 - "$WORK/plain/best.csv" "$WORK/programmatic/best.csv" <<'PY'
import csv, sys
def best(path):
    return {(r["mode"], int(r["n"]), int(r["k"]), r["codebook"]): r for r in csv.DictReader(open(path))
            if r["codebook"] != "-" and r["m"] == "1"}
plain, prog = best(sys.argv[1]), best(sys.argv[2])
print(f"{'mode':<6} {'shape':<11} {'cb':<4} {'MB':>5} {'plain us':>8} {'%copy':>6} {'pdl us':>8} {'%copy':>6} {'gain':>6}  pdl candidate")
for key in sorted(plain, key=lambda k: (k[0], -int(plain[k]["weight_bytes"]), k[3])):
    a, b = plain[key], prog.get(key)
    if b is None:
        continue
    mode, n, k, cb = key
    print(f"{mode:<6} {n}x{k:<6} {cb:<4} {int(a['weight_bytes'])/1e6:5.1f} {float(a['median_us']):8.2f} {float(a['pct_copy_bw']):6.1f}"
          f" {float(b['median_us']):8.2f} {float(b['pct_copy_bw']):6.1f} {float(a['median_us'])/float(b['median_us']):6.3f}  {b['candidate']}")
PY
echo; grep -A 40 "^mode   cb     launch" "$WORK/plain.out" || true
echo; grep -h "mismatch" "$WORK/certify.out" | tail -3 || true
echo; cat "$WORK/table.txt"
