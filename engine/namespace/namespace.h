// SPDX-License-Identifier: Apache-2.0
// Namespace: a volume's directory tree and inode table: entries, links, rename,
// inode numbers and allocation groups, and the NamespaceJournal of the changes
// not yet committed (undone by a crash). What a file's storage does when its
// last link goes is not its business: it calls the Volume's Hooks.
//
// Thread-safety: mutex() guards the table, the journal, and every inode's
// namespace fields (links, references, entries, parent and name); an inode's
// own mutex is taken after it (the lock order is in volume.h).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/base/thread_annotations.h"
#include "engine/base/volume_image.h"
#include "engine/file/inode.h"
#include "engine/fs/file_system.h"
#include "engine/fs/result.h"
#include "engine/fs/work.h"
#include "engine/namespace/namespace_journal.h"
#include "engine/profile/profile.h"
#include "engine/time/wall_clock.h"

namespace mimicfs {

class Namespace {
 public:
  static constexpr uint64_t kMaxInodes = uint64_t{1} << 32;

  struct Hooks {
    // The contents of a new regular file whose blocks go in allocation `group`.
    std::function<std::unique_ptr<RegularFile>(uint64_t group)> new_file;
    // A regular file's last link went (its mutex held).
    std::function<void(const std::shared_ptr<Inode>&, Work&)> last_link;
    // An inode left the table: no link, no reference (its mutex held).
    std::function<void(const std::shared_ptr<Inode>&, Work&)> destroyed;
    // The removal of an inode's last entry is durable (a commit, or a crash
    // that could not put it back): its storage may go (its mutex held).
    std::function<void(const std::shared_ptr<Inode>&, Work&)> removal_settled;
  };

  // `group_count`: allocation groups new directories are spread over.
  Namespace(const Profile& profile, uint64_t group_count, const WallClock& clock, Hooks hooks);

  std::mutex& mutex() RETURN_CAPABILITY(mutex_) { return mutex_; }
  std::shared_ptr<Inode> find(uint64_t inode) EXCLUDES(mutex_);
  std::shared_ptr<Inode> find_locked(uint64_t inode) REQUIRES(mutex_);

  // FileSystem's operations of the same names (file_system.h has the contracts).
  // With `reference`, the kernel's lookup count of the child grows by one.
  Result<Attributes> lookup(uint64_t parent, const std::string& name, bool reference = true)
      EXCLUDES(mutex_);
  // The inode `name` in `parent` names, or null; takes no kernel reference.
  std::shared_ptr<Inode> entry(uint64_t parent, const std::string& name) EXCLUDES(mutex_);
  void forget(uint64_t inode, uint64_t references, Work& work) EXCLUDES(mutex_);
  // create, mkdir and symlink: a new inode of `mode` (type and permissions).
  Result<Attributes> add(uint64_t parent, const std::string& name, uint32_t mode, Owner owner,
                         uint64_t rdev, const std::string& symlink_target, bool open_handle,
                         Work& work) EXCLUDES(mutex_);
  // tmpfile: a regular file open once, with no entry yet.
  Result<Attributes> add_unnamed(uint64_t parent, uint32_t mode, Owner owner, Work& work)
      EXCLUDES(mutex_);
  Result<Attributes> link(uint64_t inode, uint64_t new_parent, const std::string& new_name,
                          Work& work) EXCLUDES(mutex_);
  Result<void> unlink(uint64_t parent, const std::string& name, Work& work) EXCLUDES(mutex_);
  Result<void> rmdir(uint64_t parent, const std::string& name, Work& work) EXCLUDES(mutex_);
  Result<void> rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                      const std::string& new_name, unsigned flags, Work& work) EXCLUDES(mutex_);
  Result<std::vector<DirectoryEntry>> read_directory(uint64_t inode) EXCLUDES(mutex_);
  std::string path(uint64_t inode) EXCLUDES(mutex_);
  uint64_t inode_count() EXCLUDES(mutex_);

  // Commits what a sync of `inode` makes durable by the profile's model
  // (NamespaceJournal); with `only_its_creation` (fdatasync of a file with
  // nothing of its own to commit) only when the inode's creation is pending.
  // True when the commit made anything durable.
  bool commit(uint64_t inode, bool only_its_creation, Work& work) EXCLUDES(mutex_);
  // Every pending change is durable now (sync(1)); true when one was pending.
  bool commit_all(Work& work) EXCLUDES(mutex_);
  // The inodes whose last removal a commit made durable. What they held goes
  // in release_settled(), called without the table's lock: freeing 100,000
  // files' storage is the bulk of such a commit, and it need not keep every
  // other operation waiting.
  using Settled = std::vector<std::shared_ptr<Inode>>;
  bool commit_all_locked(Settled& settled) REQUIRES(mutex_);
  // Hooks::removal_settled for each (its mutex held).
  void release_settled(const Settled& settled, Work& work);
  // A crash: the changes since the last commit are undone, newest first.
  // Returns the entries it changed (removed, moved, put back), (directory, name).
  std::vector<std::pair<uint64_t, std::string>> undo_uncommitted(Work& work) REQUIRES(mutex_);
  // Every inode, for a crash that walks them all.
  const std::unordered_map<uint64_t, std::shared_ptr<Inode>>& inodes() const REQUIRES(mutex_) {
    return inodes_;
  }
  // Calls `visit` with each regular file's path and inode (its mutex held),
  // depth first; a file with several links once, under the first path found.
  void for_each_file(const std::function<void(const std::string&, const Inode&)>& visit)
      EXCLUDES(mutex_);

  // Every linked inode (attributes, xattrs, entries, and a regular file's
  // RegularFile::save) for a volume image: nothing may be pending in the
  // journal (commit_all first). Inodes without a link are left out: the
  // kernel's references and the handles end with the mount.
  ImageJson save() EXCLUDES(mutex_);
  // The saved inodes, into a namespace that holds only its root; `load_file`
  // makes a regular file's RegularFile from what it saved.
  using FileLoader =
      std::function<std::unique_ptr<RegularFile>(uint64_t group, const ImageJson& saved)>;
  void load(const ImageJson& saved, const FileLoader& load_file) EXCLUDES(mutex_);

 private:
  static constexpr uint64_t kRootInode = FileSystem::kRootInode;

  // The directory `inode`; a removed one (IS_DEADDIR) is ENOENT unless
  // `removed_too` (O_TMPFILE may be made in it: vfs_tmpfile does not check).
  Result<std::shared_ptr<Inode>> directory_locked(uint64_t inode, bool removed_too = false)
      REQUIRES(mutex_);
  // A new inode in `parent`'s allocation group; a directory starts the next group.
  std::shared_ptr<Inode> new_inode(uint32_t mode, Owner owner, const Inode& parent)
      REQUIRES(mutex_);
  Result<Attributes> add_entry_locked(Inode& parent, const std::string& name,
                                      std::shared_ptr<Inode> child) REQUIRES(mutex_);
  // Drops one link of `child`, destroying it when unreferenced.
  void drop_link_locked(const std::shared_ptr<Inode>& child, Work& work) REQUIRES(mutex_);
  // The inode goes into work.destroyed_inodes.
  void destroy_locked(const std::shared_ptr<Inode>& inode, Work& work) REQUIRES(mutex_);
  std::string path_locked(uint64_t inode) REQUIRES(mutex_);
  // A removal of `child`'s entry `name` in `parent` the journal keeps: the
  // inode stays (removed_) until it is durable.
  void note_removal_locked(const std::shared_ptr<Inode>& child, uint64_t parent,
                           const std::string& name) REQUIRES(mutex_);
  // One of `inode`'s pending removals is settled (committed, or undone by a
  // crash); at the last, the inode when it has no link left, for
  // release_settled().
  std::shared_ptr<Inode> settle_removal_locked(uint64_t inode) REQUIRES(mutex_);
  Settled settle_committed_locked(const std::vector<NamespaceJournal::Change>& committed)
      REQUIRES(mutex_);
  // ImageError unless the loaded inodes form the tree the entries say, from
  // the root, with the link counts they make.
  void check_tree(const std::unordered_map<uint64_t, std::shared_ptr<Inode>>& loaded) const;
  // A crash: the removed entry comes back when its name and directory allow.
  bool restore_entry_locked(const NamespaceJournal::Change& change) REQUIRES(mutex_);

  const Profile& profile_;
  const uint64_t group_count_;
  const WallClock& clock_;
  const Hooks hooks_;

  std::mutex mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<Inode>> inodes_ GUARDED_BY(mutex_);
  uint64_t next_inode_ GUARDED_BY(mutex_) = FileSystem::kFirstFileInode;
  uint64_t next_directory_group_ GUARDED_BY(mutex_) = 1;
  NamespaceJournal journal_ GUARDED_BY(mutex_);
  // Inodes with removals the journal has not committed: kept for a crash to put back.
  std::unordered_map<uint64_t, std::shared_ptr<Inode>> removed_ GUARDED_BY(mutex_);
};

}  // namespace mimicfs
