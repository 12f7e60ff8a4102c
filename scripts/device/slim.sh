#!/usr/bin/env bash
# The device tool sends the working tree (tracked and untracked-not-ignored files plus what a
# call carries) and refuses more than 64 MiB; lfs-data/ and docs/ alone hold about 250 MB, and
# no device script reads them. `slim.sh on` leaves them out of the checkout (a sparse checkout,
# nothing deleted from git), `slim.sh off` brings them back; `slim.sh size` prints what a call
# would send besides its carried paths.
#   bash scripts/device/slim.sh on|off|size
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
size() {
  # tracked files present in the checkout and untracked files git does not ignore
  git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [ -f "$f" ] && printf '%s\0' "$f"
  done | du -cb --files0-from=- | tail -1 | cut -f1
}
case "${1:-}" in
  on)
    # Untracked or modified files there would travel (or be left behind): commit or move them first.
    if [ -n "$(git status --porcelain -- lfs-data docs)" ]; then
      echo "slim.sh: lfs-data/ or docs/ has uncommitted changes; commit or move them first:" >&2
      git status --short -- lfs-data docs >&2
      exit 1
    fi
    git sparse-checkout set --no-cone '/*' '!/lfs-data/' '!/docs/'
    echo "slim: $(( $(size) / 1024 )) KiB would travel (the limit is 64 MiB with the carried paths)"
    ;;
  off)
    git sparse-checkout disable
    echo "full checkout restored"
    ;;
  size)
    echo "$(( $(size) / 1024 )) KiB would travel besides the carried paths"
    ;;
  *)
    echo "usage: bash scripts/device/slim.sh on|off|size" >&2
    exit 2
    ;;
esac
