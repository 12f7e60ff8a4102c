#!/usr/bin/env bash
# One device call of a resumable H200 corpus collection. The sweep runs under a time budget
# and is killed (SIGKILL) when it runs out; published cells survive, and the next call resumes
# from the work archive carried back in. At most 8 files of 16 MiB come back from $OUT, so
# the work directory travels as 15 MiB archive parts.
#   in:  target/device-work/work.tar.gz.part-* (optional, from the previous call)
#   out: $OUT/work.tar.gz.part-*, $OUT/run.log (the caller redirects), $OUT/gpu.txt
#   env: PROFILE (core), BUDGET seconds for the sweep (480), SEED_CACHE (a carried cubin
#        cache, scripts/device/seed_cache.sh), WORKERS=1 also runs two worker
#        processes on this one GPU over the family-smoke profile (the --devices path);
#        M1_POLICY and M1_CORPUS (both or neither): the second stage of a staged refresh, the
#        batched rows timed at that frozen policy's M = 1 picks (decode rows copied from
#        M1_CORPUS, the sealed corpus the policy was fitted on); STAGED=1: both stages in one
#        resumable run under the one BUDGET: the M = 1 rows into $WORK/$PROFILE-m1, fitted
#        (scratch ledger) into $WORK/$PROFILE-m1/policy.json, then the batched rows at its
#        picks into $WORK/$PROFILE; M1_ONLY=1: the M = 1 stage alone (sweep --m1-only) into
#        $WORK/$PROFILE-m1; DEVICES=0,1,2,3: one worker process per GPU (a machine of several);
#        EVIDENCE_TOP=K: once the corpus is sealed, `profile --top K` (issue 22) into its work
#        directory's evidence/ within the same BUDGET, on DEVICES, resumed by file next call;
#        M_BUCKETS_FROM=A/dense-m.csv,..: the batched rows at the grouped M buckets learned from
#        those dense-M benches of this kind of machine (issue 24; e.g. docs/perf/dense-m-h200's
#        dense-m.csv and dense-rows.csv.zst copied to target/device-in/dense-m/ and carried),
#        not at the profile's grouped M; PRUNE_WITH=P: the M = 1 rows pruned by policy P's cost
#        models (issue 17: `sweep --prune-with`, its audit in the corpus's pruning.csv; the policy
#        copied under target/ and carried, since lfs-data/ stays home).
set -euo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/device}
PROFILE=${PROFILE:-core}
CACHE=${CACHE:-/tmp/vnni-cubin-cache}
WORK=${WORK:-/tmp/vnni-corpus}
mkdir -p "$OUT" "$WORK"
. "$(dirname "${BASH_SOURCE[0]}")/seed_cache.sh"
if ls target/device-work/work.tar.gz.part-* >/dev/null 2>&1; then
  cat target/device-work/work.tar.gz.part-* | tar -C "$WORK" -xzf -
  echo "resumed: $(ls "$WORK"/"$PROFILE"*/cells 2>/dev/null | grep -c '\.prov\.json$' || true) cells already published"
fi
# From here on, pack the work directory whatever happens (after a complete resume, so a broken
# archive is never packed as the new state): published cells always come back. Locks name this
# machine's processes; a later call runs on another machine, so they stay here.
pack() {
  tar -C "$WORK" --exclude='locks' -czf - . | split -b 15M - "$OUT/work.tar.gz.part-"
  ls -la "$OUT"
}
trap pack EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
if [ "${WORKERS:-0}" = 1 ]; then
  start=$(date +%s)
  "$BIN" sweep --backend cuda --profile family-smoke --devices 0,0 --cache "$CACHE" --out "$WORK/smoke-2workers" 2>"$WORK/smoke-2workers.log" | tail -4
  echo "two workers on one GPU: $(( $(date +%s) - start )) s"
  start=$(date +%s)
  "$BIN" sweep --backend cuda --profile family-smoke --cache "$CACHE" --out "$WORK/smoke-1worker" 2>"$WORK/smoke-1worker.log" | tail -2
  echo "one worker: $(( $(date +%s) - start )) s"
fi
# sweep DIR EXTRA...: the profile's sweep into DIR until the budget left runs out
deadline=$(( $(date +%s) + ${BUDGET:-480} ))
sweep() {
  local dir=$1; shift
  local left=$(( deadline - $(date +%s) )) start
  start=$(date +%s)
  if [ "$left" -gt 5 ] && timeout --signal=KILL "$left" "$BIN" sweep --backend cuda --profile "$PROFILE" --cache "$CACHE" --out "$dir" "$@" 2>>"$dir.log" | tail -3; then
    echo "sweep of $(basename "$dir") finished in $(( $(date +%s) - start )) s"
  else
    echo "sweep of $(basename "$dir") stopped after $(( $(date +%s) - start )) s (time budget or failure; see its log); it resumes next call"
    tail -3 "$dir.log" 2>/dev/null || true
    return 1
  fi
}
DEV=()
if [ -n "${DEVICES:-}" ]; then DEV=(--devices "$DEVICES"); fi
STAGE=()
if [ -n "${M1_POLICY:-}" ]; then STAGE=(--m1-policy "$M1_POLICY" --m1-corpus "$M1_CORPUS"); fi
BUCKETS=()
if [ -n "${M_BUCKETS_FROM:-}" ]; then BUCKETS=(--m-buckets-from "$M_BUCKETS_FROM"); fi
PRUNE=()
if [ -n "${PRUNE_WITH:-}" ]; then PRUNE=(--prune-with "$PRUNE_WITH"); fi
if [ "${M1_ONLY:-0}" = 1 ]; then
  sweep "$WORK/$PROFILE-m1" --m1-only "${DEV[@]}" "${PRUNE[@]}" || true
elif [ "${STAGED:-0}" = 1 ]; then
  M1="$WORK/$PROFILE-m1"
  if sweep "$M1" --m1-only "${DEV[@]}" "${PRUNE[@]}"; then
    # a policy that fails its gates is still written (and frozen here: install is gated later)
    [ -f "$M1/policy.json" ] || "$BIN" fit --corpus "$M1/corpus" --out "$M1/policy.json" --ledger "$WORK/scratch-ledger.json" 2>&1 | tail -2 || true
    STAGE=(--m1-policy "$M1/policy.json" --m1-corpus "$M1/corpus")
    sweep "$WORK/$PROFILE" "${DEV[@]}" "${STAGE[@]}" "${BUCKETS[@]}" || true
  fi
elif [ -n "${M1_POLICY:-}" ]; then
  sweep "$WORK/$PROFILE" "${DEV[@]}" "${STAGE[@]}" "${BUCKETS[@]}" || true
else
  sweep "$WORK/$PROFILE" "${DEV[@]}" "${BUCKETS[@]}" "${PRUNE[@]}" || true
fi
if [ -n "${EVIDENCE_TOP:-}" ]; then
  d=$WORK/$PROFILE
  if [ "${M1_ONLY:-0}" = 1 ]; then d=$WORK/$PROFILE-m1; fi
  left=$(( deadline - $(date +%s) ))
  if [ -f "$d/corpus/corpus.manifest.json" ] && [ "$left" -gt 30 ]; then
    start=$(date +%s)
    if PATH=/usr/local/cuda/bin:$PATH timeout --signal=KILL "$left" "$BIN" profile --corpus "$d/corpus" \
      --out "$d/evidence" --top "$EVIDENCE_TOP" --devices "${DEVICES:-0}" --cache "$CACHE" >>"$d/evidence.log" 2>&1; then
      echo "evidence of $(basename "$d") finished in $(( $(date +%s) - start )) s"
    else
      # ncu and its worker outlive a killed `profile`: stop them before packing
      pkill -KILL -f -- "profile --corpus $d/corpus" || true
      echo "evidence of $(basename "$d") stopped after $(( $(date +%s) - start )) s; it resumes next call"
    fi
    grep -E "^chunk|^evidence" "$d/evidence.log" | tail -3 || true
  fi
fi
for d in "$WORK/$PROFILE-m1" "$WORK/$PROFILE"; do
  if [ -d "$d/cells" ]; then echo "published in $(basename "$d"): $(ls "$d/cells" | grep -c '\.prov\.json$') cells"; fi
done
