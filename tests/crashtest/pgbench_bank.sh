#!/usr/bin/env bash
# PostgreSQL under power cuts (mimicfs crashtest): pgbench's TPC-B-like
# transactions on a cluster on the mount; after the crash and recovery the
# accounts, tellers and branches balances and the history's deltas must agree.
#
#   pgbench_bank.sh setup|work|check
#
# The cluster is made once (initdb and pgbench -i -s 1) in a template on the
# host ($PGBENCH_TEMPLATE, default /tmp/mimicfs-pgbench-template) and copied onto
# each fresh volume by `setup`. The server's socket and log go to
# $MIMICFS_CRASHTEST_DIR, outside the volume. Run as root, the server runs as
# the postgres user.
set -euo pipefail
step="$1"
bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
data="$MIMICFS_MOUNT/pg"
run="$MIMICFS_CRASHTEST_DIR"
template="${PGBENCH_TEMPLATE:-/tmp/mimicfs-pgbench-template}"
chmod 777 "$run"

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
    head -1 "$data/postmaster.pid" > "$run/postmaster"  # read now: after a crash it cannot be
    status=0
    as_postgres "$bin/pgbench" -h "$run" -U postgres -n -c 2 -j 2 -t 150 postgres \
      >/dev/null 2>&1 || status=$?
    # A clean stop when the volume still answers; after a power cut the server is
    # gone or dying (it PANICs on a failed write or fsync): end it.
    if ! stop "$data" fast 2>/dev/null; then
      kill -9 "$(cat "$run/postmaster")" 2>/dev/null || true
      while kill -0 "$(cat "$run/postmaster")" 2>/dev/null; do sleep 0.1; done
      sleep 0.5  # its backends notice the postmaster's death
    fi
    exit "$status"
    ;;
  check)
    start "$data" || { echo "the server did not start after the crash:"; tail -5 "$run/server.log"; exit 1; }
    sums=$(as_postgres "$bin/psql" -h "$run" -U postgres -At -d postgres -c "
      select (select sum(abalance) from pgbench_accounts) || ' ' ||
             (select sum(tbalance) from pgbench_tellers) || ' ' ||
             (select sum(bbalance) from pgbench_branches) || ' ' ||
             (select coalesce(sum(delta), 0) from pgbench_history) || ' ' ||
             (select count(*) from pgbench_history)")
    stop "$data" fast
    read -r accounts tellers branches history transactions <<<"$sums"
    echo "accounts $accounts, tellers $tellers, branches $branches, history $history ($transactions transactions)"
    [ "$accounts" = "$tellers" ] && [ "$tellers" = "$branches" ] && [ "$branches" = "$history" ]
    ;;
  *)
    echo "pgbench_bank.sh: unknown step \"$step\" (setup, work or check)" >&2
    exit 2
    ;;
esac
