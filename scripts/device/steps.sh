# Steps of a one-call device script, sourced once $WORK exists: `run NAME CMD...` runs a step
# with its output in $WORK/NAME.out and .err and adds a line (rc, seconds, last output line)
# to $WORK/table.txt, which the caller prints last. Starts the table and records the GPU.
status() { printf '%-22s %s\n' "$1" "$2" >>"$WORK/table.txt"; }
run() { # name, then the command; records rc and seconds
  local name=$1; shift
  local start=$(date +%s) rc=0
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
  status "$name" "rc=$rc $(( $(date +%s) - start ))s  $(tail -1 "$WORK/$name.out")"
}
: >"$WORK/table.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$WORK/gpu.txt"
