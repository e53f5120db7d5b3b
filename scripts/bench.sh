#!/usr/bin/env bash
# Benchmarks mimicfs (profile ideal) against a tmpfs in the same run; see
# tests/bench/mimicfs_bench.cc for the workloads. Needs root (it mounts).
#
#   scripts/bench.sh [--memory] [mimicfs_bench options, e.g. --repetitions 3 --json]
#
# --memory  afterwards streams MEMORY_GIB (default 64) GiB of zeros into the mimicfs
#           mount alone and prints the daemon's peak RSS. The run is stopped when the
#           RSS passes MEMORY_LIMIT_MIB (default: half of MemAvailable), so a store
#           that keeps zeros cannot take the machine down.
# JOBS=N    build with N parallel jobs (default: ninja's choice).
# BUILD_DIR=DIR  build and run from DIR instead of build/.
#
# Both mounts and their directories are removed on exit, on failure and on Ctrl-C.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

die() {
  echo "bench.sh: $*" >&2
  exit 2
}

memory=0
bench_args=()
for arg in "$@"; do
  case "$arg" in
    --memory) memory=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *) bench_args+=("$arg") ;;
  esac
done
memory_gib="${MEMORY_GIB:-64}"
build="${BUILD_DIR:-build}"
[[ "$(id -u)" -eq 0 ]] || die "needs root: it mounts a tmpfs and a FUSE filesystem"

# --- build -----------------------------------------------------------------------
"$root/scripts/bootstrap.sh" >&2
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
elif grep -q '^MIMICFS_BUILD_TESTS:BOOL=OFF' "$build/CMakeCache.txt"; then
  # The benchmark is built with the tests; an existing build/ may have them off.
  echo "bench.sh: $build/ was configured without tests; turning MIMICFS_BUILD_TESTS on" >&2
  cmake -S . -B "$build" -DMIMICFS_BUILD_TESTS=ON >&2
fi
# Build output goes to stderr: stdout is only the benchmark's table (or JSON).
cmake --build "$build" --target mimicfs mimicfs_bench ${JOBS:+--parallel "$JOBS"} >&2
mimicfs="$(realpath "$build/fusefs/mimicfs")"
bench="$(realpath "$build/tests/mimicfs_bench")"

# --- mounts, always undone ---------------------------------------------------------
ref_dir=""
mnt_dir=""
bench_pid=""

# Reads /proc/self/mountinfo rather than stat-ing the directory: a FUSE mount whose
# daemon died fails every stat (ENOTCONN) but still has to be unmounted.
is_mounted() {
  awk -v dir="$1" '$5 == dir { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# shellcheck disable=SC2317  # reached only from the EXIT trap
unmount_fuse() {
  local dir=$1 _
  for _ in 1 2 3 4 5; do
    fusermount3 -u "$dir" 2>/dev/null && return 0
    is_mounted "$dir" || return 0
    sleep 1
  done
  echo "bench.sh: $dir still busy, detaching it (fusermount3 -u -z)" >&2
  fusermount3 -u -z "$dir"
}

# shellcheck disable=SC2317  # reached only from the EXIT trap
cleanup() {
  local status=$?
  set +e
  trap - INT TERM
  if [[ -n "$bench_pid" ]] && kill -0 "$bench_pid" 2>/dev/null; then
    kill -TERM "$bench_pid"
    wait "$bench_pid"
  fi
  if [[ -n "$mnt_dir" ]]; then
    is_mounted "$mnt_dir" && unmount_fuse "$mnt_dir"
    rmdir "$mnt_dir"
  fi
  if [[ -n "$ref_dir" ]]; then
    is_mounted "$ref_dir" && { umount "$ref_dir" || umount -l "$ref_dir"; }
    rmdir "$ref_dir"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ref_dir="$(mktemp -d "${TMPDIR:-/tmp}/mimicfs-bench-tmpfs.XXXXXX")"
mnt_dir="$(mktemp -d "${TMPDIR:-/tmp}/mimicfs-bench-mnt.XXXXXX")"
mount -t tmpfs -o size=2g tmpfs "$ref_dir"
"$mimicfs" mount --profile ideal "$mnt_dir" # returns once the mount is in place
is_mounted "$mnt_dir" || die "mimicfs mount returned but $mnt_dir is not mounted"

build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")"
echo "bench.sh: mimicfs $(git describe --always --dirty 2>/dev/null || echo '?')," \
  "build type ${build_type:-unset (the project default, RelWithDebInfo)}, kernel $(uname -r), $(nproc) CPUs" >&2

status=0
"$bench" tmpfs="$ref_dir" mimicfs-ideal="$mnt_dir" "${bench_args[@]}" || status=$?
((status <= 1)) || exit "$status" # 2: bad arguments, >128: a signal

# --- --memory ----------------------------------------------------------------------

# The daemon serving $1: the one process that has /dev/fuse open and names $1 as an
# argument. The mountpoint is a fresh mktemp directory, so no other process can
# match, whatever the daemon's other arguments or how it forked.
daemon_pid() {
  local dir=$1 proc fd found=()
  for proc in /proc/[0-9]*; do
    tr '\0' '\n' <"$proc/cmdline" 2>/dev/null | grep -Fxq -- "$dir" || continue
    for fd in "$proc"/fd/*; do
      if [[ "$(readlink "$fd" 2>/dev/null)" == /dev/fuse ]]; then
        found+=("${proc#/proc/}")
        break
      fi
    done
  done
  if ((${#found[@]} != 1)); then
    echo "bench.sh: expected one process serving $dir, found ${#found[@]}: ${found[*]}" >&2
    return 1
  fi
  echo "${found[0]}"
}

# A /proc/PID/status field in KiB (VmRSS, VmHWM); fails when the process is gone.
status_kib() {
  awk -v key="$2:" '$1 == key { print $2; found = 1 } END { exit !found }' "/proc/$1/status"
}

if ((memory)); then
  pid="$(daemon_pid "$mnt_dir")"
  limit_mib="${MEMORY_LIMIT_MIB:-$(($(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo) / 2048))}"
  # Writing 5 to clear_refs resets VmHWM to the current RSS, so the peak below is
  # this run's, not the first run's.
  hwm_scope="since the reset before this run"
  echo 5 2>/dev/null >"/proc/$pid/clear_refs" || hwm_scope="over the daemon's whole life"
  rss_before="$(status_kib "$pid" VmRSS)"
  echo >&2
  echo "bench.sh: --memory: ${memory_gib} GiB of zeros into $mnt_dir, daemon PID $pid," \
    "RSS $((rss_before / 1024)) MiB, stopping above ${limit_mib} MiB" >&2

  "$bench" --repetitions 1 --only zeros --zeros-gib "$memory_gib" mimicfs-ideal="$mnt_dir" &
  bench_pid=$!
  peak_kib="$rss_before"
  over_limit=0
  while kill -0 "$bench_pid" 2>/dev/null; do
    rss="$(status_kib "$pid" VmRSS)" || die "the mimicfs daemon (PID $pid) exited during the run"
    ((rss > peak_kib)) && peak_kib=$rss
    if ((rss > limit_mib * 1024)); then
      echo "bench.sh: daemon RSS $((rss / 1024)) MiB passed the ${limit_mib} MiB limit;" \
        "stopping the run (does the store keep zeros?)" >&2
      over_limit=1
      kill -TERM "$bench_pid"
      break
    fi
    sleep 0.2
  done
  memory_status=0
  wait "$bench_pid" || memory_status=$?
  bench_pid=""
  hwm_kib="$(status_kib "$pid" VmHWM)"
  rss_after="$(status_kib "$pid" VmRSS)"
  ((hwm_kib > peak_kib)) && peak_kib=$hwm_kib
  written="${memory_gib} GiB of zeros written"
  ((over_limit)) && written="stopped at the limit before ${memory_gib} GiB"
  echo "mimicfs daemon peak RSS: $((peak_kib / 1024)) MiB" \
    "(VmHWM $((hwm_kib / 1024)) MiB $hwm_scope; RSS before $((rss_before / 1024)) MiB," \
    "after $((rss_after / 1024)) MiB; $written)"
  if ((over_limit)); then
    status=1
  elif ((memory_status != 0)); then
    status=$memory_status
  fi
fi
exit "$status"
