# SPDX-License-Identifier: Apache-2.0
"""The pytest fixture `mimicfs_mount`: mounts volumes for one test.

    def test_extends_without_fragmenting(mimicfs_mount):
        nas = mimicfs_mount("nfs")
        ...
        assert nas.file_stats("t1.ibd")["extents"] == 1

Each call mounts another volume (same arguments as mimicfs.mount); all are
unmounted when the test ends.
"""

import contextlib

import pytest

import mimicfs


@pytest.fixture
def mimicfs_mount():
    with contextlib.ExitStack() as stack:
        def mount(profile="nfs", **kwargs):
            return stack.enter_context(mimicfs.mount(profile, **kwargs))

        yield mount
