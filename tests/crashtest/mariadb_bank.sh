#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# MariaDB under power cuts (mimicfs crashtest): transfers between accounts in
# InnoDB, each with a ledger row; after the crash the server must recover, the
# balances still sum to the opening total, the ledger has no gap, and every
# transaction a COMMIT acknowledged is in it.
#
#   mariadb_bank.sh setup|work|check
#
# DOUBLEWRITE=0 turns InnoDB's doublewrite buffer off (default 1). Under
# `crashtest --writeback P` a power cut tears the data pages in flight (part
# of a 16 KiB page's 4 KiB units persist): without the doublewrite buffer
# recovery finds a page it cannot repair and the server does not start.
# The data directory is made once (mariadb-install-db and the bank's tables)
# in a template on the host ($MARIADB_TEMPLATE, default
# /tmp/mimicfs-mariadb-template) and copied onto each fresh volume by
# `setup`. The server's socket and log go to $MIMICFS_CRASHTEST_DIR, outside
# the volume. Data files are O_DIRECT with a small buffer pool whose page
# cleaner flushes all the time, so pages are written during the workload.
set -euo pipefail
step="$1"
data="$MIMICFS_MOUNT/mysql"
run="$MIMICFS_CRASHTEST_DIR/server"
template="${MARIADB_TEMPLATE:-/tmp/mimicfs-mariadb-template}"
accounts=2000
opening=100
transactions="${TRANSACTIONS:-300}"
mkdir -p "$run"

start() {  # $1: the data directory. Waits until it answers; 1 when it stopped instead.
  mariadbd --no-defaults --datadir="$1" --user=root --socket="$run/sock" --skip-networking \
    --pid-file="$run/pid" --log-error="$run/error.log" --innodb-use-native-aio=0 \
    --innodb-buffer-pool-size=8M --innodb-log-file-size=16M --innodb-page-size=16k \
    --innodb-flush-method=O_DIRECT --innodb-doublewrite="${DOUBLEWRITE:-1}" \
    --innodb-max-dirty-pages-pct=0 --innodb-max-dirty-pages-pct-lwm=0.001 \
    --innodb-flush-log-at-trx-commit=1 &
  local server=$!
  echo "$server" > "$run/server.pid"
  for _ in $(seq 600); do
    mariadb-admin --no-defaults --socket="$run/sock" -uroot ping >/dev/null 2>&1 && return 0
    kill -0 "$server" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
stop() {
  mariadb-admin --no-defaults --socket="$run/sock" -uroot shutdown >/dev/null 2>&1 ||
    kill -9 "$(cat "$run/server.pid")" 2>/dev/null || true
  while kill -0 "$(cat "$run/server.pid")" 2>/dev/null; do sleep 0.1; done
}
sql() { mariadb --no-defaults --socket="$run/sock" -uroot -N -B "$@"; }

case "$step" in
  setup)
    if [ ! -d "$template/bank" ]; then
      rm -rf "$template.new" && mkdir -p "$template.new"
      mariadb-install-db --no-defaults --datadir="$template.new" --user=root --skip-test-db \
        --auth-root-authentication-method=normal >"$run/install.log" 2>&1 ||
        { cat "$run/install.log" >&2; exit 1; }
      start "$template.new" || { tail -5 "$run/error.log" >&2; exit 1; }
      trap stop EXIT
      sql -e "create database bank; use bank;
        create table bank.accounts(id int primary key, balance int not null,
                                   pad char(200) not null default '') engine=innodb;
        create table bank.ledger(id int primary key, source int, target int, amount int)
          engine=innodb;
        insert into bank.accounts(id, balance) select seq, $opening from seq_1_to_$accounts;"
      stop
      trap - EXIT
      mv "$template.new" "$template"
    fi
    cp -a "$template" "$data"
    ;;
  work)
    start "$data" || { tail -5 "$run/error.log" >&2; exit 1; }
    # One session; after each COMMIT it prints the transaction's number, which
    # is recorded as acknowledged (--unbuffered: as soon as it returns).
    for t in $(seq "$transactions"); do
      source=$(( (t * 7919) % accounts + 1 )); target=$(( (t * 104729 + 13) % accounts + 1 ))
      amount=$(( t % 13 + 1 ))
      echo "begin;
        update bank.accounts set balance = balance - $amount where id = $source;
        update bank.accounts set balance = balance + $amount where id = $target;
        insert into bank.ledger values ($t, $source, $target, $amount);
        commit; select $t;"
    done | sql --unbuffered >> "$MIMICFS_CRASHTEST_DIR/acked" 2>/dev/null || true
    stop
    ;;
  check)
    start "$data" || { echo "the server did not recover:"; grep -m 5 -i "error" "$run/error.log"; exit 1; }
    trap stop EXIT
    read -r total count last < <(sql -e "select (select sum(balance) from bank.accounts),
      (select count(*) from bank.ledger), (select coalesce(max(id), 0) from bank.ledger)")
    acked=$(tail -1 "$MIMICFS_CRASHTEST_DIR/acked" 2>/dev/null || echo 0)
    acked=${acked:-0}
    status=0
    [ "$total" -eq $((accounts * opening)) ] || { echo "balances sum to $total"; status=1; }
    [ "$count" -eq "$last" ] || { echo "the ledger has $count transactions up to $last: a gap"; status=1; }
    [ "$last" -ge "$acked" ] || { echo "transaction $acked was acknowledged, the ledger ends at $last"; status=1; }
    echo "acknowledged $acked, ledger $last"
    exit "$status"
    ;;
  *) echo "mariadb_bank.sh: setup, work or check" >&2; exit 2 ;;
esac
