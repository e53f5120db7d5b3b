#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# PostgreSQL under power cuts (mimicfs crashtest): pgbench's TPC-B-like
# transactions on a cluster on the mount; after the crash and recovery the
# accounts, tellers and branches balances and the history's deltas must agree.
#
#   pgbench_bank.sh setup|work|check
#
# The cluster is made once (initdb and pgbench -i -s 1) in a template on the
# host ($PGBENCH_TEMPLATE, default /tmp/mimicfs-pgbench-template) and copied onto
# each fresh volume by `setup`. The server's socket and log go to a directory
# of its own in $MIMICFS_CRASHTEST_DIR, outside the volume; the postmaster's
# PID stays in $MIMICFS_CRASHTEST_DIR itself, which only its owner can write.
# Run as root, the server runs as the postgres user.
set -euo pipefail
step="$1"
bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
data="$MIMICFS_MOUNT/pg"
pidfile="$MIMICFS_CRASHTEST_DIR/postmaster"
run="$MIMICFS_CRASHTEST_DIR/server"
template="${PGBENCH_TEMPLATE:-/tmp/mimicfs-pgbench-template}"
mkdir -p "$run"
if [ "$(id -u)" -eq 0 ]; then chown postgres: "$run"; fi
chmod 700 "$run"

as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
start() {  # $1: the data directory
  as_postgres "$bin/pg_ctl" -D "$1" -l "$run/server.log" -w -t 120 \
    -o "-k $run -c listen_addresses='' -c fsync=on -c full_page_writes=on" start >/dev/null
}
stop() {  # $1: the data directory; $2: fast or immediate
  as_postgres "$bin/pg_ctl" -D "$1" -m "$2" -w stop >/dev/null
}

case "$step" in
  setup)
    if [ ! -f "$template/PG_VERSION" ]; then
      rm -rf "$template.new" && mkdir -p "$template.new"
      [ "$(id -u)" -ne 0 ] || chown postgres: "$template.new"
      as_postgres "$bin/initdb" -D "$template.new" -A trust -U postgres >/dev/null
      start "$template.new"
      as_postgres "$bin/pgbench" -h "$run" -U postgres -i -s 1 -q postgres >/dev/null 2>&1
      stop "$template.new" fast
      mv "$template.new" "$template"
    fi
    cp -a "$template" "$data"
    ;;
  work)
    start "$data"
    head -1 "$data/postmaster.pid" > "$pidfile"  # read now: after a crash it cannot be
    status=0
    as_postgres "$bin/pgbench" -h "$run" -U postgres -n -c 2 -j 2 -t 150 postgres \
      >/dev/null 2>&1 || status=$?
    # A clean stop when the volume still answers; after a power cut the server is
    # gone or dying (it PANICs on a failed write or fsync): end it.
    if ! stop "$data" fast 2>/dev/null; then
      pid="$(cat "$pidfile")"
      [[ "$pid" =~ ^[1-9][0-9]*$ ]] || { echo "no postmaster PID in $pidfile" >&2; exit 1; }
      # The postmaster leads its own session (pg_ctl starts it so): end it and its backends.
      pkill -9 -s "$pid" 2>/dev/null || true
      while pgrep -s "$pid" >/dev/null; do sleep 0.1; done
    fi
    exit "$status"
    ;;
  check)
    start "$data" || { echo "the server did not start after the crash:"; tail -5 "$run/server.log"; exit 1; }
    trap 'stop "$data" immediate 2>/dev/null || true' EXIT
    sums=$(as_postgres "$bin/psql" -h "$run" -U postgres -At -d postgres -c "
      select (select count(*) from pgbench_accounts) || ' ' ||
             (select count(*) from pgbench_tellers) || ' ' ||
             (select count(*) from pgbench_branches) || ' ' ||
             (select coalesce(sum(abalance), 0) from pgbench_accounts) || ' ' ||
             (select coalesce(sum(tbalance), 0) from pgbench_tellers) || ' ' ||
             (select coalesce(sum(bbalance), 0) from pgbench_branches) || ' ' ||
             (select coalesce(sum(delta), 0) from pgbench_history) || ' ' ||
             (select count(*) from pgbench_history)")
    stop "$data" fast
    trap - EXIT
    read -r n_accounts n_tellers n_branches accounts tellers branches history transactions <<<"$sums"
    echo "accounts $accounts, tellers $tellers, branches $branches, history $history ($transactions transactions)"
    # Scale 1: 100000 accounts, 10 tellers, 1 branch; the four sums agree.
    [ "$n_accounts" = 100000 ] && [ "$n_tellers" = 10 ] && [ "$n_branches" = 1 ] &&
      [ -n "$accounts" ] && [ "$accounts" = "$tellers" ] && [ "$tellers" = "$branches" ] &&
      [ "$branches" = "$history" ]
    ;;
  *)
    echo "pgbench_bank.sh: unknown step \"$step\" (setup, work or check)" >&2
    exit 2
    ;;
esac
