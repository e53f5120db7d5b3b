// SPDX-License-Identifier: Apache-2.0
// What a mount needs of the host, checked before a daemon starts, so that a
// command names the problem in one line (exit status 2) rather than a daemon
// failing later. No FUSE here: commands that never mount use these too.
#pragma once

#include <string>

namespace mimicfs {

// One-line reason the directory cannot be a mountpoint (missing, not a directory,
// not empty, already a mount), or empty when it can.
std::string check_mountpoint(const std::string& path);
// One-line reason /dev/fuse cannot be used, or empty when it can.
std::string check_fuse_device();

}  // namespace mimicfs
