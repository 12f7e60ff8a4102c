#!/usr/bin/env bash
# One device call for issue 24: `bench --dense-m` over the target shapes (a 70B FFN and an
# LM head) and codebooks, every M of the dense grid (1..64, multiples of 16 to 512, powers of
# two to 4096), the fastest batched candidate at the inherited bpp beside the pick of
# $POLICY. The bench rewrites its files after every (shape, codebook), so a run cut short by
# $LIMIT keeps what it measured. First, batch-invariance certificates at M values that are not
# multiples of a tile's rows (grouped and prefill); with AB_BIN=<another build>, a short A/B
# (both builds' dense grids up to $AB_MAX_M on $AB_SHAPES, same machine). Prints the dense-M
# summary table last.
#   BIN=target/device-bin/vnni-dispatch POLICY=target/device-bin/policy.json bash scripts/device/dense_m.sh
#   $OUT/dense-m.tar.gz   dense-m.csv, dense-rows.csv.zst, samples.csv.zst, report/, logs
set -euo pipefail
WORK=${WORK:-/tmp/vnni-dense-m}
SHAPES=${SHAPES:-28672x8192,151936x4096}
CODEBOOKS=${CODEBOOKS:-s4,u4,s6d,s8}
MODES=${MODES:-graph}
MAX_M=${MAX_M:-4096}
LIMIT=${LIMIT:-520}
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
run certify-grouped "$BIN" certify --backend cuda --cache "$CACHE" --shapes 4096x4096,1000x2304 --m 3,9,17,23 \
  --m1 decode.wide.tn128.cpt2,decode.kpar.tn128.cpt1.waves2 --out "$WORK/certificates-grouped.jsonl"
run certify-prefill "$BIN" certify --backend cuda --surface prefill --cache "$CACHE" --m 33,100 \
  --m1 decode.wide.tn128.cpt2,decode.kpar.tn128.cpt1.waves2 --out "$WORK/certificates-prefill.jsonl"
if [ -n "${AB_BIN:-}" ]; then
  for side in before after; do
    bin=$BIN; if [ "$side" = before ]; then bin=$AB_BIN; fi
    run "ab-$side" "$bin" bench --dense-m --dense-m-max "${AB_MAX_M:-64}" --cache "$CACHE-$side" \
      --shapes "${AB_SHAPES:-28672x8192}" --codebooks "${AB_CODEBOOKS:-s4,u4}" --modes graph --samples 8 --warmups 2 \
      --out "$WORK/ab-$side"
  done
fi
policy=()
if [ -n "${POLICY:-}" ]; then policy=(--policy "$POLICY"); fi
run dense timeout "$LIMIT" "$BIN" bench --dense-m --dense-m-max "$MAX_M" "${policy[@]}" --cache "$CACHE" \
  --shapes "$SHAPES" --codebooks "$CODEBOOKS" --modes "$MODES" --samples 8 --warmups 2 --out "$WORK/dense"
tar -C "$WORK" -czf "$OUT/dense-m.tar.gz" .
if [ -n "${AB_BIN:-}" ]; then
  echo; python3 - "$WORK/ab-before/dense-m.csv" "$WORK/ab-after/dense-m.csv" <<'PY'
import csv, sys
def best(path):
    return {(r["source_format"], r["n"], r["k"], int(r["m"])): r for r in csv.DictReader(open(path))}
a, b = best(sys.argv[1]), best(sys.argv[2])
print("format shape M: fastest us before -> after (after/before), after's candidate")
for key in sorted(a):
    if key in b and key[3] in (1, 2, 8, 9, 15, 16, 17, 20, 24, 25, 31, 32, 33, 40, 48, 49, 56, 63, 64):
        x, y = float(a[key]["best_us"]), float(b[key]["best_us"])
        print(f"{key[0]} {key[1]}x{key[2]} M={key[3]}: {x:.1f} -> {y:.1f} ({y / x:.3f}) {b[key]['best']}")
PY
fi
echo; grep -h "dense M\|MISMATCH" "$WORK/dense.err" || true
echo; grep -h "mismatch\|certif" "$WORK"/certify-*.out | tail -4 || true
echo; sed -n '/^| mode /,$p' "$WORK/dense.out" || true
echo; cat "$WORK/table.txt"
