#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Real filesystems beside the emulated profiles, row by row.

Reads what `scripts/measure-real-fs.sh --json REAL.json` measured on loop
devices, runs the same workloads in the same order on the matching built-in
profiles (a volume of the same size, made fresh where the real script made a
fresh filesystem), and prints one table: real, emulated, their ratio and
whether it is within 2x. Run through scripts/fidelity.sh, which builds first.

With --json FILE the emulated figures are also written to FILE (with --label
saying what produced them, e.g. a commit); with --before FILE an earlier such
file is shown beside them, row by row: the before/after columns.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

# measure-real-fs.sh's filesystem names -> (profile, --set overrides)
PROFILES = {
    "ext4": ("ext4", []),
    "xfs": ("xfs", []),
    "xfs:allocsize=4k": ("xfs", ["allocation.speculative_preallocation=false"]),
    "btrfs": ("btrfs", []),
}

# The seed 003 sequence on one volume, as measure-real-fs.sh runs it: each line
# of $PLAN is "reserve writers run"; files of the run before are deleted first.
SEED003 = r"""
set -eu
m=$MIMICFS_MOUNT
while read -r reserve writers run; do
  rm -f "$m"/datafile*; sync
  if [ "$reserve" = 1 ]; then "$WORKLOAD" concurrent "$m" --writers "$writers" --reserve
  else "$WORKLOAD" concurrent "$m" --writers "$writers"; fi
  sync
  counts=$(for i in $(seq 0 $((writers - 1))); do
    getfattr --only-values -n user.mimicfs.fragments "$m/datafile$i"; echo; done | paste -sd,)
  groups=$(for i in $(seq 0 $((writers - 1))); do
    getfattr --only-values -n user.mimicfs.first_group "$m/datafile$i"; echo; done | paste -sd,)
  echo "$reserve $writers $run $counts $groups"
done <<< "$PLAN"
"""

SEED004 = r"""
set -eu
m=$MIMICFS_MOUNT
sync; before=$(df -B1 --output=used "$m" | tail -1)
"$WORKLOAD" punch "$m/t1.ibd"; sync
after=$(df -B1 --output=used "$m" | tail -1)
echo "$(( $(stat -c %b "$m/t1.ibd") * 512 ))" \
  "$(getfattr --only-values -n user.mimicfs.extents "$m/t1.ibd")" \
  "$(getfattr --only-values -n user.mimicfs.fragments "$m/t1.ibd")" "$(( after - before ))"
"""


# Shell prelude: now() prints the emulated time so far, the clock plus the
# background reclaim queued (xfs: deferred.task_ns), in nanoseconds.
EMULATED_NOW = r"""
set -eu
m=$MIMICFS_MOUNT
now() { python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(d["clock"]["emulated_ns"] + d.get("deferred", {}).get("task_ns", 0))' "$m/.mimicfs/stats.json"; }
"""

# The timed sequence on one volume, as measure-real-fs.sh runs it: a phase's
# time is what the emulated clock advanced, plus the background reclaim it
# queued (xfs: deferred.task_ns), in seconds. One line per run.
TIME = EMULATED_NOW + r"""
for run in $(seq "$RUNS"); do
  t0=$(now); "$WORKLOAD" grow "$m/g1" --pages 2000 --per-extension 1
  t1=$(now); "$WORKLOAD" grow "$m/g128" --pages 2000 --per-extension 128
  t2=$(now); rm -f "$m/g1" "$m/g128"
  "$WORKLOAD" extend "$m/plain" --how zeros >/dev/null; "$WORKLOAD" punch "$m/punched"; sync
  t3=$(now); rm "$m/plain"; t4=$(now); sync; t5=$(now)
  rm "$m/punched"; t6=$(now); sync; t7=$(now)
  w=""
  for n in 1 2 4; do
    a=$(now); "$WORKLOAD" concurrent "$m" --writers "$n" --size-mib 32; b=$(now)
    w="$w $((b - a))"; rm -f "$m"/datafile*; sync
  done
  "$WORKLOAD" extend "$m/punched" --how zeros; "$WORKLOAD" extend "$m/overwritten" --how zeros; sync
  a=$(now); "$WORKLOAD" call punch "$m/punched"; b=$(now)
  "$WORKLOAD" call fallocate "$m/fallocated"; c=$(now); sync
  d=$(now); "$WORKLOAD" call overwrite "$m/overwritten"; e=$(now)
  rm -f "$m/punched" "$m/overwritten" "$m/fallocated"; sync
  echo "$run $((t1 - t0)) $((t2 - t1)) $((t4 - t3)) $((t5 - t4)) $((t6 - t5)) $((t7 - t6))$w" \
    "$((b - a)) $((c - b)) $((e - d))"
done
"""

TIME_FIELDS = ("grow_1_per_fsync_s", "grow_128_per_fsync_s", "drop_plain_unlink_s",
               "drop_plain_sync_s", "drop_punched_unlink_s", "drop_punched_sync_s")
# The per-call phases after the writers, and how many calls each makes
# (mimicfs-workload call, as measure-real-fs.sh times them).
CALL_FIELDS = (("punch_call_s", 4096), ("fallocate_call_s", 4096),
               ("overwrite_fdatasync_call_s", 512))


def run_on_profile(args, fs, device_bytes, script, env):
    profile, sets = PROFILES[fs]
    command = [args.mimicfs, "run", "--profile", profile,
               "--set", f"device.capacity_bytes={device_bytes}"]
    for value in sets:
        command += ["--set", value]
    command += ["--", "bash", "-c", script]
    result = subprocess.run(command, env={**os.environ, "WORKLOAD": args.workload, **env},
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"fidelity: {' '.join(command[:8])} ... failed: {result.stderr.strip()}")
    return result.stdout.split("\n")


def emulate(args, real):
    """Emulated rows in the real ones' shape, keyed as they are."""
    device_bytes = real.get("device_bytes", 4 << 30)
    emulated = []
    seed003 = [r for r in real["rows"] if r["seed"] == "003"]
    for fs in dict.fromkeys(r["fs"] for r in seed003):
        plan = "\n".join(f"{r['reserve']} {r['writers']} {r['run']}"
                         for r in seed003 if r["fs"] == fs)
        for line in run_on_profile(args, fs, device_bytes, SEED003, {"PLAN": plan}):
            if not line.strip():
                continue
            reserve, writers, run, counts, groups = line.split()
            emulated.append({"seed": "003", "fs": fs, "reserve": int(reserve),
                             "writers": int(writers), "run": int(run),
                             "extents": [int(c) for c in counts.split(",")],
                             "groups": [int(g) for g in groups.split(",")]})
    timed = [r for r in real["rows"] if r["seed"] == "time"]
    for fs in dict.fromkeys(r["fs"] for r in timed):
        runs = str(sum(1 for r in timed if r["fs"] == fs))
        for line in run_on_profile(args, fs, device_bytes, TIME, {"RUNS": runs}):
            if not line.strip():
                continue
            run, *ns = (int(v) for v in line.split())
            row = {"seed": "time", "fs": fs, "run": run}
            row.update(zip(TIME_FIELDS, (v / 1e9 for v in ns[:6])))
            row["osync_writers_s"] = [v / 1e9 for v in ns[6:9]]
            row.update((field, v / calls / 1e9) for (field, calls), v in zip(CALL_FIELDS, ns[9:]))
            emulated.append(row)
    for r in real["rows"]:
        if r["seed"] != "004":
            continue
        out = [l for l in run_on_profile(args, r["fs"], device_bytes, SEED004, {}) if l.strip()]
        allocated, records, fragments, used = (int(v) for v in out[-1].split())
        emulated.append({"seed": "004", "fs": r["fs"], "allocated_bytes": allocated,
                         "fiemap_records": records, "fragments": fragments,
                         "device_used_bytes": used})
    return emulated


def verdict(real, emulated):
    """The ratio emulated / real of two medians, and whether it is within 2x."""
    if real == 0:
        return ("-", "yes" if emulated == 0 else "no")
    ratio = emulated / real
    return (f"{ratio:.2f}", "yes" if 0.5 <= ratio <= 2 else "no")


def per_run(runs):
    """Each run's counts in order ("1,1 / 12,11"; the first run of a volume's
    first case is on a fresh one, the others follow a delete) and the median."""
    runs = list(runs)
    values = [v for run in runs for v in run]
    median = statistics.median(values)
    text = " / ".join(",".join(str(v) for v in run) for run in runs)
    return median, f"{text} (median {median:g})"


def groups_text(runs, median):
    """Each run's files' groups in order ("0,1 / 0,0"), and the median count of distinct ones."""
    text = " / ".join(",".join(str(g) for g in r["groups"]) for r in runs)
    return f"{text} (median {median:g} groups)"


def time_verdict(real, emulated):
    """emulated / real of two time ratios, and whether it is within 30%."""
    if real <= 0:
        return ("-", "no")
    ratio = emulated / real
    return (f"{ratio:.2f}", "yes" if 0.7 <= ratio <= 1.3 else "no")


# A time row: its label and the ratio it is, from one run's figures.
TIME_RATIOS = (
    ("001 grow 2000 pages: 1 per fsync / 128 per fsync",
     lambda r: r["grow_1_per_fsync_s"] / r["grow_128_per_fsync_s"]),
    ("004 drop 64 MiB (unlink + sync, cold): punched / plain",
     lambda r: (r["drop_punched_unlink_s"] + r["drop_punched_sync_s"]) /
     (r["drop_plain_unlink_s"] + r["drop_plain_sync_s"])),
    ("32 KiB O_SYNC writers, 32 MiB each: 2 writers / 1",
     lambda r: r["osync_writers_s"][1] / r["osync_writers_s"][0]),
    ("32 KiB O_SYNC writers, 32 MiB each: 4 writers / 1",
     lambda r: r["osync_writers_s"][2] / r["osync_writers_s"][0]),
    ("16 KiB overwrite + fdatasync / 001's page grown per fsync",
     lambda r: r["overwrite_fdatasync_call_s"] / (r["grow_1_per_fsync_s"] / 2000)),
)

# A time row across filesystems: one call's time on this filesystem over its
# time on ext4, measured in the same run on the same device.
PER_CALL_RATIOS = (
    ("punch 8 KiB of a 16 KiB page, per call: this fs / ext4", "punch_call_s"),
    ("fallocate a 16 KiB page, per call: this fs / ext4", "fallocate_call_s"),
    ("16 KiB overwrite + fdatasync, per call: this fs / ext4", "overwrite_fdatasync_call_s"),
)


def time_rows(real, emulated):
    """The time rows. A figure a file does not hold (one written before its
    workload was measured) leaves its row out."""
    rows = []
    timed = lambda records, fs: [r for r in records if r["seed"] == "time" and r["fs"] == fs]

    def row(label, fs, real_of, emulated_of):
        try:
            real_ratio, emulated_ratio = real_of(), emulated_of()
        except KeyError:
            return
        except ZeroDivisionError:
            rows.append((label, fs, "-", "-", "-", "no"))
            return
        ratio, ok = time_verdict(real_ratio, emulated_ratio)
        rows.append((label, fs, f"{real_ratio:.2f}x", f"{emulated_ratio:.2f}x", ratio, ok))

    def across(records, fs, field):
        return (statistics.median(r[field] for r in timed(records, fs)) /
                statistics.median(r[field] for r in timed(records, "ext4")))

    for fs in dict.fromkeys(r["fs"] for r in real if r["seed"] == "time"):
        mine, theirs = timed(real, fs), timed(emulated, fs)
        if not theirs:
            continue
        for label, ratio_of in TIME_RATIOS:
            row(label, fs, lambda: statistics.median(ratio_of(r) for r in mine),
                lambda: statistics.median(ratio_of(r) for r in theirs))
        if fs == "ext4" or not timed(real, "ext4") or not timed(emulated, "ext4"):
            continue
        for label, field in PER_CALL_RATIOS:
            row(label, fs, lambda: across(real, fs, field), lambda: across(emulated, fs, field))
    return rows


def mib(value):
    return f"{value / (1 << 20):.1f} MiB"


def table(real, emulated):
    rows = []
    seed003 = {}
    for source, records in (("real", real["rows"]), ("emulated", emulated)):
        for r in records:
            if r["seed"] == "003":
                key = (r["fs"], r["writers"], r["reserve"])
                seed003.setdefault(key, {"real": [], "emulated": []})[source].append(r)
    for (fs, writers, reserve), both in seed003.items():
        if not both["emulated"]:
            continue
        real_median, real_text = per_run(r["extents"] for r in both["real"])
        emulated_median, emulated_text = per_run(r["extents"] for r in both["emulated"])
        ratio, ok = verdict(real_median, emulated_median)
        how = f"{writers} writers" + (", fallocated" if reserve else "")
        rows.append((f"003 extents per file, {how}", fs, real_text, emulated_text, ratio, ok))
        # Where the files began (xfs_bmap's AG; measured on xfs only): how many
        # groups each run's files began in, and the groups themselves.
        if both["real"] and all("groups" in r for r in both["real"] + both["emulated"]):
            real_groups = [len(set(r["groups"])) for r in both["real"]]
            emulated_groups = [len(set(r["groups"])) for r in both["emulated"]]
            real_n = statistics.median(real_groups)
            emulated_n = statistics.median(emulated_groups)
            ratio, ok = verdict(real_n, emulated_n)
            rows.append((f"003 groups the files began in, {how}", fs,
                         groups_text(both["real"], real_n), groups_text(both["emulated"], emulated_n),
                         ratio, ok))
    emulated004 = {r["fs"]: r for r in emulated if r["seed"] == "004"}
    for r in real["rows"]:
        if r["seed"] != "004" or r["fs"] not in emulated004:
            continue
        e = emulated004[r["fs"]]
        for field, label, show in (("allocated_bytes", "st_blocks", mib),
                                   ("fiemap_records", "FIEMAP records", str),
                                   ("fragments", "filefrag extents", str),
                                   ("device_used_bytes", "device used", mib)):
            ratio, ok = verdict(r[field], e[field])
            rows.append((f"004 {label} after punching", r["fs"], show(r[field]), show(e[field]),
                         ratio, ok))
    return rows + time_rows(real["rows"], emulated)


# The reports' own figures (docs/design.md's cases), each against what the
# scenario driver (tools/scenario_driver.cc) measures on the profile that
# stands for the seed's system. A (low, high) range: mimicfs must land in it;
# a single ratio: within 30%.
SEEDS = (
    ("000: write time, posix_fallocate / fallocate+zeros, 64 MiB tablespace",
     "nfs", "extend", "~4x lower write rate (MDEV-32268)", 4.0,
     lambda rows: rows["posix_fallocate"]["emulated_ns"] / rows["fallocate_or_zeros"]["emulated_ns"]),
    ("001: time, 1 page per fsync / 128 pages per fsync, 2000 pages",
     "ext4", "grow", "2.5x (MySQL #60593, its whole benchmark)", 2.5,
     lambda rows: rows["1_page_per_fsync"]["emulated_ns"] /
     rows["128_pages_per_fsync"]["emulated_ns"]),
    ("003: extents per file, 4 writers zero-filling at once",
     "xfs", "concurrent", "13-212 (NDB BUG#24143)", (13, 212),
     lambda rows: rows["write_only"]["extents"] / 4),
    ("003: extents per file, space reserved first",
     "xfs", "concurrent", "1-2", (1, 2),
     lambda rows: rows["fallocate_keep_size_first"]["extents"] / 4),
)

# Seed 004's drops: a plain and a punched table, each dropped (unlink, and the
# background reclaim it queues), punched over plain; the seed's tables were 16-26
# GB, the emulated ones 64 MiB (docs/time.md, "Dropping a file").
SEED004_DROPS = (("xfs", 9.3), ("btrfs", 7.9), ("ext4", 1.0), ("ext4-hdd", 8.8))
DROP = EMULATED_NOW + r"""
"$WORKLOAD" extend "$m/plain" --how zeros >/dev/null; "$WORKLOAD" punch "$m/punched"; sync
t0=$(now); rm "$m/plain"; sync; t1=$(now); rm "$m/punched"; sync; t2=$(now)
echo "$((t1 - t0)) $((t2 - t1))"
"""


def seed_rows(args):
    rows = []
    for label, profile, scenario, seed_text, seed, measure in SEEDS:
        result = subprocess.run([args.scenarios, "--json", "--scenario", scenario,
                                 "--profiles", profile, "--mimicfs", args.mimicfs],
                                capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"fidelity: mimicfs-scenarios --scenario {scenario} failed: "
                     f"{result.stderr.strip()}")
        by_strategy = {r["strategy"]: r for r in json.loads(result.stdout)["scenarios"][0]["rows"]}
        value = measure(by_strategy)
        if isinstance(seed, tuple):
            ok = "yes" if seed[0] <= value <= seed[1] else "no"
            rows.append((f"seed {label}", profile, seed_text, f"{value:g}", "-", ok))
        else:
            ratio, ok = time_verdict(seed, value)
            rows.append((f"seed {label}", profile, seed_text, f"{value:.2f}x", ratio, ok))
    for profile, seed in SEED004_DROPS:
        command = [args.mimicfs, "run", "--profile", profile, "--", "bash", "-c", DROP]
        result = subprocess.run(command, env={**os.environ, "WORKLOAD": args.workload},
                                capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"fidelity: the seed 004 drop on {profile} failed: {result.stderr.strip()}")
        plain, punched = (int(v) for v in result.stdout.split()[-2:])
        value = punched / plain
        ratio, ok = time_verdict(seed, value)
        rows.append(("seed 004: drop, punched / plain (seed: 16-26 GB; here 64 MiB)", profile,
                     f"{seed}x", f"{value:.2f}x", ratio, ok))
    return rows


def short(figure):
    """A figure as the before column shows it: an extent row's median only."""
    return figure.rsplit("(median ", 1)[1].rstrip(")") if "(median " in figure else figure


def print_table(header, rows, earlier, with_before, noun="rows"):
    """A markdown table; with_before adds each row's earlier figure and verdict."""
    columns = list(header) + (["before", "before within"] if with_before else [])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        cells = list(row)
        if with_before:
            old = earlier.get((row[0], row[1]))
            cells += [short(old[3]), old[5]] if old else ["-", "-"]
        print("| " + " | ".join(cells) + " |")
    misses = sum(1 for row in rows if row[5] == "no")
    line = f"\n{len(rows) - misses} of {len(rows)} {noun} within their bound"
    if with_before:
        old_misses = sum(1 for old in earlier.values() if old[5] == "no")
        line += f" (before: {len(earlier) - old_misses} of {len(earlier)})"
    print(line + ".")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("real", help="what measure-real-fs.sh --json wrote")
    parser.add_argument("--mimicfs", required=True)
    parser.add_argument("--workload", required=True, help="the mimicfs-workload binary")
    parser.add_argument("--scenarios", required=True, help="the mimicfs-scenarios binary")
    parser.add_argument("--json", help="also write the emulated rows to this file")
    parser.add_argument("--label", default="", help="what produced these rows (kept in --json)")
    parser.add_argument("--before", help="an earlier --json file, shown beside these rows")
    args = parser.parse_args()
    before = None
    if args.before:
        try:
            with open(args.before) as f:
                before = json.load(f)
            before["rows"], before["seeds"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"fidelity: {args.before} is not fidelity.py --json output: {e}",
                  file=sys.stderr)
            return 2
    try:
        with open(args.real) as f:
            real = json.load(f)
        rows_in = real["rows"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"fidelity: {args.real} is not measure-real-fs.sh --json output: {e}",
              file=sys.stderr)
        return 2
    if not isinstance(rows_in, list) or any(r.get("fs") not in PROFILES for r in rows_in):
        print(f"fidelity: {args.real}: a row names no known filesystem "
              f"({', '.join(PROFILES)})", file=sys.stderr)
        return 2
    emulated = emulate(args, real)
    seeds = seed_rows(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"label": args.label, "rows": emulated, "seeds": seeds}, f, indent=1)
    print(f"Real: Linux {real.get('kernel', '?')}, {mib(real.get('device_bytes', 4 << 30))} "
          "loop devices; emulated: the built-in profiles at that capacity.\n")
    print("Counts and sizes are within 2x when emulated / real is; a time row is a ratio of "
          "two times, within 30% when emulated / real is. Medians over the runs.\n")
    rows = table(real, emulated)
    earlier = {}
    if before is not None:
        print(f"Before: {before.get('label') or args.before}; its figure (the median for "
              "extent counts) and verdict.\n")
        earlier = {(r[0], r[1]): r for r in table(real, before["rows"])}
    print_table(("workload", "filesystem", "real", "emulated", "emulated / real", "within"),
                rows, earlier, before is not None)
    print("\nThe seeds' own figures, on the profile that stands for each seed's system "
          "(mimicfs-scenarios, default capacity):\n")
    earlier = {} if before is None else {(r[0], r[1]): r for r in before["seeds"]}
    print_table(("seed", "profile", "seed's figure", "mimicfs", "mimicfs / seed", "within"),
                seeds, earlier, before is not None, noun="seed rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
