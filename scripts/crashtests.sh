#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Power cuts at many points of real software (issue 12), with `mimicfs crashtest`:
#   - SQLite (Python's sqlite3) in WAL mode with synchronous=FULL and in DELETE
#     mode with synchronous=EXTRA: no acknowledged transaction lost at any point,
#     integrity_check ok, the balances intact (tests/crashtest/sqlite_bank.py);
#     DELETE mode with synchronous=FULL must be caught losing one (its journal's
#     deletion is not durable: SQLite documents EXTRA for this); WAL with
#     synchronous=NORMAL keeps its integrity and reports what it lost per point;
#   - PostgreSQL (Debian's, pgbench -c 2 -t 150 on a scale-1 cluster): after
#     recovery the accounts, tellers, branches and history sums agree
#     (tests/crashtest/pgbench_bank.sh);
#   - MariaDB (Debian's 10.11) with torn writes (--writeback 0.5): with its
#     doublewrite buffer every point recovers whole
#     (tests/crashtest/mariadb_bank.sh); without it the run must fail;
#   - a log that renames segments into place: with its directory fsync it passes;
#     without it (the deliberate bug) the crash test must find lost segments
#     (tests/crashtest/log_segments.py).
# Exits non-zero when a check fails that must pass, or the bug is not found.
#
#   scripts/crashtests.sh [--points N] [--seed S]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
points=50
seed=1
while [ $# -gt 0 ]; do
  case "$1" in
    --points) points="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    *) echo "crashtests: unknown argument \"$1\" (usage: crashtests.sh [--points N] [--seed S])" >&2; exit 2 ;;
  esac
done
"$root/scripts/bootstrap.sh" --with python3 postgresql mariadb-server
"$root/scripts/build.sh" >/dev/null
mimicfs="$root/build/cli/mimicfs"
t="$(printf %q "$root/tests/crashtest")"  # quoted for the sh -c command lines

for profile in ext4 btrfs; do
  for mode in "--journal wal --synchronous full" "--journal delete --synchronous extra"; do
    echo "== SQLite, $mode, on $profile"
    "$mimicfs" crashtest --profile "$profile" --points "$points" --seed "$seed" \
      --setup "python3 $t/sqlite_bank.py setup $mode" \
      --workload "python3 $t/sqlite_bank.py work $mode" \
      --check "python3 $t/sqlite_bank.py check $mode"
  done
done

# WAL with synchronous=NORMAL may lose its last transactions at a power cut
# (SQLite documents it) but never its integrity: the checker's lost=N, a
# number per point, is summed up (the loss is reported, not a failure).
echo "== SQLite, --journal wal --synchronous normal, on ext4: the loss per point"
"$mimicfs" crashtest --profile ext4 --points 20 --seed "$seed" \
  --setup "python3 $t/sqlite_bank.py setup --journal wal --synchronous normal" \
  --workload "python3 $t/sqlite_bank.py work --journal wal --synchronous normal" \
  --check "python3 $t/sqlite_bank.py check --journal wal --synchronous normal"

echo "== SQLite, WAL, on nfs, the server restarting at each point"
"$mimicfs" crashtest --profile nfs --event server-restart --points 10 --seed "$seed" \
  --setup "python3 $t/sqlite_bank.py setup --journal wal --synchronous full" \
  --workload "python3 $t/sqlite_bank.py work --journal wal --synchronous full" \
  --check "python3 $t/sqlite_bank.py check --journal wal --synchronous full"

echo "== PostgreSQL pgbench on ext4"
"$mimicfs" crashtest --profile ext4 --points "$points" --seed "$seed" \
  --setup "$t/pgbench_bank.sh setup" --workload "$t/pgbench_bank.sh work" \
  --check "$t/pgbench_bank.sh check"

# Torn pages: at each cut half the 4 KiB units of the data pages in flight
# persist (--writeback 0.5). InnoDB's doublewrite buffer repairs them.
echo "== MariaDB, torn writes, doublewrite on, on ext4"
"$mimicfs" crashtest --profile ext4 --points 12 --seed "$seed" --writeback 0.5 \
  --op 'write|fsync' --path '/mysql/*' \
  --setup "$t/mariadb_bank.sh setup" --workload "$t/mariadb_bank.sh work" \
  --check "$t/mariadb_bank.sh check"

echo "== log segments renamed into place, directory fsynced, on btrfs"
"$mimicfs" crashtest --profile btrfs --points 20 --seed "$seed" \
  --workload "python3 $t/log_segments.py work" --check "python3 $t/log_segments.py check"

# Must fail: crashtest exits 1. $1: what, $2: profile, then the crashtest options.
must_be_caught() {
  local what="$1" profile="$2" status=0 out kept
  shift 2
  echo "== $what, on $profile: must be caught"
  out="$(mktemp)"
  "$mimicfs" crashtest --profile "$profile" --points 20 --seed "$seed" "$@" >"$out" 2>&1 || status=$?
  grep -E "^crashtest: [0-9]+ points" "$out" || cat "$out"
  # The logs it kept of the failed points: the failures were the point here.
  kept="$(grep -o '/tmp/mimicfs-crashtest\.[A-Za-z0-9]*' "$out" | head -1 || true)"
  [ -z "$kept" ] || rm -rf "$kept"
  rm -f "$out"
  if [ "$status" -ne 1 ]; then
    echo "crashtests: $what was not caught on $profile (status $status)" >&2
    exit 1
  fi
}
for profile in btrfs ext4; do
  must_be_caught "log segments without the directory fsync" "$profile" \
    --workload "python3 $t/log_segments.py work --no-dir-fsync" \
    --check "python3 $t/log_segments.py check"
done
# Without it recovery meets a torn page it cannot repair, and the server
# does not start (or a page's contents are wrong).
DOUBLEWRITE=0 must_be_caught "MariaDB, torn writes, doublewrite off" ext4 --writeback 0.5 \
  --op 'write|fsync' --path '/mysql/*' \
  --setup "$t/mariadb_bank.sh setup" --workload "$t/mariadb_bank.sh work" \
  --check "$t/mariadb_bank.sh check"
mode="--journal delete --synchronous full"
must_be_caught "SQLite, $mode (the journal's deletion not durable)" ext4 \
  --setup "python3 $t/sqlite_bank.py setup $mode" \
  --workload "python3 $t/sqlite_bank.py work $mode" \
  --check "python3 $t/sqlite_bank.py check $mode"
echo "crashtests: ok"
