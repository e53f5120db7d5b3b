#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Measures seed 003's and seed 004's layouts, and the time of seed 001's growth,
# seed 004's drop and O_SYNC writers, on REAL ext4, xfs, xfs -o allocsize=4k and
# btrfs, each on a fresh 4 GiB loop device, so the built-in profiles can be checked
# against the kernel they imitate (docs/profiles.md quotes the figures). Needs root and
# loop devices; installs xfsprogs and btrfs-progs if missing. Takes 5-15 minutes
# (btrfs with 4 writers is slow). Everything it mounts and attaches is removed on
# exit, on failure and on Ctrl-C.
#
# With --json FILE it also writes the figures as JSON, which scripts/fidelity.sh
# puts beside the emulated profiles' (docs/profiles.md, "Fidelity").
#
# With --only layout or --only time it measures one half: the extent layouts
# (seeds 003 and 004) or the times (about 3 minutes).
#
#   sudo scripts/measure-real-fs.sh [RUNS] [--json FILE] [--only layout|time]   # RUNS per case, default 3
set -euo pipefail

runs=3
json=""
only=""
while [ $# -gt 0 ]; do
  case $1 in
    --json) [ $# -ge 2 ] || { echo "measure-real-fs.sh: --json needs a FILE" >&2; exit 2; }
            json=$2; shift 2 ;;
    --only) [ $# -ge 2 ] && [[ $2 =~ ^(layout|time)$ ]] ||
              { echo "measure-real-fs.sh: --only needs layout or time" >&2; exit 2; }
            only=$2; shift 2 ;;
    *) runs=$1; shift ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "measure-real-fs.sh: RUNS must be a positive number" >&2; exit 2; }
if [ -n "$json" ]; then
  : > "$json" 2>/dev/null || { echo "measure-real-fs.sh: cannot write $json" >&2; exit 2; }
fi
[ "$(id -u)" = 0 ] || { echo "measure-real-fs.sh: needs root (it makes loop devices)" >&2; exit 2; }
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh" --with xfsprogs btrfs-progs e2fsprogs

work=$(mktemp -d /tmp/mimicfs-realfs.XXXXXX)
loop=""
cleanup() {
  mountpoint -q "$work/mnt" 2>/dev/null && umount "$work/mnt"
  [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# The workloads (workloads/seed_workloads.h, the ones the emulated profiles run):
# N processes start together and each writes a 128 MiB file of zeros in 32 KiB
# O_SYNC writes, optionally after fallocate(KEEP_SIZE) of it all (seed 003); or a
# 64 MiB file whose 16 KiB pages lose their last 8 KiB to PUNCH_HOLE (seed 004).
# Built in the scratch directory: nothing root-owned is left in the checkout.
cmake -S "$root" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" --target mimicfs-workload >/dev/null
workload="$work/build/tools/mimicfs-workload"
mkdir "$work/mnt"

fresh() {  # fresh FS [MOUNT OPTIONS]
  [ -n "$loop" ] && { umount "$work/mnt"; losetup -d "$loop"; }
  rm -f "$work/image" && truncate -s 4G "$work/image"
  loop=$(losetup --find --show "$work/image")
  case $1 in
    ext4) mkfs.ext4 -q -F "$loop" ;;
    xfs) mkfs.xfs -q -f "$loop" ;;
    btrfs) mkfs.btrfs -q -f "$loop" >/dev/null ;;
  esac
  mount ${2:+-o "$2"} "$loop" "$work/mnt"
}

extents() { filefrag "$1" | grep -oE '[0-9]+ extents? found' | cut -d' ' -f1; }
# The AG of an xfs file's first block (xfs_bmap -v's AG column; the first record
# that is not a hole; awk reads it all: an early exit would kill xfs_bmap with SIGPIPE).
first_ag() { xfs_bmap -v "$1" | awk 'NR > 2 && $3 != "hole" && !found { print $4; found = 1 }'; }

rows=()
if [ "$only" != time ]; then
echo "seed 003: extents per 128 MiB file (each line one run; filefrag's count)"
for fs in ext4 xfs xfs:allocsize=4k btrfs; do
  fresh "${fs%%:*}" "$([[ $fs == *:* ]] && echo "${fs#*:}")"
  for reserve in 0 1; do
    for writers in 2 4; do
      line=""
      for run in $(seq "$runs"); do
        rm -f "$work"/mnt/datafile*; sync
        "$workload" concurrent "$work/mnt" --writers "$writers" $([ "$reserve" = 1 ] && echo --reserve); sync
        counts=$(for i in $(seq 0 $((writers - 1))); do extents "$work/mnt/datafile$i"; done | paste -sd,)
        groups=""
        if [[ $fs == xfs* ]]; then
          groups=$(for i in $(seq 0 $((writers - 1))); do first_ag "$work/mnt/datafile$i"; done | paste -sd,)
          groups=", \"groups\": [$groups]"
        fi
        line+=" [$counts]"
        rows+=("{\"seed\": \"003\", \"fs\": \"$fs\", \"writers\": $writers, \"reserve\": $reserve, \"run\": $run, \"extents\": [$counts]$groups}")
      done
      printf '  %-18s writers=%d reserved=%d:%s\n' "$fs" "$writers" "$reserve" "$line"
    done
  done
done

echo "seed 004: 64 MiB of 16 KiB pages, last 8 KiB of each punched"
for fs in ext4 xfs btrfs; do
  fresh "$fs"
  sync; before=$(df -B1 --output=used "$work/mnt" | tail -1)
  "$workload" punch "$work/mnt/t1.ibd"; sync
  [ "$fs" = btrfs ] && btrfs filesystem sync "$work/mnt" >/dev/null
  after=$(df -B1 --output=used "$work/mnt" | tail -1)
  allocated=$(( $(stat -c %b "$work/mnt/t1.ibd") * 512 ))
  records=$(filefrag -v "$work/mnt/t1.ibd" | grep -cE '^ *[0-9]+:')
  fragments=$(extents "$work/mnt/t1.ibd")
  printf "  %-6s st_blocks*512=%d fiemap_records=%d filefrag=%s device_used_after_write_and_punch=%d\n" "$fs" \
    "$allocated" "$records" "$fragments" $(( after - before ))
  rows+=("{\"seed\": \"004\", \"fs\": \"$fs\", \"allocated_bytes\": $allocated, \"fiemap_records\": $records, \"fragments\": $fragments, \"device_used_bytes\": $(( after - before ))}")
done
fi

# Time, in wall-clock seconds on the loop device (the host's storage, not a
# SATA SSD: only ratios carry over): seed 001's 2000 pages grown one per fsync
# or 128 per fsync; seed 004's drop of a 64 MiB file written plain or punched,
# with a cold cache, as the unlink and the sync after it; 32 MiB per writer in
# 32 KiB O_SYNC writes with 1, 2 and 4 writers; and per call (mimicfs-workload
# call): a punch of 8 KiB of a written 64 MiB file's 16 KiB pages (4096 calls),
# a fallocate of one 16 KiB page (4096 calls), a 16 KiB page overwritten and
# fdatasync'ed (512 calls).
seconds() {  # seconds COMMAND...: its wall time, its output dropped
  local t0 t1
  t0=$(date +%s%N); "$@" >/dev/null || return 1; t1=$(date +%s%N)
  awk -v ns=$(( t1 - t0 )) 'BEGIN { printf "%.4f", ns / 1e9 }'
}
per_call() {  # per_call CALLS COMMAND...: its wall time over CALLS, in seconds
  local t0 t1
  t0=$(date +%s%N); "${@:2}" >/dev/null || return 1; t1=$(date +%s%N)
  awk -v ns=$(( t1 - t0 )) -v calls="$1" 'BEGIN { printf "%.9f", ns / calls / 1e9 }'
}
echo "time: seconds (grow 1/128 pages per fsync; drop plain/punched: unlink+sync; O_SYNC writers 1/2/4;"
echo "      per call, microseconds: punch, fallocate, overwrite+fdatasync)"
if [ "$only" != layout ]; then
for fs in ext4 xfs btrfs; do
  # The profiles emulate an SSD. A loop device says it is rotational, and btrfs
  # then runs in non-SSD mode, where a log sync that finds several tasks logging
  # at once sleeps a jiffy to batch them: four O_SYNC writers took 14 s instead
  # of 1.6 s. -o ssd is what btrfs picks on a SATA SSD by itself.
  fresh "$fs" "$([ "$fs" = btrfs ] && echo ssd)"
  line=""
  for run in $(seq "$runs"); do
    grow1=$(seconds "$workload" grow "$work/mnt/g1" --pages 2000 --per-extension 1)
    grow128=$(seconds "$workload" grow "$work/mnt/g128" --pages 2000 --per-extension 128)
    rm -f "$work/mnt/g1" "$work/mnt/g128"
    "$workload" extend "$work/mnt/plain" --how zeros
    "$workload" punch "$work/mnt/punched"
    sync; echo 3 > /proc/sys/vm/drop_caches
    plain_rm=$(seconds rm "$work/mnt/plain"); plain_sync=$(seconds sync)
    punched_rm=$(seconds rm "$work/mnt/punched"); punched_sync=$(seconds sync)
    writers=()
    for n in 1 2 4; do
      writers+=("$(seconds "$workload" concurrent "$work/mnt" --writers "$n" --size-mib 32)")
      rm -f "$work"/mnt/datafile*; sync
    done
    "$workload" extend "$work/mnt/punched" --how zeros
    "$workload" extend "$work/mnt/overwritten" --how zeros; sync
    punch=$(per_call 4096 "$workload" call punch "$work/mnt/punched")
    falloc=$(per_call 4096 "$workload" call fallocate "$work/mnt/fallocated")
    sync
    overwrite=$(per_call 512 "$workload" call overwrite "$work/mnt/overwritten")
    rm -f "$work/mnt/punched" "$work/mnt/overwritten" "$work/mnt/fallocated"; sync
    calls=$(awk -v p="$punch" -v f="$falloc" -v o="$overwrite" 'BEGIN { printf "%.1f/%.1f/%.1f", p * 1e6, f * 1e6, o * 1e6 }')
    line+=" [$grow1/$grow128 $plain_rm+$plain_sync/$punched_rm+$punched_sync ${writers[*]} $calls]"
    rows+=("{\"seed\": \"time\", \"fs\": \"$fs\", \"run\": $run, \"grow_1_per_fsync_s\": $grow1, \"grow_128_per_fsync_s\": $grow128, \"drop_plain_unlink_s\": $plain_rm, \"drop_plain_sync_s\": $plain_sync, \"drop_punched_unlink_s\": $punched_rm, \"drop_punched_sync_s\": $punched_sync, \"osync_writers_s\": [${writers[0]}, ${writers[1]}, ${writers[2]}], \"punch_call_s\": $punch, \"fallocate_call_s\": $falloc, \"overwrite_fdatasync_call_s\": $overwrite}")
  done
  printf '  %-6s%s\n' "$fs" "$line"
done
fi

if [ -n "$json" ]; then
  {
    printf '{"kernel": "%s", "device_bytes": 4294967296, "rows": [\n' "$(uname -r)"
    for i in "${!rows[@]}"; do
      printf '  %s%s\n' "${rows[$i]}" "$([ "$i" -lt $(( ${#rows[@]} - 1 )) ] && echo ,)"
    done
    printf ']}\n'
  } > "$json"
  echo "measure-real-fs.sh: wrote $json"
fi
