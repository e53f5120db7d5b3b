#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Draws pictures with `mimicfs report` and renders each SVG in a real browser
# (Debian's chromium, headless), so the picture is checked the way a person
# will see it:
#   - nfs: a file posix_fallocate'd (1024 extents laid end to end on the
#     device) beside one written whole (1 extent): InnoDB's case on NFS;
#   - seed 003: 4 writers on xfs with allocsize=4k, and on ext4.
# Each check: the PNG has the SVG's size and is not blank, and the page
# Chromium built names every ranked file in the legend and draws its strip.
# Installs chromium if missing. Leaves OUT_DIR/*.svg and *.png (default
# /tmp/mimicfs-report).
#
#   scripts/check-report.sh [OUT_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-/tmp/mimicfs-report}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"  # file:// needs an absolute path
"$root/scripts/bootstrap.sh" --with chromium python3
"$root/scripts/build.sh" >/dev/null
mimicfs="$root/build/cli/mimicfs"
driver="$root/build/tools/mimicfs-scenarios"

fail() { echo "check-report: $*" >&2; exit 1; }

draw() {  # draw NAME WORKLOAD MIMICFS-RUN-OPTIONS...
  local name=$1 workload=$2; shift 2
  "$mimicfs" run "$@" -- sh -c "$workload && '$mimicfs' report \"\$MIMICFS_MOUNT\" --out '$out/$name.svg' && '$mimicfs' stats \"\$MIMICFS_MOUNT\" --json > '$out/$name.json'"
  local width height
  width=$(grep -o '<svg [^>]*' "$out/$name.svg" | grep -o ' width="[0-9]*"' | tr -dc 0-9)
  height=$(grep -o '<svg [^>]*' "$out/$name.svg" | grep -o ' height="[0-9]*"' | tr -dc 0-9)
  timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size="$width,$height" --screenshot="$out/$name.png" "file://$out/$name.svg" \
    >/dev/null 2>&1 || fail "chromium could not render $out/$name.svg"
  timeout 120 chromium --headless --no-sandbox --disable-gpu --dump-dom "file://$out/$name.svg" \
    >"$out/$name.dom" 2>/dev/null || fail "chromium could not load $out/$name.svg"
  python3 - "$out/$name" "$width" "$height" <<'PY' || exit 1
import json, os, struct, sys
base, width, height = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(base + ".png", "rb") as f:
    head = f.read(24)
if head[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit(f"check-report: {base}.png is not a PNG")
w, h = struct.unpack(">II", head[16:24])
if (w, h) != (width, height):
    sys.exit(f"check-report: {base}.png is {w}x{h}, the picture {width}x{height}")
# A blank or failed render is a few kilobytes of one colour.
if os.path.getsize(base + ".png") < 10000:
    sys.exit(f"check-report: {base}.png is only {os.path.getsize(base + '.png')} bytes: blank")
dom = open(base + ".dom", encoding="utf-8").read()
files = sorted(json.load(open(base + ".json"))["files"])
if len(files) > 20:
    sys.exit(f"check-report: {len(files)} files: the check expects every file ranked")
for path in files:
    if f">{path}: " not in dom:
        sys.exit(f"check-report: the legend Chromium built does not name {path}")
    if f'data-strip="{path}"' not in dom:
        sys.exit(f"check-report: no strip for {path}")
PY
  echo "$name: $out/$name.svg rendered by chromium to $out/$name.png (${width}x$height, every file named)"
}

fallocated="python3 -c 'import os; d = os.environ[\"MIMICFS_MOUNT\"]
fd = os.open(d + \"/ibdata1\", os.O_CREAT | os.O_WRONLY, 0o644)
os.posix_fallocate(fd, 0, 4 << 20)
os.close(fd)
open(d + \"/ib_logfile0\", \"wb\").write(b\"x\" * (4 << 20))'"
draw nfs-posix-fallocate "$fallocated" --profile nfs
# The strip of the posix_fallocate'd file must be cut up, the other's whole.
stripes=$(grep -c 'fill="#0f3b5a"' "$out/nfs-posix-fallocate.svg" || true)
[ "$stripes" -gt 100 ] || fail "the posix_fallocate'd file's strip shows $stripes extents' shades, not hundreds"

writers="'$driver' --perform concurrent write_only"
draw xfs-allocsize-4k "$writers" --profile xfs --set allocation.speculative_preallocation=false
draw ext4 "$writers" --profile ext4
