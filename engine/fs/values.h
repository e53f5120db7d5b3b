// SPDX-License-Identifier: Apache-2.0
// The values the engine's operations take and return (operations.h).
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mimicfs {

// The root directory's inode number, on every volume.
inline constexpr uint64_t kRootInode = 1;

struct Attributes {
  uint64_t inode = 0;
  uint32_t mode = 0;  // type and permission bits, as st_mode
  uint32_t nlink = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t rdev = 0;
  uint64_t size = 0;
  uint64_t blocks = 0;      // 512-byte units allocated, as st_blocks
  uint32_t block_size = 0;  // st_blksize: the profile's statfs block size
  timespec atime{}, mtime{}, ctime{};
};

// Why a file may lose its S_ISUID and S_ISGID bits, as Linux's VFS decides
// (the kernel says which with FUSE_HANDLE_KILLPRIV_V2's flags). S_ISUID goes;
// S_ISGID goes with group execute, or when the caller (CallerScope's
// Credentials) is neither in the file's group nor holds CAP_FSETID
// (setattr_should_drop_sgid, Linux 6.2+); security.capability goes too.
enum class SetIdClearing : uint8_t {
  kNone,
  // A write, truncate or open with O_TRUNC by a caller without CAP_FSETID:
  // regular files only (setattr_should_drop_suidgid, file_remove_privs).
  kModification,
  // chown or chgrp, by anyone: every type but a directory (chown_common).
  kOwnerChange,
  // A SETATTR that sets nothing: the kernel's own __remove_privs before a
  // write, fallocate or copy_file_range, or a chown(-1, -1). From a caller
  // with CAP_FSETID only security.capability goes (the kernel kills nothing
  // else for it); from the owner or a caller that may write the file, as
  // kOwnerChange; from anyone else nothing (ext4 refuses that chown).
  kPrivilegeRemoval,
};

// Not an open(2) flag (Linux's end at bit 22): with open's O_TRUNC or a
// write, SetIdClearing::kModification.
inline constexpr int kKillSuidgid = 1 << 30;
// Nor is this: the write goes through an NFS lock the client lost after a
// server restart (NfsClientLayer::lock_lost): it never reaches the server.
inline constexpr int kLockLost = 1 << 29;

// setattr's changes; an absent field is left alone. A timestamp whose tv_nsec is
// UTIME_NOW is set to the volume's current time.

struct AttributeChanges {
  std::optional<uint32_t> mode;  // permission bits only
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::optional<uint64_t> size;
  std::optional<timespec> atime;
  std::optional<timespec> mtime;
  // Set-ID bits cleared first, if the change is accepted.
  SetIdClearing kill_suidgid = SetIdClearing::kNone;
  // The size comes through a descriptor (ftruncate): the times change even
  // when the size does not. The VFS asks for that with ATTR_MTIME, which the
  // FUSE kernel leaves out for an ftruncate (update_mtime in fs/fuse/dir.c).
  bool by_descriptor = false;
};

struct Owner {
  uint32_t uid = 0;
  uint32_t gid = 0;
};

struct DirectoryEntry {
  std::string name;
  uint64_t inode = 0;
  uint32_t type = 0;  // S_IFMT bits
};

// What crash() undid, for a cache in front of the volume (the kernel's) to forget.
struct CrashReport {
  std::vector<std::pair<uint64_t, std::string>> removed_entries;  // (directory, name)
  std::vector<uint64_t> restored_files;                           // inode numbers
  std::vector<uint64_t> dropped_caches;  // every regular file: its cached pages went
};

// What the kernel's own threads did in one call of FileSystem::background.
struct BackgroundReport {
  uint64_t files_written_back = 0;  // by the flusher
  uint64_t bytes_written_back = 0;
  uint64_t files_committed = 0;     // made durable by the commit
  bool committed = false;           // the commit made anything durable
};

struct FilesystemStats {
  uint64_t block_size = 0;     // f_bsize
  uint64_t fragment_size = 0;  // f_frsize
  uint64_t blocks = 0;         // f_blocks, in fragment_size units
  uint64_t blocks_free = 0;
  uint64_t blocks_available = 0;
  uint64_t files = 0;
  uint64_t files_free = 0;
  uint64_t name_max = 0;
};

}  // namespace mimicfs
