// SPDX-License-Identifier: Apache-2.0
// ReferenceFs: a directory on one of the kernel's own filesystems, for the
// conformance suite to compare a mimicfs profile with: a fresh tmpfs, or a
// fresh ext4, xfs or btrfs made on a loop device (needs root, mkfs.* and loop
// devices). Unmounted and detached when it goes.
#pragma once

#include <string>

namespace mimicfs::conformance {

class ReferenceFs {
 public:
  // `kind`: tmpfs, ext4, xfs or btrfs. On failure, path() is empty and
  // error() says why.
  explicit ReferenceFs(const std::string& kind);
  ~ReferenceFs();
  ReferenceFs(const ReferenceFs&) = delete;
  ReferenceFs& operator=(const ReferenceFs&) = delete;

  const std::string& path() const { return mountpoint_; }
  const std::string& error() const { return error_; }

  // The kernel filesystem a profile emulates: ext4, xfs, btrfs; tmpfs for the
  // others (nfs, nfs42, ideal), whose POSIX behaviour is a local disk's.
  static std::string for_profile(const std::string& profile);

 private:
  std::string work_;        // the scratch directory: image and mountpoint
  std::string mountpoint_;  // empty until mounted
  std::string loop_;        // the loop device, if any
  std::string error_;
};

}  // namespace mimicfs::conformance
