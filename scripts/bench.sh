#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Benchmarks mimicfs (profiles ideal and nfs) beside its peers in the same run:
# a tmpfs, and libfuse's own passthrough_ll example (as Debian's libfuse3-dev ships
# it, built here) over a directory of that tmpfs, once as Debian builds it (no
# xattrs) and once with -o xattr, which serves xattrs as mimicfs must, and so
# pays the kernel's getxattr("security.capability") before each write (mimicfs
# asks the kernel not to: docs/architecture.md, "What the kernel caches").
# Needs root (it mounts). Figures are medians of interleaved rounds; no figure is
# ever a pass or a fail.
#
#   scripts/bench.sh [--rounds N] [--only PARTS] [--transactions T] [--extents N]
#                    [--io-uring on|off] [--halt-poll-ns NS] [--memory]
#                    [--data-dir-gib G] [--json]
#
# FUSE over io_uring (fusefs/fuse_ring.h): with --io-uring on (the default where
# the kernel has it) the script sets the module parameter fuse.enable_uring=Y
# for the run (and puts it back after) and adds mimicfs-ideal-ring, ideal
# mounted --io-uring on (what a mount takes by default where the kernel offers
# the ring), beside mimicfs ideal and nfs, mounted --io-uring off to serve
# /dev/fuse (as a mount does where the kernel has no ring). passthrough_ll
# (libfuse 3.14) has no ring.
#
# Every request is a round trip between the caller's thread and a daemon
# thread, and in a virtual machine a round trip that crosses CPUs wakes the
# other vCPU from halt when the guest does not poll before halting. The header
# prints the guest's cpuidle driver and its haltpoll setting; figures taken
# with guest_halt_poll_ns 0 and 200000 differ 2x (docs/performance.md).
# --halt-poll-ns NS sets /sys/module/haltpoll/parameters/guest_halt_poll_ns
# for the run and puts it back after (only where the guest has haltpoll).
#
# PARTS, comma-separated (default all): io, pgbench, stats, extents, commit.
#   io       the workloads (tests/bench/mimicfs_bench.cc) on every target, N
#            rounds (default 5), with % of tmpfs and the ratios of mimicfs to both
#            passthrough_ll runs, and mimicfs-nfs-b, a second NFS client of the
#            nfs mount's server (mount --client-of; the first idle meanwhile),
#            with its ratio to mimicfs-nfs; then each mimicfs daemon's RSS before the
#            workloads (at mount), warm (after one round of them on the mimicfs
#            mounts alone, run first, its files deleted), at the peak of the N
#            rounds, and after they deleted their files; each time once `ctl
#            sync` committed the deletions.
#   pgbench  PostgreSQL (Debian's, installed if missing): pgbench -i -s 10 on
#            tmpfs, mimicfs ideal and mimicfs nfs, then T transactions (default
#            4000, 2 clients) per target per round, rounds interleaved; median TPS.
#   stats    MOUNT/.mimicfs/stats.json read back to back on an nfs volume holding
#            N extents (default 1000000) while a writer runs
#            (tests/bench/stats_read_bench.cc), run twice; the daemon's RSS
#            before, warm (after the first run deleted its files), at the
#            peak of the second and after it.
#   extents  the engine alone (tests/bench/extent_scaling_bench.cc): heap bytes
#            per extent and per inode, operations on a file of 10k, 100k and 1M
#            extents with the growth of each, and 10M extents in one volume.
#   commit   a small-file writer (create, 4 KiB, fsync, close) alone, then while
#            100000 removals are pending and a directory fsync commits them
#            (tests/bench/commit_stall_bench.cc): its median and worst
#            operation, and the committing fsync's time, on tmpfs and mimicfs
#            btrfs, ext4 and xfs (mounted with durability.commit_interval_ns=0,
#            so the periodic commit does not take the removals first).
# --memory   afterwards streams MEMORY_GIB (default 64) GiB of zeros into the
#            ideal mount and prints the daemon's peak RSS; stopped when the RSS
#            passes MEMORY_LIMIT_MIB (default: half of MemAvailable).
# --data-dir-gib G  afterwards writes G GiB of non-zero data (cat of a 64 MiB
#            random file, 128 KiB writes) into an nfs mount with --data-dir under
#            $TMPDIR (a disk, not tmpfs), in files of 4 GiB of which the oldest
#            is removed (and `ctl sync`ed) once 9 exist, so the host needs 36
#            GiB; then min(G, 8) GiB into the ideal mount, whose contents are in
#            memory. Prints each daemon's peak RSS and the host bytes at the peak.
# --json     the io part as JSON (mimicfs_bench --json); the rest stays text.
# JOBS=N     build with N parallel jobs; BUILD_DIR=DIR builds and runs from DIR.
#
# Every mount and directory is removed on exit, on failure and on Ctrl-C.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

die() {
  echo "bench.sh: $*" >&2
  exit 2
}

rounds=5
parts="io,pgbench,stats,extents,commit"
transactions=4000
extents=1000000
memory=0
data_dir_gib=0
json=0
uring_parameter=/sys/module/fuse/parameters/enable_uring
halt_poll_parameter=/sys/module/haltpoll/parameters/guest_halt_poll_ns
halt_poll_ns=""
halt_poll_before=""
io_uring=off
[[ -f "$uring_parameter" ]] && io_uring=on
while (($#)); do
  case "$1" in
    --rounds) rounds="${2:?--rounds needs N}"; shift ;;
    --only) parts="${2:?--only needs PARTS}"; shift ;;
    --transactions) transactions="${2:?--transactions needs T}"; shift ;;
    --extents) extents="${2:?--extents needs N}"; shift ;;
    --memory) memory=1 ;;
    --data-dir-gib) data_dir_gib="${2:?--data-dir-gib needs G}"; shift ;;
    --json) json=1 ;;
    --io-uring) io_uring="${2:?--io-uring needs on or off}"; shift ;;
    --halt-poll-ns) halt_poll_ns="${2:?--halt-poll-ns needs NS}"; shift ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds needs a positive whole number, got '$rounds'"
[[ "$transactions" =~ ^[1-9][0-9]*$ ]] || die "--transactions needs a positive whole number"
[[ "$extents" =~ ^[1-9][0-9]*$ ]] || die "--extents needs a positive whole number"
[[ "$data_dir_gib" =~ ^[0-9]+$ ]] || die "--data-dir-gib needs a whole number of GiB"
[[ "$io_uring" == on || "$io_uring" == off ]] || die "--io-uring needs on or off, got '$io_uring'"
[[ "$io_uring" == off || -f "$uring_parameter" ]] ||
  die "--io-uring on: this kernel has no FUSE over io_uring ($uring_parameter)"
if [[ -n "$halt_poll_ns" ]]; then
  [[ "$halt_poll_ns" =~ ^[0-9]+$ ]] || die "--halt-poll-ns needs a whole number of ns, got '$halt_poll_ns'"
  [[ -f "$halt_poll_parameter" ]] ||
    die "--halt-poll-ns: this machine has no guest halt polling ($halt_poll_parameter)"
fi
for part in ${parts//,/ }; do
  case "$part" in
    io | pgbench | stats | extents | commit) ;;
    *) die "--only: unknown part '$part' (io, pgbench, stats, extents, commit)" ;;
  esac
done
wants() { [[ ",$parts," == *",$1,"* ]]; }
memory_gib="${MEMORY_GIB:-64}"
build="${BUILD_DIR:-build}"
[[ "$(id -u)" -eq 0 ]] || die "needs root: it mounts a tmpfs and FUSE filesystems"

# --- build -----------------------------------------------------------------------
if wants pgbench; then
  "$root/scripts/bootstrap.sh" --with postgresql >&2
else
  "$root/scripts/bootstrap.sh" >&2
fi
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
elif grep -q '^MIMICFS_BUILD_TESTS:BOOL=OFF' "$build/CMakeCache.txt"; then
  echo "bench.sh: $build/ was configured without tests; turning MIMICFS_BUILD_TESTS on" >&2
  cmake -S . -B "$build" -DMIMICFS_BUILD_TESTS=ON >&2
fi
# Build output goes to stderr: stdout is only the figures.
cmake --build "$build" --target mimicfs mimicfs_bench mimicfs_stats_bench mimicfs_extent_bench \
  mimicfs_commit_bench \
  ${JOBS:+--parallel "$JOBS"} >&2
mimicfs="$(realpath "$build/cli/mimicfs")"
bench="$(realpath "$build/tests/mimicfs_bench")"
stats_bench="$(realpath "$build/tests/mimicfs_stats_bench")"
extent_bench="$(realpath "$build/tests/mimicfs_extent_bench")"
commit_bench="$(realpath "$build/tests/mimicfs_commit_bench")"

# libfuse's example as Debian ships it, built as its Makefile would (-O2).
example=/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c
[[ -f "$example" ]] || die "$example is missing (libfuse3-dev ships it)"
passthrough="$(realpath "$build")/peers/passthrough_ll"
if [[ ! -x "$passthrough" || "$example" -nt "$passthrough" ]]; then
  mkdir -p "$(dirname "$passthrough")"
  # shellcheck disable=SC2046  # pkg-config prints several words
  cc -O2 -Wall -o "$passthrough" "$example" $(pkg-config --cflags --libs fuse3) >&2
fi

# --- mounts, always undone ---------------------------------------------------------
work=""
uring_before=""
fuse_mounts=()
servers=()

is_mounted() {
  awk -v dir="$1" '$5 == dir { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# shellcheck disable=SC2317  # reached from the EXIT trap
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

# shellcheck disable=SC2317  # reached from the EXIT trap
cleanup() {
  local status=$? dir data
  set +e
  trap - INT TERM
  for data in "${servers[@]}"; do
    runuser -u postgres -- "$pg_bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1
  done
  for dir in "${fuse_mounts[@]}"; do
    is_mounted "$dir" && unmount_fuse "$dir"
  done
  [[ -n "$uring_before" ]] && echo "$uring_before" >"$uring_parameter"
  [[ -n "$halt_poll_before" ]] && echo "$halt_poll_before" >"$halt_poll_parameter"
  if [[ -n "$work" ]]; then
    is_mounted "$work/tmpfs" && { umount "$work/tmpfs" || umount -l "$work/tmpfs"; }
    rm -rf "$work"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

work="$(mktemp -d "${TMPDIR:-/tmp}/mimicfs-bench.XXXXXX")"
chmod 755 "$work"
mkdir "$work/tmpfs" "$work/passthrough_ll" "$work/passthrough_ll-xattr" "$work/ideal" "$work/nfs" \
  "$work/nfs-b" \
  "$work/ideal-ring" \
  "$work/nfs-data-dir" "$work/data"
mount -t tmpfs -o size=6g tmpfs "$work/tmpfs"
mkdir "$work/tmpfs/ref" "$work/tmpfs/pt" "$work/tmpfs/ptx"
chmod 1777 "$work/tmpfs/ref"

mount_passthrough() { # $1: mountpoint, $2: source, $3...: more -o options
  local dir=$1 source=$2 options="source=$2"
  shift 2
  for o in "$@"; do options+=",$o"; done
  "$passthrough" -o "$options" "$dir"
  fuse_mounts+=("$dir")
  is_mounted "$dir" || die "passthrough_ll did not mount $dir"
}
mount_mimicfs() { # $1: profile, $2: mountpoint, $3...: more mount options
  "$mimicfs" mount --profile "$1" "${@:3}" "$2"
  fuse_mounts+=("$2")
  is_mounted "$2" || die "mimicfs mount returned but $2 is not mounted"
  chmod 1777 "$2"
}

# The daemon serving $1: the one process that has /dev/fuse open and names $1 as
# an argument (the mountpoints are fresh mktemp directories).
daemon_pid() {
  local dir=$1 proc fd found=()
  for proc in /proc/[0-9]*; do
    tr '\0' '\n' 2>/dev/null <"$proc/cmdline" | grep -Fxq -- "$dir" || continue
    for fd in "$proc"/fd/*; do
      if [[ "$(readlink "$fd" 2>/dev/null)" == /dev/fuse ]]; then
        found+=("${proc#/proc/}")
        break
      fi
    done
  done
  ((${#found[@]} == 1)) || { echo "bench.sh: expected one daemon for $dir, found ${#found[@]}" >&2; return 1; }
  echo "${found[0]}"
}

# A /proc/PID/status field's number (VmRSS and VmHWM in KiB, Threads).
status_kib() {
  awk -v key="$2:" '$1 == key { print $2; found = 1 } END { exit !found }' "/proc/$1/status"
}

mib() { echo "$(($1 / 1024)) MiB"; }
mib1() { awk -v kib="$1" 'BEGIN { printf "%.1f MiB", kib / 1024 }'; }

# RSS before, at the peak and 3 s after a command and `ctl sync`, for the daemons of
# the given mountpoints: `with_rss "DIR..." COMMAND...`. The peak is VmHWM after a
# reset (clear_refs 5); where the reset is refused, the daemon's peak since it started.
# With the array warm_up set to a command (one round of the same workloads), it runs
# first, and the RSS once it has deleted its files (`ctl sync`, 3 s) is printed as
# `warm`: the level a daemon comes back to once its code has run and its threads
# have started, which `after` is then measured against.
rss_lines=()
warm_up=()
with_rss() {
  local dirs=($1) pids=() before=() warm=() warm_kib=() pid i status=0
  shift
  for i in "${!dirs[@]}"; do
    pid="$(daemon_pid "${dirs[$i]}")"
    pids+=("$pid")
    before+=("$(memory_of "$pid")")
  done
  if ((${#warm_up[@]})); then
    "${warm_up[@]}" >/dev/null || status=$?
    settle_daemons "${dirs[@]}" || status=1
    for pid in "${pids[@]}"; do
      warm_kib+=("$(status_kib "$pid" VmRSS)")
      warm+=("   warm $(memory_of "$pid")")
    done
  fi
  for pid in "${pids[@]}"; do echo 5 2>/dev/null >"/proc/$pid/clear_refs" || true; done
  "$@" || status=$?
  settle_daemons "${dirs[@]}" || status=1
  for i in "${!dirs[@]}"; do
    pid="${pids[$i]}"
    rss_lines+=("$(printf '%-12s before %s%s   peak %s   after %s%s   (%s)' \
      "$(basename "${dirs[$i]}")" "${before[$i]}" "${warm[$i]:-}" \
      "$(mib "$(status_kib "$pid" VmHWM)")" "$(memory_of "$pid")" \
      "${warm_kib[$i]:+$(awk -v a="$(status_kib "$pid" VmRSS)" -v w="${warm_kib[$i]}" \
        'BEGIN { printf ", %.2fx warm", a / w }')}" "$label")")
  done
  return "$status"
}

# A daemon's memory now: VmRSS (RssAnon, threads).
memory_of() {
  printf '%s (anon %s, %s threads)' "$(mib1 "$(status_kib "$1" VmRSS)")" \
    "$(mib1 "$(status_kib "$1" RssAnon)")" "$(status_kib "$1" Threads)"
}

# After a workload deleted its files: commits the deletions and lets the daemons
# give memory back.
settle_daemons() {
  local dir status=0
  # An unlink frees the file for good when it commits, as on a real filesystem
  # (ideal commits only on a sync, and a crash before it brings the file back).
  # `ctl sync`: sync(1) inside a FUSE mount reaches no daemon (docs/stats.md).
  for dir in "$@"; do "$mimicfs" ctl "$dir" sync || status=1; done
  # The daemon gives malloc's free memory back within 2 s once it is quiet
  # (fusefs/heap_trimmer.h).
  sleep 3
  return "$status"
}

mount_passthrough "$work/passthrough_ll" "$work/tmpfs/pt"
mount_passthrough "$work/passthrough_ll-xattr" "$work/tmpfs/ptx" xattr
if [[ "$io_uring" == on ]]; then
  uring_before="$(cat "$uring_parameter")"
  echo Y >"$uring_parameter"
fi
if [[ -n "$halt_poll_ns" ]]; then
  halt_poll_before="$(cat "$halt_poll_parameter")"
  echo "$halt_poll_ns" >"$halt_poll_parameter"
fi
mount_mimicfs ideal "$work/ideal" --io-uring off
mount_mimicfs nfs "$work/nfs" --io-uring off
# A second client of the nfs mount's server, served by the same daemon; its
# workloads run in a directory of their own.
"$mimicfs" mount --client-of "$work/nfs" "$work/nfs-b"
fuse_mounts+=("$work/nfs-b")
is_mounted "$work/nfs-b" || die "mimicfs mount --client-of returned but $work/nfs-b is not mounted"
mkdir "$work/nfs-b/b" && chmod 1777 "$work/nfs-b/b"
# The ideal profile over FUSE io_uring, beside /dev/fuse.
ring=()
if [[ "$io_uring" == on ]]; then
  mount_mimicfs ideal "$work/ideal-ring" --io-uring on
  ring=(mimicfs-ideal-ring="$work/ideal-ring")
fi

build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")"
echo "bench.sh: mimicfs over /dev/fuse$([[ "$io_uring" == on ]] && echo "; mimicfs-ideal-ring over FUSE io_uring (fuse.enable_uring=Y)")"
echo "bench.sh: mimicfs $(git describe --always --dirty 2>/dev/null || echo '?')," \
  "build type ${build_type:-unset (RelWithDebInfo)}; libfuse $(pkg-config --modversion fuse3)," \
  "kernel $(uname -r), $(nproc) CPUs, $rounds rounds"
idle="cpuidle driver $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)"
if [[ -f "$halt_poll_parameter" ]]; then
  idle+=", guest_halt_poll_ns $(cat "$halt_poll_parameter")"
  if [[ "$(cat "$halt_poll_parameter")" == 0 ]]; then idle+=" (an idle vCPU halts at once)"; fi
fi
echo "bench.sh: $idle"
status=0

# --- io ------------------------------------------------------------------------------
if wants io; then
  echo
  bench_args=(--repetitions "$rounds")
  ((json)) && bench_args+=(--json)
  label="io workloads"
  # One round of every workload on the mimicfs mounts first: the `warm` RSS.
  warm_up=("$bench" --repetitions 1 mimicfs-ideal="$work/ideal" mimicfs-nfs="$work/nfs"
    mimicfs-nfs-b="$work/nfs-b/b" "${ring[@]}")
  with_rss "$work/ideal $work/nfs${ring:+ $work/ideal-ring}" \
    "$bench" "${bench_args[@]}" \
    --ratio mimicfs-ideal/passthrough_ll-xattr --ratio mimicfs-nfs/passthrough_ll-xattr \
    --ratio mimicfs-ideal/passthrough_ll --ratio mimicfs-nfs/passthrough_ll \
    --ratio mimicfs-nfs-b/mimicfs-nfs \
    ${ring:+--ratio mimicfs-ideal-ring/passthrough_ll-xattr --ratio mimicfs-ideal-ring/mimicfs-ideal} \
    tmpfs="$work/tmpfs/ref" passthrough_ll="$work/passthrough_ll" \
    passthrough_ll-xattr="$work/passthrough_ll-xattr" \
    mimicfs-ideal="$work/ideal" mimicfs-nfs="$work/nfs" mimicfs-nfs-b="$work/nfs-b/b" \
    "${ring[@]}" || status=$?
  warm_up=()
  ((status <= 1)) || exit "$status"
fi

# --- pgbench ----------------------------------------------------------------------------
pg_bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
as_postgres() { runuser -u postgres -- "$@"; }
if wants pgbench; then
  echo
  [[ -n "$pg_bin" ]] || die "no PostgreSQL server in /usr/lib/postgresql"
  pg_labels=(tmpfs mimicfs-ideal mimicfs-nfs)
  pg_dirs=("$work/tmpfs/ref" "$work/ideal" "$work/nfs")
  if ((${#ring[@]})); then
    pg_labels+=(mimicfs-ideal-ring)
    pg_dirs+=("$work/ideal-ring")
  fi
  declare -A tps_samples=()
  for i in "${!pg_labels[@]}"; do
    data="${pg_dirs[$i]}/pgbench"
    sock="$work/socket-$i"
    mkdir "$data" "$sock"
    chown postgres: "$data" "$sock"
    chmod 700 "$data"
    as_postgres "$pg_bin/initdb" -D "$data" -A trust -U postgres >/dev/null
    as_postgres "$pg_bin/pg_ctl" -D "$data" -l "$sock/server.log" -w -t 300 \
      -o "-k $sock -c listen_addresses=''" start >/dev/null
    servers+=("$data")
    start=$(date +%s.%N)
    as_postgres "$pg_bin/pgbench" -h "$sock" -U postgres -i -s 10 -q postgres >/dev/null 2>&1 ||
      die "pgbench -i failed on ${pg_labels[$i]} (see $sock/server.log)"
    printf 'bench.sh: pgbench -i -s 10 on %s: %.1f s\n' "${pg_labels[$i]}" \
      "$(echo "$(date +%s.%N) - $start" | bc)" >&2
  done
  for ((round = 0; round < rounds; round++)); do
    progress="pgbench $((round + 1))/$rounds:"
    for ((k = 0; k < ${#pg_labels[@]}; k++)); do
      i=$(((k + round) % ${#pg_labels[@]}))
      out="$(as_postgres "$pg_bin/pgbench" -h "$work/socket-$i" -U postgres -n -c 2 -j 2 \
        -t "$((transactions / 2))" postgres 2>&1)" || die "pgbench failed on ${pg_labels[$i]}: $out"
      tps="$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' <<<"$out")"
      [[ -n "$tps" ]] || die "no TPS in pgbench's output on ${pg_labels[$i]}: $out"
      tps_samples[$i]+=" $tps"
      progress+=" ${pg_labels[$i]} $tps"
    done
    echo "$progress" >&2
  done
  median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  echo "pgbench: TPC-B-like, scale 10, $transactions transactions on 2 clients per round, median of $rounds rounds"
  reference="$(median <<<"${tps_samples[0]}")"
  for i in "${!pg_labels[@]}"; do
    m="$(median <<<"${tps_samples[$i]}")"
    printf '  %-18s %8.0f TPS  %6.1f%% of tmpfs   (rounds:%s)\n' "${pg_labels[$i]}" "$m" \
      "$(echo "100 * $m / $reference" | bc -l)" "${tps_samples[$i]}"
  done
  for data in "${servers[@]}"; do
    as_postgres "$pg_bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
    rm -rf "$data"
  done
  servers=()
fi

# --- stats ------------------------------------------------------------------------------
if wants stats; then
  echo
  label="stats read, $extents extents"
  warm_up=("$stats_bench" --extents "$extents" "$work/nfs")  # the same part once before
  with_rss "$work/nfs" "$stats_bench" --extents "$extents" "$work/nfs" || status=1
  warm_up=()
fi

# --- extents ---------------------------------------------------------------------------
if wants extents; then
  echo
  "$extent_bench" || status=1
fi

# --- commit ----------------------------------------------------------------------------
if wants commit; then
  echo
  commit_targets=(tmpfs="$work/tmpfs/ref")
  for profile in btrfs ext4 xfs; do
    mkdir "$work/commit-$profile"
    mount_mimicfs "$profile" "$work/commit-$profile" --set durability.commit_interval_ns=0
    commit_targets+=(mimicfs-"$profile"="$work/commit-$profile")
  done
  "$commit_bench" --removals 100000 "${commit_targets[@]}" || status=1
fi

# --- memory (zeros) -------------------------------------------------------------------------
if ((memory)); then
  echo
  pid="$(daemon_pid "$work/ideal")"
  limit_mib="${MEMORY_LIMIT_MIB:-$(($(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo) / 2048))}"
  echo 5 2>/dev/null >"/proc/$pid/clear_refs" || true
  rss_before="$(status_kib "$pid" VmRSS)"
  echo "bench.sh: --memory: ${memory_gib} GiB of zeros into $work/ideal, stopping above ${limit_mib} MiB" >&2
  "$bench" --repetitions 1 --only zeros --zeros-gib "$memory_gib" mimicfs-ideal="$work/ideal" >/dev/null &
  bench_pid=$!
  over_limit=0
  while kill -0 "$bench_pid" 2>/dev/null; do
    rss="$(status_kib "$pid" VmRSS)" || die "the mimicfs daemon (PID $pid) exited during the run"
    if ((rss > limit_mib * 1024)); then
      echo "bench.sh: daemon RSS $((rss / 1024)) MiB passed ${limit_mib} MiB; stopping" >&2
      over_limit=1
      kill -TERM "$bench_pid"
      break
    fi
    sleep 0.2
  done
  wait "$bench_pid" || ((over_limit)) || status=1
  echo "zeros: ${memory_gib} GiB into mimicfs-ideal: RSS before $(mib "$rss_before")," \
    "peak $(mib "$(status_kib "$pid" VmHWM)"), after $(mib "$(status_kib "$pid" VmRSS)")"
  ((over_limit)) && status=1
fi

# --- data directory -----------------------------------------------------------------
# Writes $2 GiB of non-zero data into mountpoint $1 in 4 GiB files, the oldest
# removed and synced away once 8 are kept, sampling the daemon's RSS and the
# bytes under $work/data (when $4 is set); prints one line.
fill_and_watch() {
  local dir=$1 gib=$2 pid file_gib=4 files=() written=0 peak_host=0 host n i
  pid="$(daemon_pid "$dir")"
  echo 5 2>/dev/null >"/proc/$pid/clear_refs" || true
  local rss_before
  rss_before="$(status_kib "$pid" VmRSS)"
  while ((written < gib)); do
    n=$((gib - written < file_gib ? gib - written : file_gib))
    files+=("$dir/fill.${#files[@]}")
    for ((i = 0; i < n * 16; i++)); do cat "$work/tmpfs/pattern"; done >"${files[-1]}"
    written=$((written + n))
    if ((${#files[@]} > 8)); then
      rm -f "${files[-9]}"
      "$mimicfs" ctl "$dir" sync
    fi
    host="$(du -sk "$work/data" | cut -f1)"
    ((host > peak_host)) && peak_host=$host
    status_kib "$pid" VmRSS >/dev/null || die "the mimicfs daemon (PID $pid) exited during the run"
  done
  echo "$3: ${gib} GiB written: daemon RSS before $(mib "$rss_before")," \
    "peak $(mib "$(status_kib "$pid" VmHWM)"), at the end" \
    "$(mib "$(status_kib "$pid" VmRSS)")${4:+; data directory at its peak $(mib "$peak_host")}"
  rm -f "$dir"/fill.*
  "$mimicfs" ctl "$dir" sync
}
if ((data_dir_gib > 0)); then
  echo
  head -c $((64 << 20)) /dev/urandom >"$work/tmpfs/pattern"
  mount_mimicfs nfs "$work/nfs-data-dir" --data-dir "$work/data"
  echo "bench.sh: --data-dir-gib: ${data_dir_gib} GiB into $work/nfs-data-dir (contents in $work/data)" >&2
  fill_and_watch "$work/nfs-data-dir" "$data_dir_gib" "nfs --data-dir" host
  fill_and_watch "$work/ideal" "$((data_dir_gib < 8 ? data_dir_gib : 8))" "ideal (in memory)"
fi

if ((${#rss_lines[@]})); then
  echo
  echo "daemon RSS (VmRSS at mount; warm: after one round of the part run first; VmHWM during the part;"
  echo "after: 3 s after the part and 'ctl sync', against warm: what the part kept;"
  echo "anon: RssAnon, the daemon's own memory; the rest is its code and libraries as far as they were run;"
  echo "threads: its threads then, each with its buffers and malloc caches):"
  printf '  %s\n' "${rss_lines[@]}"
fi
exit "$status"
