#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python helper (python/): installed with pip from the source tree into a
# new virtual environment on Debian's python3 (pytest from Debian), then its
# tests, and the downstream example (tests/downstream/test_downstream.py), run
# against real mounts of the mimicfs just built.
#
#   scripts/python-tests.sh [PYTEST ARGS...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh" --with python3 python3-venv python3-pip python3-pytest \
  python3-setuptools python3-wheel
"$root/scripts/build.sh" >/dev/null
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# A copy: pip leaves its build directories next to the sources.
cp -r "$root/python" "$work/src"
cp "$root/tests/downstream/test_downstream.py" "$work/src/tests/"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --quiet --no-build-isolation --no-deps --no-index "$work/src"
# From elsewhere than the sources, so the installed package is what is tested.
cd "$work"
MIMICFS_BINARY="$root/build/cli/mimicfs" \
  "$work/venv/bin/python" -m pytest -q -p no:cacheprovider -p pytester "$work/src/tests" "$@"
