#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian package where no build tree is: a new Debian 12 root
# (debootstrap, minbase) entered with chroot, in a mount and PID namespace of
# its own. There it does what a user's CI job does: `apt-get install
# ./mimicfs_*.deb`, `mimicfs mount` and `mimicfs stats` on emulated NFS, then a
# downstream CTest suite (tests/downstream: find_package(mimicfs), ScopedMount)
# and a pytest suite with the `mimicfs_mount` fixture (the Python helper
# installed with pip in a venv, as the README says).
#
# It downloads Debian's packages and pytest (about 200 MiB), so it is not part
# of .ci/run; run it before a release and after a change to the package.
#
#   scripts/check-package-install.sh [--deb FILE] [--mirror URL] [--keep]
#
# Without --deb it builds the package (scripts/package.sh). --keep leaves the
# root in /var/tmp for a look; it is removed otherwise.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: check-package-install.sh [--deb FILE] [--mirror URL] [--keep]"
deb=""
mirror="http://deb.debian.org/debian"
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --deb | --mirror)
      [ $# -ge 2 ] && [ -n "$2" ] ||
        { echo "check-package-install.sh: $1 needs a value ($usage)" >&2; exit 2; }
      if [ "$1" = --deb ]; then deb="$2"; else mirror="$2"; fi
      shift ;;
    --keep) keep=1 ;;
    *) echo "check-package-install.sh: unknown argument \"$1\" ($usage)" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "check-package-install.sh: needs root (debootstrap, chroot)" >&2; exit 2; }
if [ -n "$deb" ]; then
  [ -f "$deb" ] || { echo "check-package-install.sh: no package \"$deb\"" >&2; exit 2; }
else
  "$root/scripts/package.sh" ||
    { echo "check-package-install.sh: the package did not build" >&2; exit 1; }
  deb="$(ls "$root"/build-package/mimicfs_*.deb)"
fi
"$root/scripts/bootstrap.sh" --with debootstrap

start=$SECONDS
# The root (world-readable, as a runner's /: apt's sandbox user reads the
# .deb there) and, apart, what goes into it.
work="$(mktemp -d /var/tmp/mimicfs-package-check.XXXXXX)"
stage="$(mktemp -d /var/tmp/mimicfs-package-stage.XXXXXX)"
chmod 755 "$work"
cleanup() {
  # The mounts were the namespace's and went with it; --one-file-system all
  # the same, never to reach into the host's.
  rm -rf --one-file-system "$stage"
  if [ "$keep" -eq 1 ]; then
    echo "check-package-install.sh: the root is kept in $work"
  else
    rm -rf --one-file-system "$work"
  fi
}
trap cleanup EXIT

# The user's side: the package, and the two example suites. Nothing of the
# source or build tree goes in.
mkdir -p "$stage/downstream" "$stage/ca"
cp "$deb" "$stage/"
cp "$root/tests/downstream/CMakeLists.txt" "$root/tests/downstream/uses_scoped_mount.cc" \
  "$root/tests/downstream/test_downstream.py" "$stage/downstream/"
cp -r "$root/python" "$stage/python"
rm -rf "$stage/python/tests"
# The authorities this host trusts besides Debian's (a proxy's) are trusted
# there too, as they would be on a CI runner behind the same proxy.
cp -r /usr/local/share/ca-certificates/. "$stage/ca/" 2>/dev/null || true

# In the root, as a CI job would run it.
printf -v deb_name %q "$(basename "$deb")"
cat >"$stage/job.sh" <<JOB
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive PATH=/usr/sbin:/usr/bin:/sbin:/bin
cd /ci
cp -r ca/. /usr/local/share/ca-certificates/
apt-get update -qq
apt-get install -y -qq ./$deb_name g++ python3-venv ca-certificates >/dev/null
update-ca-certificates >/dev/null 2>&1
echo "== installed: \$(mimicfs --version); no build tree: \$(ls / | tr '\n' ' ')"
mkdir -p /tmp/nas
mimicfs mount /tmp/nas
trap 'fusermount3 -u /tmp/nas 2>/dev/null || true' EXIT
python3 -c 'import os; fd = os.open("/tmp/nas/ibdata1", os.O_CREAT | os.O_RDWR, 0o644); os.posix_fallocate(fd, 0, 1 << 20)'
mimicfs stats /tmp/nas | head -12
fusermount3 -u /tmp/nas
trap - EXIT
echo "== ctest"
cmake -S downstream -B downstream-build >/dev/null
cmake --build downstream-build >/dev/null
ctest --test-dir downstream-build --output-on-failure --timeout 300
echo "== pytest"
python3 -m venv /ci/venv
/ci/venv/bin/pip install -q ./python pytest
cd downstream && timeout 300 /ci/venv/bin/pytest -q -p no:cacheprovider test_downstream.py
JOB

echo "check-package-install.sh: a Debian 12 root in $work"
# debootstrap's mounts and the root's (fusermount3 needs /dev/fuse and /proc's
# mount table) are the namespace's, and any process a failure leaves (a
# daemon, a hung test) ends with its first one.
if ! unshare --mount --pid --fork --kill-child --propagation private bash -c '
  set -eu
  work=$1 stage=$2 mirror=$3
  if ! debootstrap --variant=minbase bookworm "$work" "$mirror" >"$stage/debootstrap.log" 2>&1; then
    tail -5 "$stage/debootstrap.log" >&2
    echo "check-package-install.sh: debootstrap failed (is $mirror reachable?)" >&2
    exit 1
  fi
  mkdir -p "$work/ci"
  cp -r "$stage/." "$work/ci/"
  cp /etc/resolv.conf "$work/etc/resolv.conf"
  mount -t proc proc "$work/proc"
  mount --rbind /dev "$work/dev"
  mount --rbind /sys "$work/sys"
  mount -t tmpfs tmpfs "$work/tmp"
  env -i HOME=/root TERM="${TERM:-dumb}" PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    timeout 1200 "$(command -v chroot)" "$work" /bin/bash /ci/job.sh' \
    check "$work" "$stage" "$mirror"; then
  echo "check-package-install.sh: FAILED in the fresh root ($((SECONDS - start)) s)" >&2
  exit 1
fi
echo "check-package-install.sh: ok ($((SECONDS - start)) s in the fresh root)"
