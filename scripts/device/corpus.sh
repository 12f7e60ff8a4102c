#!/usr/bin/env bash
# One device call of a resumable H200 corpus collection. The sweep runs under a time budget
# and is killed (SIGKILL) when it runs out; published cells survive, and the next call resumes
# from the work archive carried back in. At most 8 files of 16 MiB come back from $OUT, so
# the work directory travels as 15 MiB archive parts.
#   in:  target/device-work/work.tar.gz.part-* (optional, from the previous call)
#   out: $OUT/work.tar.gz.part-*, $OUT/run.log (the caller redirects), $OUT/gpu.txt
#   env: PROFILE (core), BUDGET seconds for the sweep (480), WORKERS=1 also runs two worker
#        processes on this one GPU over the family-smoke profile (the --devices path);
#        M1_POLICY and M1_CORPUS (both or neither): the second stage of a staged refresh, the
#        batched rows timed at that frozen policy's M = 1 picks (decode rows copied from
#        M1_CORPUS, the sealed corpus the policy was fitted on).
set -euo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/device}
PROFILE=${PROFILE:-core}
CACHE=${CACHE:-/tmp/vnni-cubin-cache}
WORK=${WORK:-/tmp/vnni-corpus}
mkdir -p "$OUT" "$WORK"
if ls target/device-work/work.tar.gz.part-* >/dev/null 2>&1; then
  cat target/device-work/work.tar.gz.part-* | tar -C "$WORK" -xzf -
  echo "resumed: $(ls "$WORK/$PROFILE/cells" 2>/dev/null | grep -c '\.prov\.json$' || true) cells already published"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
if [ "${WORKERS:-0}" = 1 ]; then
  start=$(date +%s)
  "$BIN" sweep --backend cuda --profile family-smoke --devices 0,0 --cache "$CACHE" --out "$WORK/smoke-2workers" 2>"$WORK/smoke-2workers.log" | tail -4
  echo "two workers on one GPU: $(( $(date +%s) - start )) s"
  start=$(date +%s)
  "$BIN" sweep --backend cuda --profile family-smoke --cache "$CACHE" --out "$WORK/smoke-1worker" 2>"$WORK/smoke-1worker.log" | tail -2
  echo "one worker: $(( $(date +%s) - start )) s"
fi
STAGE=()
if [ -n "${M1_POLICY:-}" ]; then STAGE=(--m1-policy "$M1_POLICY" --m1-corpus "$M1_CORPUS"); fi
start=$(date +%s)
if timeout --signal=KILL "${BUDGET:-480}" "$BIN" sweep --backend cuda --profile "$PROFILE" --cache "$CACHE" --out "$WORK/$PROFILE" "${STAGE[@]}" 2>>"$WORK/$PROFILE.log" | tail -3; then
  echo "sweep finished in $(( $(date +%s) - start )) s"
else
  echo "sweep stopped after $(( $(date +%s) - start )) s (time budget or failure; see $PROFILE.log); it resumes next call"
  tail -3 "$WORK/$PROFILE.log"
fi
echo "published: $(ls "$WORK/$PROFILE/cells" | grep -c '\.prov\.json$') cells"
# Locks name this machine's processes; a later call runs on another machine, so they stay here.
tar -C "$WORK" --exclude='locks' -czf - . | split -b 15M - "$OUT/work.tar.gz.part-"
ls -la "$OUT"
