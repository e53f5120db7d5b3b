// SPDX-License-Identifier: Apache-2.0
// Mounts emulated NFS with the installed ScopedMount and the installed binary,
// and checks seed 000's figure: glibc's posix_fallocate writes a byte per 4 KiB,
// so 1 MiB is 256 extents of 512-byte server blocks. Exit 0 when it holds.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "mimicfs/scoped_mount.h"

int main() {
  setenv("MIMICFS_BINARY", MIMICFS_EXECUTABLE, 1);  // the installed binary, whatever is set
  try {
    mimicfs::ScopedMount nas("nfs");
    const int fd = open(nas.file("ibdata1").c_str(), O_CREAT | O_RDWR, 0644);
    if (fd < 0 || posix_fallocate(fd, 0, 1 << 20) != 0 || close(fd) != 0) {
      std::puts("cannot preallocate on the mount");
      return 1;
    }
    const auto extents = nas.file_stats("ibdata1")["extents"];
    std::printf("downstream: %s extents on emulated NFS\n", extents.dump().c_str());
    return extents == 256 ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("downstream: %s\n", e.what());
    return 1;
  }
}
