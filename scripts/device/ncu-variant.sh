#!/usr/bin/env bash
# Stands in for `ncu` under `vnni-dispatch profile --ncu` to measure what the profiler costs
# (ncu_cost.sh): NCU_VARIANT picks how the worker runs.
#   base       ncu exactly as `profile` asks (one process per pass: hardware, then SASS)
#   merged     every metric in one ncu process, as before the pass split: the hardware pass
#              collects NCU_ALL (the union) and the SASS pass reuses its file without running
#   (with one process per pass, nosass leaves the SASS pass launch statistics only, and bare
#   and launch stop after the first pass: compare them with the table of the merged days)
#   nosass     without the SASS-patched metrics (smsp__sass_*)
#   launch     one launch statistic only (ncu's fixed cost per record)
#   cachenone  base with --cache-control none
#   app        base with --replay-mode application (the worker runs once per pass)
#   bare       no ncu: the worker alone (its own cost; writes no ncu file)
#   metrics    NCU_METRICS instead of the metrics asked for (and ncu's replay pass count), in
#              the first pass's process (`profile` stops there unless they hold its metrics)
set -euo pipefail
NCU=${NCU:-ncu}
args=("$@")
metrics_at=-1 exe_at=-1
for i in "${!args[@]}"; do
  [ "${args[$i]}" = --metrics ] && metrics_at=$((i + 1))
  [ "${args[$i]}" = --log-file ] && exe_at=$((i + 2))
done
if [ "$metrics_at" -lt 0 ] || [ "$exe_at" -lt 0 ]; then
  echo "ncu-variant.sh: expected --metrics and --log-file among: $*" >&2; exit 2
fi
case ${NCU_VARIANT:-base} in
  base) ;;
  merged)
    log=${args[$((exe_at - 1))]}
    case $log in
      *.sass.csv.inprogress) cp "${log%.sass.csv.inprogress}.hw.csv" "$log"; exit 0 ;;
      *) args[$metrics_at]=${NCU_ALL:?merged needs NCU_ALL, every metric} ;;
    esac ;;
  nosass) args[$metrics_at]=$(tr , '\n' <<<"${args[$metrics_at]}" | grep -v '^smsp__sass_' | paste -sd,) ;;
  launch) args[$metrics_at]=launch__registers_per_thread ;;
  metrics) args[$metrics_at]=$NCU_METRICS,profiler__replayer_passes ;;
  cachenone) args=(--cache-control none "${args[@]}") ;;
  app) args=(--replay-mode application "${args[@]}") ;;
  bare) exec "${args[@]:$exe_at}" ;;
  *) echo "ncu-variant.sh: unknown NCU_VARIANT ${NCU_VARIANT}" >&2; exit 2 ;;
esac
exec "$NCU" "${args[@]}"
