#!/usr/bin/env bash
# Two (or three) builds' kernels side by side in one device call: the same `bench` run by binary
# A, binary B (and BIN_C) on the same machine, alternated (A B A B ...) so machine drift shows as
# the spread between one binary's rounds; each candidate bit-checked as in every bench. Prints,
# last, the best candidate's median per cell and M of every run and B's (C's) best over A's.
#   env: BIN_A, BIN_B (required), BIN_C, SHAPES (NxK,..), CODEBOOKS (s4), MODES (graph), ROUNDS (1),
#        GROUPED_M / PREFILL_M (batched rows on SHAPES too, e.g. 16,31 / 64,256; none by default),
#        SAMPLES (12), ARGS_A / ARGS_B (more bench arguments for one side, e.g. the same
#        binary twice with ARGS_B='--l2-prefetch programmatic'), NAME (ab)
#   out: $OUT/$NAME.tar.gz (each run's best.csv and log), $OUT/$NAME.txt (the table)
#   BIN_A=target/device-bin-old/vnni-dispatch BIN_B=target/device-bin/vnni-dispatch \
#     SHAPES=2048x768,4096x4096 bash scripts/device/ab.sh
set -euo pipefail
NAME=${NAME:-ab}
WORK=${WORK:-/tmp/vnni-$NAME}
source "$(dirname "$0")/steps.sh"
: "${BIN_A:?BIN_A: the first binary}" "${BIN_B:?BIN_B: the second binary}" "${SHAPES:?SHAPES: NxK,..}"
trap 'tar -C "$WORK" -czf "$OUT/$NAME.tar.gz" . ; cp "$WORK/table.txt" "$OUT/$NAME.txt" 2>/dev/null || true' EXIT
for r in $(seq 1 "${ROUNDS:-1}"); do
  for v in A B ${BIN_C:+C}; do
    bin=BIN_$v extra=ARGS_$v
    # shellcheck disable=SC2086 # ARGS_A / ARGS_B are word lists
    run "bench-$v$r" "${!bin}" bench --backend cuda --cache "$CACHE-$v" --shapes "$SHAPES" \
      --codebooks "${CODEBOOKS:-s4}" --modes "${MODES:-graph}" --samples "${SAMPLES:-12}" \
      --grouped-m "${GROUPED_M:-}" --prefill-m "${PREFILL_M:-}" --grouped-shapes "${GROUPED_M:+$SHAPES}" \
      --prefill-shapes "${PREFILL_M:+$SHAPES}" ${!extra:-} --out "$WORK/$v$r"
  done
done
python3 - "$WORK" >>"$WORK/table.txt" <<'PY'
import csv, glob, os, sys
work = sys.argv[1]
best = {}  # run -> cell -> (us, candidate)
for f in sorted(glob.glob(os.path.join(work, "*", "best.csv"))):
    run = os.path.basename(os.path.dirname(f))
    for r in csv.DictReader(open(f)):
        if r["codebook"] == "-" or r["eligible"] != "true":
            continue
        cell = (r["mode"], r["codebook"], int(r["n"]), int(r["k"]), int(r["m"]))
        us = float(r["median_us"])
        if cell not in best.setdefault(run, {}) or us < best[run][cell][0]:
            best[run][cell] = (us, r["candidate"])
runs = sorted(best)
others = sorted({r[0] for r in runs} - {"A"})  # B, and C when a third binary ran
print("\n| mode | codebook | N x K | M | " + " | ".join(runs) + " | " + " | ".join(f"{v} / A" for v in others) + " |")
print("|---|---|---|---|" + "---|" * (len(runs) + len(others)))
for cell in sorted({c for r in runs for c in best[r]}, key=lambda c: (c[0], c[1], c[2] * c[3], c[4])):
    side = {v: [best[r][cell][0] for r in runs if r.startswith(v) and cell in best[r]] for v in ["A"] + others}
    ratios = " | ".join(f"{min(side[v]) / min(side['A']):.3f}" if side["A"] and side[v] else "-" for v in others)
    cols = " | ".join(f"{best[r][cell][0]:.2f}" if cell in best[r] else "-" for r in runs)
    print(f"| {cell[0]} | {cell[1]} | {cell[2]}x{cell[3]} | {cell[4]} | {cols} | {ratios} |")
PY
cat "$WORK/table.txt"
