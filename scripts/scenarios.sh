#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs each seed's competing strategies side by side on mimicfs profiles and
# prints one table per scenario (tools/scenario_driver.cc). Needs root or a
# usable /dev/fuse (it mounts).
#
#   scripts/scenarios.sh [--scenario extend|grow|concurrent|punch|fio|drop|clients|stale|mariadb] [--profiles nfs,ext4] [--json]
#
# Without --scenario every scenario but mariadb runs (scripts/mariadb-on-mimicfs.sh runs that).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The driver and the binary it mounts, not the tests; quiet unless it fails.
if ! log="$("$root/scripts/build.sh" --target mimicfs-scenarios --target mimicfs 2>&1)"; then
  printf '%s\n' "$log" >&2
  exit 1
fi
exec "$root/build/tools/mimicfs-scenarios" "$@"
