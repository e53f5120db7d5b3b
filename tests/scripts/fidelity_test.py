# SPDX-License-Identifier: Apache-2.0
"""scripts/fidelity.py's tables, from made-up real and emulated rows (no mount):
the verdicts, the medians, and the before/after columns of --before."""
import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location(
    "fidelity", os.path.join(HERE, "..", "..", "scripts", "fidelity.py"))
fidelity = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(fidelity)


def seed003(fs, writers, run, extents, reserve=0):
    return {"seed": "003", "fs": fs, "reserve": reserve, "writers": writers, "run": run,
            "extents": extents}


def timed(fs, run, one, two, four):
    return {"seed": "time", "fs": fs, "run": run, "grow_1_per_fsync_s": 10.0,
            "grow_128_per_fsync_s": 1.0, "drop_plain_unlink_s": 1.0, "drop_plain_sync_s": 0.0,
            "drop_punched_unlink_s": 1.0, "drop_punched_sync_s": 0.0,
            "osync_writers_s": [one, two, four]}


REAL = {"rows": [dict(seed003("xfs", 2, 1, [1, 1]), groups=[0, 1]),
                 dict(seed003("xfs", 2, 2, [1, 3]), groups=[0, 0]),
                 timed("xfs", 1, 1.0, 1.5, 2.0)]}
NOW = [dict(seed003("xfs", 2, 1, [1, 1]), groups=[0, 1]),
       dict(seed003("xfs", 2, 2, [2, 2]), groups=[0, 1]),
       timed("xfs", 1, 1.0, 2.0, 4.0)]
EARLIER = [seed003("xfs", 2, 1, [11, 12]), seed003("xfs", 2, 2, [13, 12]),
           timed("xfs", 1, 1.0, 2.0, 4.0)]


def calls(fs, punch, overwrite):
    return dict(timed(fs, 1, 1.0, 1.5, 2.0), punch_call_s=punch, fallocate_call_s=1e-5,
                overwrite_fdatasync_call_s=overwrite)


class Tables(unittest.TestCase):
    def test_per_call_rows_are_against_ext4_in_the_same_run(self):
        real = {"rows": [calls("ext4", 1e-5, 2e-4), calls("btrfs", 1e-5, 8e-4)]}
        emulated = [calls("ext4", 2e-5, 1e-4), calls("btrfs", 2e-5, 1e-4)]
        rows = {(r[0], r[1]): r for r in fidelity.table(real, emulated)}
        overwrite = rows[("16 KiB overwrite + fdatasync, per call: this fs / ext4", "btrfs")]
        self.assertEqual(overwrite[2:], ("4.00x", "1.00x", "0.25", "no"))
        punch = rows[("punch 8 KiB of a 16 KiB page, per call: this fs / ext4", "btrfs")]
        self.assertEqual(punch[2:], ("1.00x", "1.00x", "1.00", "yes"))
        # ext4 is the reference: no row of its own against itself.
        self.assertNotIn(("punch 8 KiB of a 16 KiB page, per call: this fs / ext4", "ext4"), rows)
        # overwrite / grown page: 2e-4 / (10 s / 2000).
        within = rows[("16 KiB overwrite + fdatasync / 001's page grown per fsync", "ext4")]
        self.assertEqual(within[2], "0.04x")

    def test_a_figure_an_earlier_file_lacks_leaves_its_row_out(self):
        real = {"rows": [calls("ext4", 1e-5, 2e-4), calls("btrfs", 1e-5, 8e-4)]}
        older = [timed("ext4", 1, 1.0, 2.0, 4.0), timed("btrfs", 1, 1.0, 2.0, 4.0)]
        labels = {r[0] for r in fidelity.table(real, older)}
        self.assertIn("32 KiB O_SYNC writers, 32 MiB each: 2 writers / 1", labels)
        self.assertNotIn("16 KiB overwrite + fdatasync, per call: this fs / ext4", labels)
        self.assertNotIn("16 KiB overwrite + fdatasync / 001's page grown per fsync", labels)

    def test_verdicts_and_medians(self):
        rows = {(r[0], r[1]): r for r in fidelity.table(REAL, NOW)}
        extents = rows[("003 extents per file, 2 writers", "xfs")]
        self.assertEqual(extents[2], "1,1 / 1,3 (median 1)")
        self.assertEqual(extents[3], "1,1 / 2,2 (median 1.5)")
        self.assertEqual((extents[4], extents[5]), ("1.50", "yes"))
        groups = rows[("003 groups the files began in, 2 writers", "xfs")]
        self.assertEqual(groups[2], "0,1 / 0,0 (median 1.5 groups)")
        self.assertEqual((groups[3], groups[4], groups[5]), ("0,1 / 0,1 (median 2 groups)", "1.33", "yes"))
        two = rows[("32 KiB O_SYNC writers, 32 MiB each: 2 writers / 1", "xfs")]
        self.assertEqual((two[2], two[3], two[5]), ("1.50x", "2.00x", "no"))  # 1.33 > 1.3
        four = rows[("32 KiB O_SYNC writers, 32 MiB each: 4 writers / 1", "xfs")]
        self.assertEqual(four[5], "no")

    def test_before_columns(self):
        rows = fidelity.table(REAL, NOW)
        earlier = {(r[0], r[1]): r for r in fidelity.table(REAL, EARLIER)}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            fidelity.print_table(("workload", "filesystem", "real", "emulated", "ratio", "within"),
                                 rows, earlier, True)
        text = out.getvalue()
        self.assertIn("| before | before within |", text)
        # The extent row shows the earlier median only, and its verdict.
        self.assertIn("(median 1.5) | 1.50 | yes | 12 | no |", text)
        # The earlier rows have no groups (as before they were measured): no such row then.
        self.assertIn("(median 2 groups) | 1.33 | yes | - | - |", text)
        self.assertIn("4 of 6 rows within their bound (before: 2 of 5).", text)

    def test_without_before_no_extra_columns(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            fidelity.print_table(("a", "b", "c", "d", "e", "within"),
                                 [("x", "xfs", "1", "1", "1.00", "yes")], {}, False)
        self.assertNotIn("before", out.getvalue())
        self.assertIn("1 of 1 rows within their bound.", out.getvalue())

    def test_a_bad_before_file_is_refused_before_anything_runs(self):
        with tempfile.TemporaryDirectory() as d:
            real = os.path.join(d, "real.json")
            with open(real, "w") as f:
                json.dump(REAL, f)
            bad = os.path.join(d, "before.json")
            with open(bad, "w") as f:
                f.write('{"rows": []}')  # no "seeds": not --json output
            argv = sys.argv
            sys.argv = ["fidelity.py", real, "--mimicfs", "/nonexistent", "--workload", "/x",
                        "--scenarios", "/x", "--before", bad]
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    self.assertEqual(fidelity.main(), 2)
            finally:
                sys.argv = argv
            self.assertIn("is not fidelity.py --json output", err.getvalue())


if __name__ == "__main__":
    unittest.main()
