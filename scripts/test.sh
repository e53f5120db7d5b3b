#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, mount, scenarios).
# Mount tests skip where /dev/fuse is unusable, unless MIMICFS_REQUIRE_FUSE=1.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh"
cd "$root/build"
ctest --output-on-failure --timeout 600 "$@"
