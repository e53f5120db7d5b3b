#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Log segments written as temporary files and renamed into place (mimicfs crashtest).

Each segment is written to seg.N.tmp, fsynced and renamed to seg.N; then its
number is recorded as durable outside the volume ($MIMICFS_CRASHTEST_DIR/acked).
With --no-dir-fsync the directory is never fsynced: the rename is not durable
until something else commits it, the bug the crash test must find (on btrfs at
once, whose fsync of a file commits only that file's names; on ext4 and xfs
only until the next fsync commits the journal). The check: every acknowledged
segment is there, whole.

    log_segments.py work|check [--no-dir-fsync] [--segments N]
"""
import argparse
import os
import sys


def acked_path():
    return os.path.join(os.environ["MIMICFS_CRASHTEST_DIR"], "acked")


def contents(n):
    return f"segment {n}\n".encode() * 64


def work(args):
    mount = os.environ["MIMICFS_MOUNT"]
    directory = os.open(mount, os.O_RDONLY | os.O_DIRECTORY)
    with open(acked_path(), "a") as acked:
        for n in range(1, args.segments + 1):
            temporary = os.path.join(mount, f"seg.{n}.tmp")
            fd = os.open(temporary, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            os.write(fd, contents(n))
            os.fsync(fd)
            os.close(fd)
            os.rename(temporary, os.path.join(mount, f"seg.{n}"))
            if not args.no_dir_fsync:
                os.fsync(directory)
            acked.write(f"{n}\n")
            acked.flush()


def check(args):
    try:
        with open(acked_path()) as f:
            acked = [int(line) for line in f if line.strip()]
    except FileNotFoundError:
        acked = []
    missing = []
    for n in acked:
        try:
            with open(os.path.join(os.environ["MIMICFS_MOUNT"], f"seg.{n}"), "rb") as f:
                if f.read() != contents(n):
                    missing.append(f"seg.{n} (damaged)")
        except FileNotFoundError:
            missing.append(f"seg.{n}")
    print(f"acknowledged {len(acked)} segments; " +
          ("all there" if not missing else "LOST: " + ", ".join(missing)))
    return 1 if missing else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("step", choices=["work", "check"])
    parser.add_argument("--no-dir-fsync", action="store_true")
    parser.add_argument("--segments", type=int, default=20)
    args = parser.parse_args()
    return work(args) if args.step == "work" else check(args)


if __name__ == "__main__":
    sys.exit(main())
