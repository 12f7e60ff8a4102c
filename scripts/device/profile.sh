#!/usr/bin/env bash
# One device call for profiler evidence (issue 22): `profile` under Nsight Compute over a
# corpus (CORPUS, e.g. a committed one carried along; without it the CUDA sweep of PROFILE,
# family-smoke by default, runs first, with SWEEP_ARGS such as --m1-only), one pass per entry
# of PASSES ("TOP:SECONDS", TOP a number or `all`), each cut at SECONDS and resumable by file (the same command again profiles only the chunk files left);
# DEVICES=0,1,... shares the chunks out among GPUs. A committed corpus is larger than a call
# carries (64 MiB), so CORPUS may also be a .tar.gz of its directory
# (`tar -C lfs-data/corpora/cuda/sm_90 -czf target/device-in/corpus.tar.gz <dir>`), unpacked
# here; RESUME=<the previous call's profile.tar.gz, carried> restores its evidence directories
# first, so a pass cut by one call goes on in the next.
# Evidence directories travel as one archive; a short table last.
#   $OUT/profile.tar.gz   each evidence directory, the corpus's plan and manifest, logs
set -euo pipefail
WORK=${WORK:-/tmp/vnni-profile}
PASSES=${PASSES:-"3:200 all:300"}
CHUNK=${CHUNK:-256}
REPLAY=${REPLAY:-kernel}   # or application (ncu reruns the worker per pass)
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
ncu --version | tail -1 | tee "$WORK/ncu-version.txt"
if [ -n "${RESUME:-}" ]; then
  tar -C "$WORK" -xzf "$RESUME" --wildcards './evidence-*'
  echo "resumed: $(ls -d "$WORK"/evidence-* 2>/dev/null | wc -l) evidence directories from $RESUME"
fi
if [[ "${CORPUS:-}" == *.tar.gz ]]; then
  mkdir -p "$WORK/carried" && tar -C "$WORK/carried" -xzf "$CORPUS"
  CORPUS=$(dirname "$(ls "$WORK"/carried/*/corpus.manifest.json | head -1)")
fi
if [ -z "${CORPUS:-}" ]; then
  # shellcheck disable=SC2086 # SWEEP_ARGS is a list of arguments
  run sweep "$BIN" sweep --backend cuda --profile "${PROFILE:-family-smoke}" ${SWEEP_ARGS:-} --cache "$CACHE" --out "$WORK/sweep"
  CORPUS=$WORK/sweep/corpus
fi
mkdir -p "$WORK/corpus-id" && cp "$CORPUS/plan.json" "$CORPUS/corpus.manifest.json" "$WORK/corpus-id/"
# the archive is rewritten after every pass: a call cut by the device's limit keeps what it did
pack() { tar -C "$WORK" -czf "$OUT/profile.tar.gz.part" --exclude=sweep --exclude=carried . && mv "$OUT/profile.tar.gz.part" "$OUT/profile.tar.gz"; }
for pass in $PASSES; do
  top=${pass%%:*} limit=${pass##*:}
  sel=(--top "$top"); [ "$top" = all ] && sel=()
  run "profile-top$top" timeout "$limit" "$BIN" profile --corpus "$CORPUS" --out "$WORK/evidence-top$top" \
    "${sel[@]}" --chunk "$CHUNK" --replay "$REPLAY" --devices "${DEVICES:-0}" --cache "$CACHE"
  pack
done
for pass in $PASSES; do
  grep -h "^| " "$WORK/profile-top${pass%%:*}.out" | head -8 || true
done
echo; cat "$WORK/table.txt"
