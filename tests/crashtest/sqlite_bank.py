#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""SQLite under power cuts (mimicfs crashtest).

Each transaction moves money between two accounts and appends its number to a
ledger. After a COMMIT returns, its number is recorded outside the volume
($MIMICFS_CRASHTEST_DIR/acked): SQLite said it is durable. The check: the
database passes integrity_check, the balances still sum to the opening total,
the ledger has no gap, and every acknowledged transaction is in it.

    sqlite_bank.py setup|work|check --journal wal|delete
                   [--synchronous normal|full|extra] [--transactions N]

In DELETE mode a transaction commits by deleting its rollback journal; with
synchronous=FULL the deletion is not fsynced (the directory is not), so a power
cut right after COMMIT can bring the journal back and roll the acknowledged
transaction back. synchronous=EXTRA fsyncs the directory too (SQLite's docs).

The check prints `lost=N`, the acknowledged transactions missing from the
ledger, which `mimicfs crashtest` collects per point. In WAL mode with
synchronous=NORMAL a commit is not fsynced (SQLite's docs: "a transaction
committed in WAL mode with synchronous=NORMAL might roll back following a
power loss"), so a loss there is reported, not a failure; the database must
still be whole.
"""
import argparse
import os
import sqlite3
import sys

ACCOUNTS = 10
OPENING = 100


def connect(args):
    db = sqlite3.connect(os.path.join(os.environ["MIMICFS_MOUNT"], "bank.db"), isolation_level=None)
    db.execute(f"pragma journal_mode={args.journal}")
    db.execute(f"pragma synchronous={args.synchronous}")
    return db


def acked_path():
    return os.path.join(os.environ["MIMICFS_CRASHTEST_DIR"], "acked")


def setup(args):
    db = connect(args)
    db.execute("begin")
    db.execute("create table accounts(id integer primary key, balance integer not null)")
    db.execute("create table ledger(id integer primary key, source int, target int, amount int)")
    db.executemany("insert into accounts values (?, ?)", [(i, OPENING) for i in range(ACCOUNTS)])
    db.execute("commit")
    db.close()


def work(args):
    db = connect(args)
    with open(acked_path(), "a") as acked:
        for t in range(1, args.transactions + 1):
            source, target, amount = t % ACCOUNTS, (t * 7 + 3) % ACCOUNTS, t % 13 + 1
            db.execute("begin")
            db.execute("update accounts set balance = balance - ? where id = ?", (amount, source))
            db.execute("update accounts set balance = balance + ? where id = ?", (amount, target))
            db.execute("insert into ledger values (?, ?, ?, ?)", (t, source, target, amount))
            db.execute("commit")
            acked.write(f"{t}\n")
            acked.flush()


def check(args):
    try:
        with open(acked_path()) as f:
            acked = max((int(line) for line in f if line.strip()), default=0)
    except FileNotFoundError:
        acked = 0
    db = connect(args)
    problems = []
    integrity = db.execute("pragma integrity_check").fetchone()[0]
    if integrity != "ok":
        problems.append(f"integrity_check: {integrity}")
    total = db.execute("select sum(balance) from accounts").fetchone()[0]
    if total != ACCOUNTS * OPENING:
        problems.append(f"balances sum to {total}, not {ACCOUNTS * OPENING}")
    count, last = db.execute("select count(*), coalesce(max(id), 0) from ledger").fetchone()
    if count != last:
        problems.append(f"the ledger has {count} transactions up to {last}: a gap")
    lost = max(0, acked - last)
    loss_allowed = args.journal == "wal" and args.synchronous == "normal"
    if lost and not loss_allowed:
        problems.append(f"transaction {acked} was acknowledged, the ledger ends at {last}")
    for problem in problems:
        print(problem)
    print(f"acknowledged {acked}, ledger {last}: {'ok' if not problems else 'LOST OR BROKEN'}")
    print(f"lost={lost}")
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("step", choices=["setup", "work", "check"])
    parser.add_argument("--journal", choices=["wal", "delete"], default="wal")
    parser.add_argument("--synchronous", choices=["normal", "full", "extra"], default="full")
    parser.add_argument("--transactions", type=int, default=40)
    args = parser.parse_args()
    if args.step == "setup":
        setup(args)
    elif args.step == "work":
        work(args)
    else:
        return check(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
