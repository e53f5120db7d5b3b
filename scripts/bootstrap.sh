#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages mimicfs needs to build, run and test, and with
# `--with PKG...` those a script needs besides (mariadb-server, chromium,
# xfsprogs, ...). Does nothing when they are all present. Needs root (or sudo)
# only when something is missing. The one place packages are installed.
#
#   scripts/bootstrap.sh [--with PKG...]
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  fuse3 libfuse3-dev
  liburing-dev  # FUSE over io_uring (fusefs/fuse_ring.h)
  libgtest-dev libfmt-dev libspdlog-dev
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev
  libabsl-dev  # absl::btree_map (engine/space/block_range_set.h)
  attr
  python3  # scripts/check-layout.py, a CTest test
  xfsprogs e2fsprogs btrfs-progs  # mkfs.xfs, xfs_db, mkfs.ext4, dumpe2fs, mkfs.btrfs: the geometry test (mkfs_geometry_test.cc)
  fio  # real software on the mount: the fio scenario (tools/scenario_driver.cc)
)
if [ "${1:-}" = "--with" ]; then
  shift
  [ $# -gt 0 ] || { echo "bootstrap: --with needs at least one package" >&2; exit 2; }
  packages+=("$@")
elif [ $# -gt 0 ]; then
  echo "bootstrap: unknown argument \"$1\" (usage: bootstrap.sh [--with PKG...])" >&2
  exit 2
fi

# In a git checkout, commit messages go through .githooks/commit-msg (a
# subject of at most 72 characters, then a blank line).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if command -v git >/dev/null && git -C "$root" rev-parse --git-dir >/dev/null 2>&1 &&
  [ "$(git -C "$root" config core.hooksPath || true)" != .githooks ]; then
  git -C "$root" config core.hooksPath .githooks
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "bootstrap: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "bootstrap: need root to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
