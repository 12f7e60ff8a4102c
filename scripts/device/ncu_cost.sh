#!/usr/bin/env bash
# What profiler evidence costs, by ncu configuration (issue 22): the CUDA family-smoke sweep
# (or CORPUS), then the same requests (`profile --top TOP`, one chunk) profiled once per entry of
# VARIANTS (see ncu-variant.sh; `label=m1,m2` profiles those metrics and ncu's pass count).
# Prints seconds per variant last.
#   $OUT/ncu-cost.tar.gz   every variant's output and ncu file, the table
set -euo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/device}
CACHE=${CACHE:-/tmp/vnni-cubin-cache}
WORK=${WORK:-/tmp/vnni-ncu-cost}
TOP=${TOP:-1}
VARIANTS=${VARIANTS:-"bare base nosass launch cachenone app"}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$OUT" "$WORK"
. "$HERE/steps.sh"
if [ -z "${CORPUS:-}" ]; then
  run sweep "$BIN" sweep --backend cuda --profile family-smoke --cache "$CACHE" --out "$WORK/sweep"
  CORPUS=$WORK/sweep/corpus
fi
pack() { tar -C "$WORK" -czf "$OUT/ncu-cost.tar.gz.part" --exclude=sweep . && mv "$OUT/ncu-cost.tar.gz.part" "$OUT/ncu-cost.tar.gz"; }
for entry in $VARIANTS; do
  v=${entry%%=*}
  if [ "$v" != "$entry" ]; then export NCU_VARIANT=metrics NCU_METRICS=${entry#*=}; else export NCU_VARIANT=$v; fi
  run "ncu-$v" timeout "${LIMIT:-200}" "$BIN" profile --corpus "$CORPUS" --out "$WORK/ev-$v" \
    --top "$TOP" --chunk 100000 --cache "$CACHE" --ncu "$HERE/ncu-variant.sh"
  pack
done
echo; cat "$WORK/table.txt"
