# SPDX-License-Identifier: Apache-2.0
"""A downstream pytest suite's use of the installed Python helper: the
`mimicfs_mount` fixture mounts emulated NFS, and seed 000's figure holds
(glibc's posix_fallocate writes a byte per 4 KiB, so 1 MiB is 256 extents)."""
import os


def test_posix_fallocate_fragments_on_nfs(mimicfs_mount):
    nas = mimicfs_mount("nfs")
    fd = os.open(os.path.join(nas.path, "ibdata1"), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.posix_fallocate(fd, 0, 1 << 20)
    finally:
        os.close(fd)
    assert nas.file_stats("ibdata1")["extents"] == 256
    assert nas.stats()["ops"]["fallocate"]["errors"]["EOPNOTSUPP"] == 1
