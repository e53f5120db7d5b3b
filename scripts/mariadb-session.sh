#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One MariaDB session on $MIMICFS_MOUNT (run by scripts/mariadb-on-mimicfs.sh
# through `mimicfs run`): a private mariadbd with its datadir on the mount runs
# seed 000's case scaled down (a ROW_FORMAT=COMPRESSED table, rows inserted, then
# ALTER TABLE ... ADD COLUMN), or, with WORKLOAD=drop, creates and drops a
# PAGE_COMPRESSED table (seed 004); WORKLOAD=drop_plain the same table
# uncompressed; WORKLOAD=drop_database_held drops a database while another
# process holds one of its files open. The operation counters are reset once
# the server is up, so the stats are the workload's own.
set -euo pipefail
: "${MIMICFS_MOUNT:?run me through mimicfs run}"
workload=${WORKLOAD:-alter}
rows=${ROWS:-20000}
mimicfs=${MIMICFS:-mimicfs}
datadir="$MIMICFS_MOUNT/mysql"
run=$(mktemp -d /tmp/mimicfs-mariadb.XXXXXX)
socket="$run/mysqld.sock"

mariadb-install-db --no-defaults --datadir="$datadir" --user=root --skip-test-db \
  --auth-root-authentication-method=normal >"$run/install.log" 2>&1 ||
  { cat "$run/install.log" >&2; exit 1; }
mariadbd --no-defaults --datadir="$datadir" --user=root --socket="$socket" --skip-networking \
  --pid-file="$run/mysqld.pid" --log-error="$run/error.log" --innodb-use-native-aio=0 \
  --innodb-buffer-pool-size=64M --innodb-log-file-size=16M --innodb-page-size=16k &
server=$!
stop() {
  mariadb-admin --no-defaults --socket="$socket" -uroot shutdown >/dev/null 2>&1 || kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  rm -rf "$run"
}
trap stop EXIT
ready=no
for _ in $(seq 300); do
  mariadb-admin --no-defaults --socket="$socket" -uroot ping >/dev/null 2>&1 && { ready=yes; break; }
  kill -0 "$server" 2>/dev/null || { cat "$run/error.log" >&2; exit 1; }
  sleep 0.2
done
[ $ready = yes ] || { echo "mariadb-session.sh: mariadbd not ready after 60 s" >&2; tail -5 "$run/error.log" >&2; exit 1; }
sql() { mariadb --no-defaults --socket="$socket" -uroot -e "$1"; }
"$mimicfs" ctl "$MIMICFS_MOUNT" reset

case $workload in
  alter)
    sql "CREATE DATABASE seed000;
         CREATE TABLE seed000.t (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(255))
           ENGINE=InnoDB ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8;
         INSERT INTO seed000.t (v) SELECT REPEAT(MD5(seq), 7) FROM seed000.seq_1_to_${rows};
         ALTER TABLE seed000.t ADD COLUMN w INT;"
    ;;
  drop|drop_plain)
    # The same table with and without page compression: its punched holes are
    # what DROP has to free (seed 004).
    compression=$([ $workload = drop ] && echo "PAGE_COMPRESSED=1" || echo "")
    sql "CREATE DATABASE seed004;
         CREATE TABLE seed004.t (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(255))
           ENGINE=InnoDB $compression;
         INSERT INTO seed004.t (v) SELECT REPEAT('a', 200) FROM seed004.seq_1_to_${rows};"
    sql "FLUSH TABLES seed004.t FOR EXPORT; UNLOCK TABLES;"
    "$mimicfs" ctl "$MIMICFS_MOUNT" reset
    sql "DROP TABLE seed004.t;"
    ;;
  drop_database_held)
    # DROP DATABASE while another process on this mount (a backup, a tail)
    # holds a table's file open: on NFS the client silly-renames the file and
    # the server's rmdir of the database directory fails. RESULT gets the
    # statement's outcome and the names left in the directory.
    sql "CREATE DATABASE held;
         CREATE TABLE held.t (id INT PRIMARY KEY) ENGINE=InnoDB;
         INSERT INTO held.t VALUES (1);"
    exec 7<"$datadir/held/t.ibd"
    outcome=ok
    if ! output=$(sql "DROP DATABASE held;" 2>&1); then
      outcome=$(grep -o 'errno: [0-9]*' <<<"$output" || echo failed)
    fi
    left=$({ ls -A "$datadir/held" 2>/dev/null || true; } | tr '\n' ' ')
    exec 7<&-
    printf 'drop=%s\nleft=%s\n' "$outcome" "${left:--}" >"${RESULT:-/dev/stdout}"
    ;;
  *) echo "mariadb-session.sh: unknown WORKLOAD $workload (alter, drop, drop_plain, drop_database_held)" >&2; exit 2 ;;
esac
