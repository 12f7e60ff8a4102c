#!/usr/bin/env bash
# Build and run the table-consumer examples against tables generated from a committed policy
# (so they can never drift from what `generate` writes): the C++ one through CMake, the Rust
# one through rustc. Both read examples/queries.txt and must print the same lines.
#   bash scripts/examples.sh [POLICY]     (BIN, CMAKE, WORK override the tools and scratch dir)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
POLICY=${1:-lfs-data/tables/cuda/sm_90/h200-generic/policy.json}
BIN=${BIN:-target/debug/vnni-dispatch}
CMAKE=${CMAKE:-cmake}
if [ -z "${WORK:-}" ]; then
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK/tables" "$WORK/rust"

"$BIN" generate --policy "$POLICY" --out "$WORK/tables" >/dev/null
"$CMAKE" -S examples/cpp -B "$WORK/cpp" -DVNNI_TABLES_DIR="$WORK/tables" -DCMAKE_BUILD_TYPE=Release >/dev/null
"$CMAKE" --build "$WORK/cpp" >/dev/null
cp examples/rust/main.rs "$WORK/tables/vnni_dispatch.rs" "$WORK/rust/"
rustc --edition 2021 -O -D warnings -o "$WORK/rust/vnni_example" "$WORK/rust/main.rs"

"$WORK/cpp/vnni_example" < examples/queries.txt > "$WORK/cpp.txt"
"$WORK/rust/vnni_example" < examples/queries.txt > "$WORK/rust.txt"
if ! diff -u "$WORK/cpp.txt" "$WORK/rust.txt"; then
  echo "error: the C++ and Rust examples disagree on the same tables ($POLICY)" >&2
  exit 1
fi
cat "$WORK/cpp.txt"
