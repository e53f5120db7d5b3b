#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Puts what scripts/measure-real-fs.sh --json measured on real filesystems
# beside the same workloads on the emulated profiles, as a markdown table with
# each row's ratio and whether it is within 2x (docs/profiles.md, "Fidelity").
# Needs root or a usable /dev/fuse (it mounts); takes a few minutes.
#
#   sudo scripts/measure-real-fs.sh 3 --json real.json   # once, on a machine with loop devices
#   scripts/fidelity.sh real.json [--json emulated.json [--label TEXT]] [--before earlier.json]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ $# -ge 1 ] || { echo "usage: scripts/fidelity.sh REAL.json [--json EMULATED.json [--label TEXT]] [--before EARLIER.json]" >&2; exit 2; }
[ -r "$1" ] || { echo "fidelity.sh: cannot read $1" >&2; exit 2; }
"$root/scripts/bootstrap.sh" --with python3
"$root/scripts/build.sh" >/dev/null
exec python3 "$root/scripts/fidelity.py" "$@" --mimicfs "$root/build/cli/mimicfs" \
  --workload "$root/build/tools/mimicfs-workload" --scenarios "$root/build/tools/mimicfs-scenarios"
