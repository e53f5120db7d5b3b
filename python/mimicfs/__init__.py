# SPDX-License-Identifier: Apache-2.0
"""Mount a mimicfs volume from Python and read its statistics.

    with mimicfs.mount("ext4", **{"allocation.placement": "goal"}) as vol:
        open(vol.file("t.ibd"), "wb").write(b"page")
        vol.file_stats("t.ibd")["extents"]

The binary is $MIMICFS_BINARY, else `mimicfs` in PATH. Mounting needs root or
a /dev/fuse the user may open. The statistics are docs/stats.md's schema.
"""

import contextlib
import errno
import json
import os
import shutil
import subprocess
import tempfile
import time

__all__ = ["ControlError", "Mount", "MountError", "mount", "unusable_reason"]


class MountError(RuntimeError):
    """The volume could not be mounted; the message is mimicfs's own."""


class ControlError(OSError):
    """A control command the volume (or mimicfs ctl) rejected; the message is
    mimicfs's own. errno is EINVAL for a command it does not accept."""


def _binary():
    return os.environ.get("MIMICFS_BINARY") or shutil.which("mimicfs") or "mimicfs"


def unusable_reason(binary=None):
    """Why a volume cannot be mounted here (no mimicfs binary, no usable
    /dev/fuse), as one line; None when it can."""
    binary = binary or _binary()
    found = shutil.which(binary) if os.sep not in binary else binary
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        return "no mimicfs binary: {} (set MIMICFS_BINARY or --mimicfs-binary)".format(binary)
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC))
    except OSError as e:
        return "cannot use /dev/fuse: {}".format(e.strerror)
    return None


class Mount:
    """A mounted volume: its path, its statistics and its control file."""

    def __init__(self, path, binary=None):
        self.path = path
        self.binary = binary or _binary()

    def file(self, name):
        """The path of `name` inside the mount."""
        return os.path.join(self.path, name)

    def stats(self):
        """The whole stats.json document, read now."""
        with open(os.path.join(self.path, ".mimicfs", "stats.json")) as f:
            return json.load(f)

    def file_stats(self, name):
        """One file's entry ("t1.ibd" or "dir/t1.ibd"), or None."""
        key = name if name.startswith("/") else "/" + name
        return self.stats()["files"].get(key)

    def ctl(self, *words):
        """Sends one command ("reset", "crash", "sync", "fault add RULE", ...),
        as `mimicfs ctl` does.

        Raises ControlError, an OSError carrying mimicfs's message: errno
        EINVAL for a command it rejects, EIO for any other failure."""
        argv = [self.binary, "ctl", self.path] + list(words)
        try:
            done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as e:
            raise ControlError(e.errno, "cannot run {}: {}".format(self.binary, e.strerror)) from e
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip() or "mimicfs ctl failed"
            raise ControlError(errno.EINVAL if done.returncode == 2 else errno.EIO, message)

    def client(self):
        """Another NFS client of this volume's server, as a context manager:
        with a.client() as b: ... (see mount's client_of)."""
        return mount(client_of=self.path, binary=self.binary)

    def reset(self):
        """Zeroes the operation counters (the allocation state is kept)."""
        self.ctl("reset")

    def wait_for_releases(self, timeout=10.0):
        """Waits until no descriptor is open on the volume; False if one still is.

        close() returns before the kernel sends the daemon its RELEASE: until
        then an unlinked file keeps its blocks (stats.json's open.handles)."""
        deadline = time.monotonic() + timeout
        while self.stats()["open"]["handles"] != 0:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True


def _run_quietly(argv):
    try:
        return subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    except OSError:  # not installed
        return 127


def _unmount(path):
    # A lazy unmount never fails on a busy mount; the daemon exits when it is gone.
    for _ in range(20):
        if _run_quietly(["fusermount3", "-u", "-q", path]) == 0:
            return
        time.sleep(0.05)
    if _run_quietly(["fusermount3", "-u", "-z", "-q", path]) != 0:
        _run_quietly(["umount", "-l", path])


@contextlib.contextmanager
def mount(profile="nfs", profile_file=None, extra_arguments=(), binary=None, client_of=None,
          **settings):
    """Mounts `profile` (or `profile_file`) with `settings` as --set KEY=VALUE.

    Keys with dots are passed as keyword arguments through a dict:
    mount("xfs", **{"allocation.speculative_preallocation": False}).
    `binary` is the mimicfs to run (default: $MIMICFS_BINARY, else PATH's).
    With `client_of` (a mounted nfs volume's path, or its Mount) the mount is
    another NFS client of that volume's server, served by its daemon, and takes
    no profile or settings (Mount.client() does the same).
    Raises MountError with mimicfs's message when the mount fails."""
    path = tempfile.mkdtemp(prefix="mimicfs-py.")
    argv = [binary or _binary(), "mount"]
    if client_of is not None:
        argv += ["--client-of", getattr(client_of, "path", client_of)]
    else:
        argv += ["--profile-file", profile_file] if profile_file else ["--profile", profile]
    for key, value in settings.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        argv += ["--set", "{}={}".format(key, value)]
    argv += list(extra_arguments)
    argv.append(path)
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        os.rmdir(path)
        raise MountError("cannot run {}: {}".format(argv[0], e)) from e
    if done.returncode != 0:
        os.rmdir(path)
        message = (done.stderr or done.stdout).strip()
        raise MountError("mimicfs mount failed with status {}{}".format(
            done.returncode, ": " + message if message else ""))
    try:
        yield Mount(path, argv[0])
    finally:
        _unmount(path)
        with contextlib.suppress(OSError):
            os.rmdir(path)
