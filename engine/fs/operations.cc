// SPDX-License-Identifier: Apache-2.0
#include "engine/fs/operations.h"

#include <linux/falloc.h>

namespace mimicfs {

std::string_view op_name(Op op) {
  static constexpr std::string_view kNames[] = {
      "lookup",    "getattr",   "setattr",     "truncate",        "create",  "mkdir",
      "symlink",   "readlink",  "link",        "unlink",          "rmdir",   "rename",
      "open",      "release",   "readdir",     "read",            "write",   "flush",
      "fsync",     "fdatasync", "fallocate",   "punch",           "lseek",   "statfs",
      "setxattr",  "getxattr",  "listxattr",   "removexattr",     "copy_file_range",
      "tmpfile"};
  static_assert(std::size(kNames) == static_cast<size_t>(Op::kCount));
  return kNames[static_cast<size_t>(op)];
}

namespace ops {

Call Fallocate::call() const {
  return {(mode & FALLOC_FL_PUNCH_HOLE) ? Op::kPunch : Op::kFallocate, inode, {}};
}

}  // namespace ops
}  // namespace mimicfs
