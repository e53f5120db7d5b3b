#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian package where no build tree is: a new Debian 12 root
# (debootstrap, minbase) entered with chroot in a mount namespace of its own.
# There it does what a user's CI job does: `apt-get install ./mimicfs_*.deb`,
# `mimicfs mount` and `mimicfs stats` on emulated NFS, then a downstream CTest
# suite (tests/downstream: find_package(mimicfs), ScopedMount) and a pytest
# suite with the `mimicfs_mount` fixture (the Python helper installed with pip
# in a venv, as the README says).
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
      [ $# -ge 2 ] || { echo "check-package-install.sh: $1 needs a value ($usage)" >&2; exit 2; }
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
  "$root/scripts/package.sh"
  deb="$(ls "$root"/build-package/mimicfs_*.deb)"
fi
"$root/scripts/bootstrap.sh" --with debootstrap

start=$SECONDS
work="$(mktemp -d /var/tmp/mimicfs-package-check.XXXXXX)"
cleanup() {
  # The mounts live in the namespace below and went with it; only files remain.
  if [ "$keep" -eq 1 ]; then echo "check-package-install.sh: the root is kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
echo "check-package-install.sh: a Debian 12 root in $work"
debootstrap --variant=minbase bookworm "$work" "$mirror" >"$work.debootstrap.log" 2>&1 || {
  tail -5 "$work.debootstrap.log" >&2; rm -f "$work.debootstrap.log"
  echo "check-package-install.sh: debootstrap failed (is $mirror reachable?)" >&2; exit 1; }
rm -f "$work.debootstrap.log"
# The user's side: the package, and the two example suites. Nothing of the
# source or build tree goes in.
mkdir -p "$work/ci/downstream"
cp "$deb" "$work/ci/"
cp "$root/tests/downstream/CMakeLists.txt" "$root/tests/downstream/uses_scoped_mount.cc" \
  "$root/tests/downstream/test_downstream.py" "$work/ci/downstream/"
cp -r "$root/python" "$work/ci/python"
rm -rf "$work/ci/python/tests"
cp /etc/resolv.conf "$work/etc/resolv.conf"
# The authorities this host trusts besides Debian's (a proxy's) are trusted
# there too, as they would be on a CI runner behind the same proxy.
mkdir -p "$work/usr/local/share/ca-certificates"
cp -r /usr/local/share/ca-certificates/. "$work/usr/local/share/ca-certificates/" 2>/dev/null || true

# In the root, as a CI job would run it. fusermount3 needs /dev/fuse and
# /proc's mount table; both are mounted in the namespace only.
cat >"$work/ci/job.sh" <<EOF
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive PATH=/usr/sbin:/usr/bin:/sbin:/bin
cd /ci
apt-get update -qq
apt-get install -y -qq ./$(basename "$deb") g++ python3-venv ca-certificates >/dev/null
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
ctest --test-dir downstream-build --output-on-failure
echo "== pytest"
python3 -m venv /ci/venv
/ci/venv/bin/pip install -q ./python pytest
cd downstream && /ci/venv/bin/pytest -q -p no:cacheprovider test_downstream.py
EOF
unshare --mount --propagation private --fork bash -c '
  set -e
  mount -t proc proc "$1/proc"
  mount --rbind /dev "$1/dev"
  mount --rbind /sys "$1/sys"
  mount -t tmpfs tmpfs "$1/tmp"
  exec env -i HOME=/root TERM="${TERM:-dumb}" PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    "$(command -v chroot)" "$1" /bin/bash /ci/job.sh' check "$work" || {
  echo "check-package-install.sh: FAILED in the fresh root ($((SECONDS - start)) s)" >&2; exit 1; }
echo "check-package-install.sh: ok ($((SECONDS - start)) s in the fresh root)"
