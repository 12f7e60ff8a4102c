#!/usr/bin/env bash
# One device call that checks a change of the CUDA path end to end, quickly: on-device
# preflight, a small bench (decode, grouped and prefill rows beside the copy and cuBLAS
# baselines), grouped and prefill certificates on small shapes, the family-smoke sweep twice
# (the second run must find every cell published), two worker processes on one GPU, and the
# in-process refresh on CUDA (staged: M = 1, frozen policy, batched rows at its picks; its
# proxy verdict). Prints a
# short table last. Results travel as one archive.
#   $OUT/smoke.tar.gz   bench CSVs, certificates, the sweep's corpus, the refresh summary, logs
set -euo pipefail
WORK=${WORK:-/tmp/vnni-smoke}
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
run preflight "$BIN" preflight --cache "$CACHE" --out "$WORK/resources.csv"
run bench "$BIN" bench --cache "$CACHE" --shapes 4096x4096,24576x4096 --grouped-shapes 4096x4096 \
  --grouped-m 2,16,31 --prefill-shapes 24576x4096 --prefill-m 64 --samples 4 --warmups 1 --out "$WORK/bench"
run certify-grouped "$BIN" certify --backend cuda --cache "$CACHE" --shapes 4096x4096,1536x8960 --m 2,5,16,31 \
  --out "$WORK/certificates-grouped.jsonl"
run certify-prefill "$BIN" certify --backend cuda --surface prefill --cache "$CACHE" --shapes 1002x2304 --m 32,256 \
  --out "$WORK/certificates-prefill.jsonl"
run sweep-1 "$BIN" sweep --backend cuda --profile family-smoke --cache "$CACHE" --out "$WORK/sweep"
run sweep-2 "$BIN" sweep --backend cuda --profile family-smoke --cache "$CACHE" --out "$WORK/sweep"
run sweep-2workers "$BIN" sweep --backend cuda --profile family-smoke --devices 0,0 --cache "$CACHE" --out "$WORK/sweep-2workers"
run refresh "$BIN" refresh --backend cuda --profile family-smoke --cache "$CACHE" --out "$WORK/refresh" --random 1000000
tar -C "$WORK" -czf "$OUT/smoke.tar.gz" --exclude='*.timing.csv.zst' .
echo; cat "$WORK/bench.out" | tail -25
echo; tail -4 "$WORK/refresh.out"
echo; cat "$WORK/table.txt"
