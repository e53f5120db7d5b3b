#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Draws seed 003 (4 writers on xfs with allocsize=4k, and on ext4) with
# `mimicfs report` and renders each SVG in a real browser (Debian's chromium,
# headless), so the picture is checked the way a person will see it. Installs
# chromium if missing. Leaves OUT_DIR/*.svg and *.png (default /tmp/mimicfs-report).
#
#   scripts/check-report.sh [OUT_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-/tmp/mimicfs-report}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"  # file:// needs an absolute path
"$root/scripts/bootstrap.sh" --with chromium
"$root/scripts/build.sh" >/dev/null
mimicfs="$root/build/cli/mimicfs"
driver="$root/build/tools/mimicfs-scenarios"

draw() {  # draw NAME MIMICFS-RUN-OPTIONS...
  local name=$1; shift
  "$mimicfs" run "$@" -- sh -c \
    "'$driver' --perform concurrent write_only && '$mimicfs' report \"\$MIMICFS_MOUNT\" --out '$out/$name.svg'"
  timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size=1040,760 --screenshot="$out/$name.png" "file://$out/$name.svg" >/dev/null 2>&1
  local size
  size=$(stat -c %s "$out/$name.png")
  # A blank or failed render is a few kilobytes of white.
  if [ "$size" -lt 10000 ]; then
    echo "check-report: $out/$name.png is only $size bytes: the SVG did not render" >&2
    exit 1
  fi
  echo "$name: $out/$name.svg rendered by chromium to $out/$name.png ($size bytes)"
}

draw xfs-allocsize-4k --profile xfs --set allocation.speculative_preallocation=false
draw ext4 --profile ext4
