#!/usr/bin/env bash
# Issue 10 on a two-GPU machine: the family-smoke profile on one GPU, on two GPUs (one worker
# process each), and on two GPUs with worker 1 killed (SIGKILL) mid-sweep and the command rerun;
# then the cell sets of the three corpora are compared and the per-device provenance shown.
set -euo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/device}
CACHE=${CACHE:-/tmp/vnni-cubin-cache}
W=${WORK:-/tmp/vnni-2gpu}
PROFILE=${PROFILE:-family-smoke}
mkdir -p "$OUT" "$W"
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee "$OUT/gpu.txt"
# Compile once so every timed run starts from the cubin cache.
"$BIN" preflight --cache "$CACHE" --out "$W/resources.csv" | tail -1
timed() { local s; s=$(date +%s.%N); "$@"; awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { printf "elapsed %.1f s\n", b - a }'; }
echo "== one GPU"; timed "$BIN" sweep --backend cuda --profile "$PROFILE" --cache "$CACHE" --out "$W/one" 2>"$W/one.log" | tail -2
echo "== two GPUs"; timed "$BIN" sweep --backend cuda --profile "$PROFILE" --devices 0,1 --cache "$CACHE" --out "$W/two" 2>"$W/two.log" | tail -4
echo "== two GPUs, worker 1 killed"
("$BIN" sweep --backend cuda --profile "$PROFILE" --devices 0,1 --cache "$CACHE" --out "$W/killed" >"$W/killed-1.out" 2>"$W/killed-1.log" || true) &
sleep "${KILL_AFTER:-10}"; pkill -9 -f -- "--worker 1 --cache" && echo "killed worker 1"; wait
tail -3 "$W/killed-1.out"; echo "published before the rerun: $(ls "$W/killed/cells" | grep -c '\.prov\.json$')"
"$BIN" sweep --backend cuda --profile "$PROFILE" --devices 0,1 --cache "$CACHE" --out "$W/killed" 2>"$W/killed-2.log" | tail -4
keys() { for f in "$1"/corpus/{decode_m1,grouped}.*.csv; do tail -n +2 "$f" | cut -d, -f4-10; done | sort; }
for d in two killed; do
  if cmp -s <(keys "$W/one") <(keys "$W/$d"); then echo "cell set of $d == one GPU ($(keys "$W/$d" | wc -l) rows)"; else echo "cell set of $d DIFFERS from one GPU"; fi
done
for d in two killed; do echo "$d: cells per device: $(tail -n +2 "$W/$d/corpus/cells.csv" | cut -d, -f4 | sort | uniq -c | tr '\n' ' ')"; done
tar -C "$W" -czf "$OUT/two-gpus.tar.gz" one/corpus two/corpus killed/corpus one.log two.log killed-1.log killed-2.log killed-1.out
