// SPDX-License-Identifier: Apache-2.0
#include "tests/conformance/reference_fs.h"

#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/mounted_volume.h"

namespace mimicfs::conformance {

using testing::run_command;

ReferenceFs::ReferenceFs(const std::string& kind) {
  work_ = testing::make_temp_dir();
  const std::string dir = work_ + "/mnt";
  std::filesystem::create_directory(dir);
  if (kind == "tmpfs") {
    if (mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=256m") != 0) {
      error_ = std::string("mount tmpfs: ") + std::strerror(errno);
      return;
    }
    mountpoint_ = dir;
    return;
  }
  const std::string image = work_ + "/image";
  // xfs needs 300 MiB at least; the image is sparse.
  if (run_command({"truncate", "-s", "512M", image}).exit_status != 0) {
    error_ = "cannot make " + image;
    return;
  }
  const testing::CommandResult loop = run_command({"losetup", "--find", "--show", image});
  if (loop.exit_status != 0) {
    error_ = "losetup: " + loop.err;
    return;
  }
  loop_ = loop.out.substr(0, loop.out.find('\n'));
  std::vector<std::string> mkfs;
  if (kind == "ext4") mkfs = {"mkfs.ext4", "-q", "-F", loop_};
  if (kind == "xfs") mkfs = {"mkfs.xfs", "-q", "-f", loop_};
  if (kind == "btrfs") mkfs = {"mkfs.btrfs", "-q", "-f", loop_};
  if (mkfs.empty()) {
    error_ = "unknown reference filesystem " + kind;
    return;
  }
  const testing::CommandResult made = run_command(mkfs);
  if (made.exit_status != 0) {
    error_ = mkfs[0] + ": " + (made.err.empty() ? "not found" : made.err);
    return;
  }
  if (mount(loop_.c_str(), dir.c_str(), kind.c_str(), 0, nullptr) != 0) {
    error_ = "mount " + kind + ": " + std::strerror(errno);
    return;
  }
  mountpoint_ = dir;
}

ReferenceFs::~ReferenceFs() {
  if (!mountpoint_.empty()) umount2(mountpoint_.c_str(), MNT_DETACH);
  if (!loop_.empty()) run_command({"losetup", "-d", loop_});
  std::error_code ignored;
  std::filesystem::remove_all(work_, ignored);
}

std::string ReferenceFs::for_profile(const std::string& profile) {
  if (profile.starts_with("ext4")) return "ext4";
  if (profile == "xfs" || profile == "btrfs") return profile;
  return "tmpfs";
}

}  // namespace mimicfs::conformance
