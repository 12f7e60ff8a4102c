#!/usr/bin/env bash
# One device call for issue 16's ragged-grid experiment: fresh family set 14 timed first (every
# decode candidate, M = 1, graph, the codebooks of the committed tables; RUNS runs, default two),
# then the `core-ragged` M = 1 corpus collected with what is left of BUDGET, pruned by the
# committed policy of this card (H200: target/prune/h200.json, otherwise h100.json: copies of
# core-m1-corrected and core-m1-h100-corrected, carried, since lfs-data/ stays home). The
# corpus resumes from target/device-work/ in the next call, like scripts/device/corpus.sh;
# set 14 is skipped when SKIP_SET=1 (already timed).
#   carry: target/device-bin target/prune target/fresh (and target/device-work when resuming);
#   docs/ stays home with `slim.sh on`, so set 14's shapes travel as target/fresh/set14.txt
#   (`cp docs/perf/holdout-families-14/shapes.txt target/fresh/set14.txt`)
#   BUDGET (seconds, default 540) BIN (target/device-bin/vnni-dispatch); SEED_CACHE=target/cubin-cache
#   (carried too) spares both steps the kernel compile
#   out: $OUT/f/fresh-families.tar.gz, $OUT/work.tar.gz.part-*, $OUT/fresh.log, $OUT/corpus.log
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BIN=${BIN:-target/device-bin/vnni-dispatch}
OUT=${OUT:-target/device}
start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$gpu"
case "$gpu" in *H200*) policy=target/prune/h200.json ;; *) policy=target/prune/h100.json ;; esac
[ -f "$policy" ] || { echo "no pruning policy $policy: copy it under target/prune and carry it" >&2; exit 2; }
mkdir -p "$OUT/f"
if [ "${SKIP_SET:-0}" != 1 ]; then
  OUT=$OUT/f BIN=$BIN CODEBOOKS=s4,nl4,u4,s5,u5,s6d,s8 RUNS=${RUNS:-1 2} WORK=/tmp/vnni-set14 \
    bash scripts/device/fresh_families.sh "$(cat docs/perf/holdout-families-14/shapes.txt 2>/dev/null || cat target/fresh/set14.txt)" \
    >"$OUT/fresh.log" 2>&1
  echo "set 14: rc $? after $(( $(date +%s) - start )) s"
  tail -3 "$OUT/fresh.log"
fi
left=$(( ${BUDGET:-540} - ($(date +%s) - start) ))
if [ "$left" -gt 60 ]; then
  echo "core-ragged for $left s, pruned by $policy"
  PROFILE=core-ragged BUDGET=$left PRUNE_WITH=$policy BIN=$BIN OUT=$OUT bash scripts/device/corpus.sh >"$OUT/corpus.log" 2>&1
  echo "corpus: rc $? after $(( $(date +%s) - start )) s"
  tail -4 "$OUT/corpus.log"
fi
ls -la "$OUT" "$OUT/f"
