# SPDX-License-Identifier: Apache-2.0
"""The Python helper against a real mount (scripts/python-tests.sh)."""

import errno
import os
import sqlite3

import pytest

import mimicfs


def test_mount_reads_stats_and_unmounts():
    with mimicfs.mount("nfs") as nas:
        path = nas.path
        assert os.path.ismount(path)
        fd = os.open(nas.file("ibdata1"), os.O_CREAT | os.O_RDWR, 0o644)
        nas.reset()
        os.posix_fallocate(fd, 0, 1 << 20)  # glibc writes a byte per 4 KiB on NFS
        os.close(fd)
        assert nas.stats()["ops"]["fallocate"]["errors"]["EOPNOTSUPP"] == 1
        assert nas.file_stats("ibdata1")["extents"] == 256
        assert nas.file_stats("missing") is None
    assert not os.path.exists(path)


def test_settings_become_profile_overrides():
    with mimicfs.mount("xfs", **{"allocation.speculative_preallocation": False,
                                 "statfs.block_size": 65536}) as vol:
        assert os.statvfs(vol.path).f_bsize == 65536


def test_a_bad_setting_is_mimicfs_own_message():
    with pytest.raises(mimicfs.MountError, match="allocation.speed: unknown key"):
        with mimicfs.mount("ext4", **{"allocation.speed": 3}):
            pass


def test_ctl_crash_drops_what_was_not_synced_and_rejects_nonsense():
    with mimicfs.mount("ext4") as vol:
        with open(vol.file("synced"), "wb") as f:
            f.write(b"kept")
            f.flush()
            os.fsync(f.fileno())
        with open(vol.file("unsynced"), "wb") as f:
            f.write(b"lost")
        vol.ctl("crash")
        assert open(vol.file("synced"), "rb").read() == b"kept"
        assert not os.path.exists(vol.file("unsynced"))
        with pytest.raises(OSError) as raised:
            vol.ctl("explode")
        assert raised.value.errno == errno.EINVAL
        assert isinstance(raised.value, mimicfs.ControlError)
        assert 'unknown command "explode"' in str(raised.value)
        with pytest.raises(mimicfs.ControlError) as raised:
            vol.ctl("fault add op=frobnicate,error=EIO")
        assert "frobnicate" in raised.value.strerror


def test_fixture_mounts_for_the_test(mimicfs_mount):
    first = mimicfs_mount("btrfs")
    second = mimicfs_mount("nfs42")
    assert first.stats()["profile"] == "btrfs"
    assert second.stats()["profile"] == "nfs42"


def test_an_unlinked_file_holds_its_blocks_until_released():
    with mimicfs.mount("xfs", **{"allocation.background_reclaim": False}) as vol:
        with open(vol.file("#sql-ib1.ibd"), "wb") as f:
            f.write(b"x" * (1 << 20))
            os.unlink(vol.file("#sql-ib1.ibd"))
            held = vol.stats()["open"]
            assert held["handles"] == 1
            assert held["unlinked_files"] == 1
            assert held["unlinked_bytes"] >= 1 << 20
        assert vol.wait_for_releases()
        assert vol.stats()["open"]["unlinked_bytes"] == 0


# The plugin as a project's test run meets it (pytester runs pytest in a
# subprocess, with the installed plugin).
def test_the_fixtures_skip_saying_why_when_the_binary_is_missing(pytester):
    pytester.makepyfile("def test_uses(mimicfs_mount):\n    mimicfs_mount('nfs')\n")
    result = pytester.runpytest_subprocess("--mimicfs-binary", "/nonexistent/mimicfs", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no mimicfs binary: /nonexistent/mimicfs*"])


def test_a_module_scoped_volume_lasts_the_module(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.fixture(scope="module")
        def vol(mimicfs_mount_module):
            return mimicfs_mount_module("ext4")

        def test_first(vol):
            with open(vol.file("a"), "w") as f:
                f.write("x")

        def test_second(vol):
            assert vol.stats()["profile"] == "ext4"
            assert "/a" in vol.stats()["files"]
        """
    )
    result = pytester.runpytest_subprocess("--mimicfs-binary", mimicfs._binary())
    result.assert_outcomes(passed=2)


def test_the_fixtures_are_documented(pytester):
    result = pytester.runpytest_subprocess("--fixtures")
    result.stdout.fnmatch_lines([
        "*mimicfs_mount*", "*Mounts mimicfs volumes for one test*",
        "*mimicfs_mount_module*", "*mimicfs_mount_session*", "*for the whole run*",
    ])


def _write_transaction_on_first(a, b):
    """SQLite connections to one database on clients A and B; A's holds a
    write transaction that inserted 1."""
    first = sqlite3.connect(a.file("app.db"), timeout=0, isolation_level=None)
    first.execute("CREATE TABLE t (x)")
    second = sqlite3.connect(b.file("app.db"), timeout=0, isolation_level=None)
    assert second.execute("SELECT count(*) FROM t").fetchone() == (0,)
    first.execute("BEGIN IMMEDIATE")
    first.execute("INSERT INTO t VALUES (1)")
    return first, second


def _second_writer_locked_out(a, b):
    """Whether SQLite on client B is refused a write transaction while one on
    client A holds it, and then reads A's row once A committed."""
    first, second = _write_transaction_on_first(a, b)
    try:
        second.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as e:
        assert "locked" in str(e)
        locked_out = True
    else:
        second.execute("ROLLBACK")
        locked_out = False
    first.execute("COMMIT")
    assert second.execute("SELECT count(*) FROM t").fetchone() == (1,)
    second.close()
    first.close()
    return locked_out


def test_sqlite_on_two_nfs_clients_takes_turns():
    with mimicfs.mount("nfs") as a, a.client() as b:
        assert _second_writer_locked_out(a, b)
        assert b.stats()["client"]["lock_conflicts"] >= 1


def test_sqlite_loses_its_lock_in_a_server_restart_it_learns_of_too_late():
    # A holds a write transaction when the server restarts with a grace
    # period shorter than A's lease renewal, and A sends nothing in it: its
    # locks are lost (nfs4_lock_expired), B takes them and commits, and A's
    # commit fails with EIO (NFS_LOCK_LOST) instead of overwriting B's.
    with mimicfs.mount("nfs") as a, a.client() as b:
        first, second = _write_transaction_on_first(a, b)
        a.ctl("server", "restart", "--grace", "10s")
        second.execute("BEGIN IMMEDIATE")
        second.execute("INSERT INTO t VALUES (2)")
        second.execute("COMMIT")
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            first.execute("COMMIT")
        assert a.stats()["client"]["lost_locks"] >= 1
        assert second.execute("SELECT x FROM t").fetchall() == [(2,)]
        second.close()
        first.close()


def test_sqlite_keeps_its_lock_through_a_server_restart():
    # The default grace period (90 s) outlasts A's renewal: A reclaims its
    # locks, B waits out the grace and is refused, and A commits.
    with mimicfs.mount("nfs") as a, a.client() as b:
        first, second = _write_transaction_on_first(a, b)
        a.ctl("server", "restart")
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            second.execute("BEGIN IMMEDIATE")
        first.execute("COMMIT")
        assert second.execute("SELECT x FROM t").fetchall() == [(1,)]
        server = a.stats()["server"]
        assert server["restarts"] == 1 and server["grace_waits"] >= 1
        assert a.stats()["client"]["lost_locks"] == 0
        second.close()
        first.close()


def test_sqlite_with_client_local_locks_lets_both_write():
    # local_lock=all: each client's locks are its own, as with nfs(5)'s
    # local_lock=all or a server without lockd: two writers at once.
    with mimicfs.mount("nfs", **{"client.local_lock": "all"}) as a, a.client() as b:
        assert not _second_writer_locked_out(a, b)
