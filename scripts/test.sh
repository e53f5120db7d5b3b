#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what is missing, builds, and runs every test (unit, mount, scenarios).
# Mount tests skip where /dev/fuse is unusable, unless MIMICFS_REQUIRE_FUSE=1.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh"
cd "$root/build"
# Unit tests run side by side (one process each); mount, scenario and
# conformance tests run alone (RUN_SERIAL: they time real mounts).
ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@"
