#!/usr/bin/env bash
# Leave one fresh family set out: how a learner change does on real models it never saw, with
# no GPU time. For each spent set S (timed and scored once, so no longer a holdout), fit a
# development-only policy on CORPUS (with the other sets added as development rows when
# ABSORB=1, scripts/perf/absorb_bench.py) and score it on S's bench runs; then pool the sets.
#   bash scripts/perf/cross_sets.sh CORPUS NAME [fit flags ...]
# env: SETS (default: the H100 sets 11, 12 and 13 of docs/perf; every set must be timed on the
#      corpus's machine kind with its kernels), ABSORB (0: fit on CORPUS alone, one fit scored on
#      every set; 1, the default: one fit per left-out set), BIN (target/release/vnni-dispatch),
#      OUT (target/cross-sets). Prints one row per set and the pooled row; per-cell picks in
#      OUT/S/NAME.picks.csv. A derived corpus is reused only when made from the same CORPUS (its
#      corpus id) and the same other sets (OUT/S/corpus.stamp); the left-out set's shapes are
#      never added (absorb_bench.py --exclude).
set -euo pipefail
CORPUS=$1
NAME=$2
shift 2
case "$NAME" in *[=/,\ ]*) echo "NAME must not hold '=', '/', ',' or spaces: $NAME" >&2; exit 2;; esac
BIN=${BIN:-target/release/vnni-dispatch}
OUT=${OUT:-target/cross-sets}
SETS=${SETS:-docs/perf/holdout-families-11 docs/perf/holdout-families-12 docs/perf/holdout-families-13}
ABSORB=${ABSORB:-1}
here=$(cd "$(dirname "$0")" && pwd)
if [ "$ABSORB" = 1 ] && [ "$(echo $SETS | wc -w)" -lt 2 ]; then
  echo "ABSORB=1 needs at least two SETS" >&2
  exit 2
fi
corpus_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["corpus_id"])' "$CORPUS/corpus.manifest.json")
mkdir -p "$OUT"
if [ "$ABSORB" = 0 ]; then
  "$BIN" fit --corpus "$CORPUS" --development-only --development-policy "$OUT/$NAME.json" "$@" >/dev/null
fi
picks=()
for set in $SETS; do
  s=$(basename "$set")
  mkdir -p "$OUT/$s"
  policy=$OUT/$NAME.json
  if [ "$ABSORB" = 1 ]; then
    others=()
    for o in $SETS; do [ "$o" = "$set" ] || others+=("$o"); done
    stamp="$corpus_id ${others[*]}"
    if [ "$(cat "$OUT/$s/corpus.stamp" 2>/dev/null)" != "$stamp" ]; then
      rm -f "$OUT/$s/corpus.stamp"
      python3 "$here/absorb_bench.py" "$CORPUS" "$OUT/$s/corpus" "${others[@]}" --exclude "$set" >/dev/null
      echo "$stamp" >"$OUT/$s/corpus.stamp"
    fi
    policy=$OUT/$s/$NAME.json
    "$BIN" fit --corpus "$OUT/$s/corpus" --development-only --development-policy "$policy" "$@" >/dev/null
  fi
  python3 "$here/policy_regret.py" "$BIN" <(zcat "$set/run1.decode.csv.gz") "$OUT/$s/$NAME.picks.csv" \
    "$NAME=$policy" | sed -n 3p | sed "s/^| $NAME |/| $NAME, $s |/"
  picks+=("$OUT/$s/$NAME.picks.csv")
done
python3 - "$here" "$NAME" "${picks[@]}" <<'EOF'
import csv, sys
sys.path.insert(0, sys.argv[1])
from policy_regret import summary  # the per-set rows' statistics, unmeasured picks counted apart
summary(f"{sys.argv[2]}, pooled", [float(r["regret"]) for f in sys.argv[3:] for r in csv.DictReader(open(f))])
EOF
