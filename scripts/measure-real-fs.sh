#!/usr/bin/env bash
# Measures seed 003 and seed 004 on REAL ext4, xfs, xfs -o allocsize=4k and btrfs,
# each on a fresh loop device, so the built-in profiles can be checked against
# the kernel they imitate (docs/profiles.md quotes the figures). Needs root and
# loop devices; installs xfsprogs and btrfs-progs if missing. Takes 5-15 minutes
# (btrfs with 4 writers is slow). Everything it mounts and attaches is removed on
# exit, on failure and on Ctrl-C.
#
#   sudo scripts/measure-real-fs.sh [RUNS]      # RUNS per case, default 3
set -euo pipefail

runs=${1:-3}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "measure-real-fs.sh: RUNS must be a positive number" >&2; exit 2; }
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
        line+=" [$counts]"
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
  printf "  %-6s st_blocks*512=%d fiemap_records=%d filefrag=%s device_used_after_write_and_punch=%d\n" "$fs" \
    $(( $(stat -c %b "$work/mnt/t1.ibd") * 512 )) \
    "$(filefrag -v "$work/mnt/t1.ibd" | grep -cE '^ *[0-9]+:')" "$(extents "$work/mnt/t1.ibd")" \
    $(( after - before ))
done
