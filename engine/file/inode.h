// SPDX-License-Identifier: Apache-2.0
// Inode: one file, directory, symlink or device node of a Volume, as the
// volume's inode table holds it. Two locks guard it, from two concerns:
//   - its own `mutex`: attributes, xattrs, open handles and, for a regular
//     file, everything about its contents (the RegularFile);
//   - the Namespace's mutex: its links, references and directory
//     entries (the compiler cannot name that lock from here; Volume's
//     *_locked functions, which require it, are the only writers).
#pragma once

#include <sys/stat.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "engine/base/thread_annotations.h"
#include "engine/file/regular_file.h"
#include "engine/fs/file_system.h"

namespace mimicfs {

struct Inode {
  Inode(uint64_t number, uint32_t mode, uint64_t group)
      : number(number), mode(mode), group(group) {}
  const uint64_t number;
  const uint32_t mode;   // type bits never change; permission bits live in `permissions`
  const uint64_t group;  // the allocation group its blocks are placed in

  mutable std::mutex mutex;
  uint32_t permissions GUARDED_BY(mutex) = 0;
  uint32_t uid GUARDED_BY(mutex) = 0;
  uint32_t gid GUARDED_BY(mutex) = 0;
  uint64_t rdev GUARDED_BY(mutex) = 0;
  timespec atime GUARDED_BY(mutex){};
  timespec mtime GUARDED_BY(mutex){};
  timespec ctime GUARDED_BY(mutex){};
  std::map<std::string, std::string> xattrs GUARDED_BY(mutex);
  uint32_t open_handles GUARDED_BY(mutex) = 0;
  // Regular files only; the pointer is set once, before the inode is shared.
  std::unique_ptr<RegularFile> file PT_GUARDED_BY(mutex);
  bool reclaim_queued GUARDED_BY(mutex) = false;  // a deferred task will free its storage
  bool in_journal GUARDED_BY(mutex) = false;  // listed in the Volume's uncommitted files
  std::string symlink_target GUARDED_BY(mutex);

  // Guarded by Namespace::mutex_ (nlink is atomic so getattr can read it
  // without that lock; a file's last link drops under its mutex too, where
  // release() reads it):
  std::atomic<uint32_t> nlink{0};
  uint64_t references = 0;
  std::map<std::string, std::shared_ptr<Inode>> entries;  // directories only
  uint64_t parent = 0;  // the directory of its last entry (0: none yet)
  std::string name;     // that entry's name, for fault rules' paths
  bool unnamed = false;  // an O_TMPFILE file never linked: link() may name it
  // Removals of its entries not yet durable (NamespaceJournal): a crash may put
  // them back, so its storage stays until they are (atomic: Volume reads it
  // under the inode's mutex alone).
  std::atomic<uint32_t> pending_removals{0};

  // What stat(2) says on `profile`: st_blocks counts delayed blocks, as on
  // ext4 and xfs (they are promised to the file).
  Attributes attributes(const Profile& profile) const REQUIRES(mutex) {
    const uint64_t unit = profile.allocation_unit;
    Attributes a;
    a.inode = number;
    a.mode = mode | permissions;
    a.nlink = is_directory() && !profile.directory_link_count
                  ? 1
                  : nlink.load(std::memory_order_relaxed);
    a.uid = uid;
    a.gid = gid;
    a.rdev = rdev;
    a.size = S_ISLNK(mode) ? symlink_target.size() : file ? file->size() : 0;
    a.blocks = file ? file->space().blocks() * unit / 512 : 0;
    a.block_size = static_cast<uint32_t>(profile.statfs_block_size);
    a.atime = atime;
    a.mtime = mtime;
    a.ctime = ctime;
    return a;
  }

  bool is_directory() const { return S_ISDIR(mode); }
  bool is_regular() const { return S_ISREG(mode); }
};

}  // namespace mimicfs
