// SPDX-License-Identifier: Apache-2.0
// Built as C++17 (tests/CMakeLists.txt): include/mimicfs/scoped_mount.h must
// stay usable by code bases that have not moved on. Run as a test, it mounts
// with it, as a downstream suite would: 0 when the volume mounted and answered,
// 77 (skipped) where FUSE is not available (unless MIMICFS_REQUIRE_FUSE=1),
// 1 otherwise.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "mimicfs/scoped_mount.h"

#if __cplusplus != 201703L
#error "this file checks the header as C++17"
#endif

int main() {
  if (access("/dev/fuse", R_OK | W_OK) != 0) {
    const char* required = std::getenv("MIMICFS_REQUIRE_FUSE");
    std::puts("/dev/fuse is not usable here");
    return required && std::string(required) == "1" ? 1 : 77;
  }
  try {
    mimicfs::ScopedMount volume("xfs", {"allocation.speculative_preallocation=false"});
    const int fd = open(volume.file("t.ibd").c_str(), O_CREAT | O_WRONLY, 0644);
    if (fd < 0 || pwrite(fd, "page", 4, 0) != 4 || close(fd) != 0) {
      std::puts("cannot write into the mount");
      return 1;
    }
    const nlohmann::json file = volume.file_stats("t.ibd");
    if (file.is_null() || file["size"] != 4) {
      std::printf("unexpected stats: %s\n", file.dump().c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::printf("%s\n", e.what());
    return 1;
  }
  std::puts("ok");
  return 0;
}
