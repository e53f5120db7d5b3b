#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian package with CPack: build-package/mimicfs_VERSION_ARCH.deb
# (the binary, the ScopedMount header and its CMake package, the docs and a man
# page; Depends: fuse3 and the shared libraries' packages).
#
# With --check, installs it into a new directory (dpkg-deb -x) and runs from
# there what a user would: `mimicfs --version`, `mimicfs run -- true`, and a
# downstream CMake project (tests/downstream) that finds the package and mounts
# with ScopedMount; and checks the package's Depends and files.
#
# With --build-dir DIR, packages the binary of that configured build tree (CI:
# the one the tests ran, so the engine is not compiled a second time) instead
# of a Release build of its own in build-package/. The binary is stripped
# either way (CPACK_STRIP_FILES).
#
#   scripts/package.sh [--check] [--build-dir DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: package.sh [--check] [--build-dir DIR]"
check=0
out="$root/build-package"
own_build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check=1 ;;
    --build-dir)
      [ $# -ge 2 ] || { echo "package.sh: --build-dir needs a directory ($usage)" >&2; exit 2; }
      out="$(cd "$2" 2>/dev/null && pwd)" && [ -f "$out/CPackConfig.cmake" ] || {
        echo "package.sh: \"$2\" is not a configured build directory ($usage)" >&2; exit 2; }
      own_build=0
      shift ;;
    *) echo "package.sh: unknown argument \"$1\" ($usage)" >&2; exit 2 ;;
  esac
  shift
done
"$root/scripts/bootstrap.sh" --with help2man dpkg-dev
if [ "$own_build" -eq 1 ]; then
  cmake -S "$root" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
    -DMIMICFS_BUILD_TESTS=OFF >/dev/null
else
  # Configured again so that it finds help2man, which it may have been without.
  cmake -S "$root" -B "$out" >/dev/null
fi
cmake --build "$out" --target mimicfs mimicfs_man mimicfs_changelog mimicfs_completion
rm -f "$out"/mimicfs_*.deb
(cd "$out" && cpack -G DEB >/dev/null)
deb="$(ls "$out"/mimicfs_*.deb)"
echo "package.sh: $deb"
[ "$check" -eq 1 ] || exit 0

fail() { echo "package.sh: $*" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
depends="$(dpkg-deb -f "$deb" Depends)"
echo "Depends: $depends"
for package in fuse3 'libfuse3-[0-9]+' 'libfmt[0-9]+' 'libspdlog[0-9.]*(-fmt[0-9]+)?'; do
  grep -qE "(^|, )$package( |,|$)" <<<"$depends" || fail "Depends lacks $package"
done
# What find_package(mimicfs) needs comes with it unless recommends are refused.
grep -qE "(^|, )nlohmann-json3-dev( |,|$)" <<<"$(dpkg-deb -f "$deb" Recommends)" ||
  fail "Recommends lacks nlohmann-json3-dev"
dpkg-deb -x "$deb" "$work/root"
usr="$work/root/usr"
for file in bin/mimicfs include/mimicfs/scoped_mount.h share/cmake/mimicfs/mimicfsConfig.cmake \
    share/doc/mimicfs/README.md share/doc/mimicfs/copyright share/doc/mimicfs/changelog.gz \
    share/man/man1/mimicfs.1.gz share/bash-completion/completions/mimicfs; do
  [ -s "$usr/$file" ] || fail "the package lacks /usr/$file"
done
if readelf -S "$usr/bin/mimicfs" | grep -q '\.debug_info'; then fail "the binary is not stripped"; fi
"$usr/bin/mimicfs" --version | grep -qx "mimicfs [0-9.]*" || fail "mimicfs --version"
"$usr/bin/mimicfs" run -- true || fail "mimicfs run -- true"
man -l "$usr/share/man/man1/mimicfs.1.gz" >/dev/null 2>&1 ||
  zgrep -q '^\.TH MIMICFS' "$usr/share/man/man1/mimicfs.1.gz" || fail "the man page"
for command in mount run crashtest stats ctl report profiles completion; do
  zgrep -q "^\.TH MIMICFS-${command^^}" "$usr/share/man/man1/mimicfs-$command.1.gz" ||
    fail "the man page of mimicfs $command"
done
bash -c "source '$usr/share/bash-completion/completions/mimicfs' && COMP_WORDS=(mimicfs mo) &&
  COMP_CWORD=1 && _mimicfs && [ \"\${COMPREPLY[*]}\" = mount ]" || fail "the bash completion"
grep -q "License: Apache-2.0" "$usr/share/doc/mimicfs/copyright" || fail "the copyright file"
cmake -S "$root/tests/downstream" -B "$work/downstream" -DCMAKE_PREFIX_PATH="$usr" >/dev/null
cmake --build "$work/downstream" >/dev/null
"$work/downstream/uses_scoped_mount" || fail "the downstream project"
echo "package.sh: ok"
