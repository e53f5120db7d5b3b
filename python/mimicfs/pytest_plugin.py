# SPDX-License-Identifier: Apache-2.0
"""pytest fixtures that mount mimicfs volumes, registered on install.

    def test_extends_without_fragmenting(mimicfs_mount):
        nas = mimicfs_mount("nfs")
        ...
        assert nas.file_stats("t1.ibd")["extents"] == 1

Each fixture is a factory taking mimicfs.mount's arguments; each call mounts
another volume, unmounted when the fixture's scope ends: `mimicfs_mount` per
test, `mimicfs_mount_module` per module, `mimicfs_mount_session` once for the
run. Where no volume can be mounted (no mimicfs binary, no usable /dev/fuse)
the tests that use them are skipped, saying why.

The binary is --mimicfs-binary PATH (or the `mimicfs_binary` ini option), else
$MIMICFS_BINARY, else `mimicfs` in PATH.
"""

import contextlib

import pytest

import mimicfs


def pytest_addoption(parser):
    group = parser.getgroup("mimicfs")
    group.addoption("--mimicfs-binary", dest="mimicfs_binary", default=None,
                    help="the mimicfs binary the mimicfs_mount fixtures run "
                         "(default: $MIMICFS_BINARY, else mimicfs in PATH)")
    parser.addini("mimicfs_binary", "the mimicfs binary the mimicfs_mount fixtures run",
                  default=None)


def _binary(config):
    return config.getoption("mimicfs_binary") or config.getini("mimicfs_binary") or None


@contextlib.contextmanager
def _mounter(config):
    binary = _binary(config)
    reason = mimicfs.unusable_reason(binary)
    if reason:
        pytest.skip(reason)
    with contextlib.ExitStack() as stack:
        def mount(profile="nfs", **kwargs):
            kwargs.setdefault("binary", binary)
            return stack.enter_context(mimicfs.mount(profile, **kwargs))

        yield mount


@pytest.fixture
def mimicfs_mount(pytestconfig):
    """Mounts mimicfs volumes for one test: mimicfs_mount("nfs", **settings)
    returns a mimicfs.Mount, unmounted when the test ends. Skips the test when
    no volume can be mounted here."""
    with _mounter(pytestconfig) as mount:
        yield mount


@pytest.fixture(scope="module")
def mimicfs_mount_module(pytestconfig):
    """As mimicfs_mount, for every test of a module: the volumes stay mounted
    until the module's last test ends."""
    with _mounter(pytestconfig) as mount:
        yield mount


@pytest.fixture(scope="session")
def mimicfs_mount_session(pytestconfig):
    """As mimicfs_mount, for the whole run: the volumes stay mounted until
    the last test ends."""
    with _mounter(pytestconfig) as mount:
        yield mount
