#!/usr/bin/env bash
# What profiler evidence costs, by ncu configuration (issue 22): the CUDA family-smoke sweep
# (or CORPUS), then the same requests (`profile --top TOP`, one chunk) profiled once per entry of
# VARIANTS (see ncu-variant.sh; `label=m1,m2` profiles those metrics and ncu's pass count).
# Prints seconds per variant last.
#   $OUT/ncu-cost.tar.gz   every variant's output and ncu file, the table
set -euo pipefail
WORK=${WORK:-/tmp/vnni-ncu-cost}
TOP=${TOP:-1}
# PRESET=groups: which metric groups stay in one replay pass together (one pass costs ncu
# 24-47 ms a record, two or more 150-200 ms: docs/PERF.md); the candidates for splitting a
# chunk into one single-pass ncu process per group.
O=sm__warps_active.avg.pct_of_peak_sustained_active D=dram__bytes.sum.pct_of_peak_sustained_elapsed
L=lts__t_sectors.sum.pct_of_peak_sustained_elapsed G=l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
I=sm__inst_executed_pipe_tensor_op_imma.sum T=gpu__time_duration.sum
S=smsp__sass_inst_executed_op_global_ld.sum,smsp__sass_inst_executed_op_ldgsts.sum,smsp__sass_data_bytes_mem_global_op_ld.sum,smsp__sass_data_bytes_mem_global_op_ldgsts.sum,smsp__sass_l1tex_t_sectors_pipe_lsu_mem_global_op_ldgsts.sum,smsp__sass_inst_executed_op_local_ld.sum,smsp__sass_inst_executed_op_local_st.sum
SG=smsp__sass_l1tex_t_sectors_pipe_lsu_mem_global_op_ld.sum  # what the evidence now counts instead of G
export NCU_ALL=launch__registers_per_thread,launch__shared_mem_per_block_static,launch__shared_mem_per_block_dynamic,$O,$D,$L,$I,$T,$S,$SG
# PRESET=split: every metric in one process (before the split) against one process per pass,
# and what the hardware pass's counters cost apart (sg: the L1 sectors of LDG from the SASS pass).
case ${PRESET:-} in
  split) VARIANTS=${VARIANTS:-"merged base oit=$O,$I,$T dl=$D,$L g=$G sg=$SG launch"} ;;
  groups) VARIANTS=${VARIANTS:-"sass=$S hw=$O,$D,$L,$G,$I,$T odlt=$O,$D,$L,$T gi=$G,$I oit=$O,$I,$T dlg=$D,$L,$G dl=$D,$L og=$O,$G"} ;;
esac
VARIANTS=${VARIANTS:-"bare base nosass launch cachenone app"}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/steps.sh"
if [ -z "${CORPUS:-}" ]; then
  run sweep "$BIN" sweep --backend cuda --profile family-smoke --cache "$CACHE" --out "$WORK/sweep"
  CORPUS=$WORK/sweep/corpus
fi
[ -f "$CORPUS/plan.json" ] || { cat "$WORK/table.txt"; echo "no corpus at $CORPUS" >&2; exit 1; }
pack() { tar -C "$WORK" -czf "$OUT/ncu-cost.tar.gz.part" --exclude=sweep . && mv "$OUT/ncu-cost.tar.gz.part" "$OUT/ncu-cost.tar.gz"; }
for entry in $VARIANTS; do
  v=${entry%%=*}
  if [ "$v" != "$entry" ]; then export NCU_VARIANT=metrics NCU_METRICS=${entry#*=}; else export NCU_VARIANT=$v; fi
  rm -rf "$WORK/ev-$v" # a finished chunk found again would take no time
  run "ncu-$v" timeout "${LIMIT:-200}" "$BIN" profile --corpus "$CORPUS" --out "$WORK/ev-$v" \
    --top "$TOP" --chunk 100000 --cache "$CACHE" --ncu "$HERE/ncu-variant.sh"
  pack
done
echo; cat "$WORK/table.txt"
