// SPDX-License-Identifier: Apache-2.0
#include "host/mount_checks.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>

#include "control/control_files.h"

namespace mimicfs {

std::string check_mountpoint(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return fmt::format("mountpoint {}: {}", path, std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return fmt::format("mountpoint {}: not a directory", path);
  // A mimicfs mount lists nothing (its control directory is hidden): a second
  // daemon would stack on it.
  const std::string control = path + "/" + std::string(ControlFiles::kDirectoryName);
  if (struct stat control_st{}; stat(control.c_str(), &control_st) == 0) {
    return fmt::format("mountpoint {}: already a mimicfs mount (unmount it: fusermount3 -u {})",
                       path, path);
  }
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(path.c_str()), closedir);
  if (!dir) return fmt::format("mountpoint {}: {}", path, std::strerror(errno));
  while (const dirent* entry = readdir(dir.get())) {
    std::string_view name = entry->d_name;
    if (name != "." && name != "..") {
      return fmt::format("mountpoint {}: not empty (found \"{}\")", path, name);
    }
  }
  return {};
}

std::string check_fuse_device() {
  struct stat st {};
  if (stat("/dev/fuse", &st) != 0)
    return fmt::format("cannot use /dev/fuse: {}", std::strerror(errno));
  if (!S_ISCHR(st.st_mode)) return "cannot use /dev/fuse: not a character device";
  const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return fmt::format("cannot use /dev/fuse: {}", std::strerror(errno));
  ::close(fd);
  return {};
}

}  // namespace mimicfs
