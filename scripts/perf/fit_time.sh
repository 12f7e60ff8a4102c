#!/usr/bin/env bash
# How long `vnni-dispatch fit` takes on this machine (issue 16: under 60 s on 2 cores for a
# 5,000-cell corpus): on a synthetic CUDA corpus at M = 1 (every format of the registry, both
# modes, 527 geometries, 16 families: 10,137 cells at 20 formats;
# `learner/examples/synthetic_corpus.rs`) and on the
# committed `core` M = 1 corpus (1,714 cells). A fit whose gates fail still writes its policy;
# only a missing policy is an error. Prints one row per corpus.
#
#     bash scripts/perf/fit_time.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p vnni-trainer --bin vnni-dispatch
cargo build --release -q -p vnni-learner --example synthetic_corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target/release/examples/synthetic_corpus "$work/synthetic" > "$work/synthetic.txt"
core=lfs-data/corpora/cuda/sm_90/4364fe0387eeb1aa-10a2c061ae2d

echo "| corpus | cells | cores | fit (s) |"
echo "|---|---|---|---|"
for name in synthetic core; do
  dir=$work/synthetic cells=$(grep -o '[0-9]* cells' "$work/synthetic.txt" | cut -d' ' -f1)
  if [ "$name" = core ]; then dir=$core cells=$(($(wc -l < "$core/cells.csv") - 1)); fi
  start=$(date +%s%N)
  target/release/vnni-dispatch fit --corpus "$dir" --out "$work/$name.json" --ledger "$work/$name-ledger.json" \
    > "$work/$name.log" 2>&1 || true
  end=$(date +%s%N)
  [ -s "$work/$name.json" ] || { cat "$work/$name.log" >&2; echo "fit of $dir wrote no policy" >&2; exit 1; }
  printf '| %s | %s | %s | %d.%02d |\n' "$name" "$cells" "$(nproc)" $(((end - start) / 1000000000)) $(((end - start) / 10000000 % 100))
done
