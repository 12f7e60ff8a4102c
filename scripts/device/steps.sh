# Steps of a one-call device script, sourced once the caller has set WORK: the CUDA paths, the
# defaults of BIN, OUT and CACHE, both directories made; `run NAME CMD...` runs a step with
# its output in $WORK/NAME.out and .err and adds a line (rc, seconds, last output line) to
# $WORK/table.txt, which the caller prints last. Starts the table and records the GPU. With
# SNAPSHOT set (a path under $OUT), every step ends by packing $WORK there, so a call stopped
# at its time limit still returns the steps it finished.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/device}
CACHE=${CACHE:-/tmp/vnni-cubin-cache}
mkdir -p "$OUT" "$WORK"
status() { printf '%-22s %s\n' "$1" "$2" >>"$WORK/table.txt"; }
run() { # name, then the command; records rc and seconds
  local name=$1; shift
  local start=$(date +%s) rc=0
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
  status "$name" "rc=$rc $(( $(date +%s) - start ))s  $(tail -1 "$WORK/$name.out")"
  if [ -n "${SNAPSHOT:-}" ]; then
    tar -C "$WORK" -czf "$SNAPSHOT.part" --exclude="*.timing.csv.zst" . 2>/dev/null && mv "$SNAPSHOT.part" "$SNAPSHOT"
  fi
}
: >"$WORK/table.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$WORK/gpu.txt"
