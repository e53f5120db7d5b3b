// SPDX-License-Identifier: Apache-2.0
#include "engine/core/volume.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace mimicfs {
namespace {

// Linux's limit for a file offset; the emulated backends share it.
constexpr uint64_t kMaxFileSize = RegularFile::kMaxFileSize;

}  // namespace

Volume::Volume(Profile profile, std::unique_ptr<DataStore> store, const WallClock& clock)
    : profile_(std::move(profile)),
      unit_(profile_.allocation_unit),
      attributes_synchronous_(NamespaceJournal::durability_of(profile_) ==
                              NamespaceJournal::Durability::kSynchronous),
      store_(std::move(store)),
      clock_(clock),
      space_(profile_),
      dirty_pages_(profile_.dirty_limit_bytes),
      journal_commits_files_(NamespaceJournal::durability_of(profile_) ==
                             NamespaceJournal::Durability::kJournal),
      namespace_(profile_, space_.allocator().group_count(), clock_,
                 Namespace::Hooks{[this](uint64_t group) {
                                    return std::make_unique<RegularFile>(profile_, space_,
                                                                         dirty_pages_, group,
                                                                         store_->create_file());
                                  },
                                  [this](const std::shared_ptr<Inode>& file, Work& work) {
                                    assert_held(file->mutex);
                                    last_link_locked(file, work);
                                  },
                                  [this](const std::shared_ptr<Inode>& inode, Work&) {
                                    assert_held(inode->mutex);
                                    // Unless a deferred task frees them, the blocks go now.
                                    if (inode->file && !inode->reclaim_queued)
                                      release_storage_locked(*inode);
                                  },
                                  [this](const std::shared_ptr<Inode>& inode, Work& work) {
                                    assert_held(inode->mutex);
                                    // The rest of it: what give_up_blocks() kept.
                                    if (inode->file && inode->open_handles == 0)
                                      free_storage_locked(inode, work);
                                  }}) {}

Volume::~Volume() = default;

// ---------------------------------------------------------------------------
// Helpers

void Volume::last_link_locked(const std::shared_ptr<Inode>& file, Work& work) {
  // Charged whether the blocks go now or at the last close: seed 004's cost of
  // freeing a punched file's extents is the unlink's (unless a background task
  // frees them, and costs them).
  if (!profile_.background_reclaim) {
    work.extents_freed += file->file->space().extents().extent_count();
    work.bytes_freed += file->file->space().extents().mapped_blocks() * unit_;
  }
  // As Linux's final iput: the last link of a file nobody has open frees its
  // blocks now; the kernel's cached reference only keeps the inode number.
  if (file->open_handles == 0) free_storage_locked(file, work);
}

void Volume::release_storage_locked(Inode& inode) {
  // Linked again since (a crash put an entry back): nothing of it goes.
  if (inode.nlink > 0) return;
  // A removal a crash may still undo: the blocks go back to the device (ext4
  // and xfs report them free at once), the contents and the state at the last
  // sync stay until the removal is durable (Hooks::removal_settled).
  if (inode.pending_removals > 0) {
    inode.file->give_up_blocks();
  } else {
    inode.file->release();
  }
}

void Volume::free_storage_locked(const std::shared_ptr<Inode>& inode, Work& work) {
  if (!profile_.background_reclaim) {
    release_storage_locked(*inode);
    return;
  }
  // The page cache and contents go with the inode; the blocks wait for the task.
  // (A removal a crash may undo keeps the contents: the pages go alone.)
  if (inode->pending_removals == 0) {
    inode->file->drop_contents();
  } else {
    inode->file->drop_page_cache();
  }
  inode->file->drop_reservations();
  if (inode->reclaim_queued) return;
  inode->reclaim_queued = true;
  const FileSpace& space = inode->file->space();
  const DeferredTask task{0, DeferredTask::Kind::kReclaim, inode->number,
                          space.extents().extent_count(), space.blocks() * unit_};
  work.deferred.push_back(deferred_.defer(task, [this, inode] {
    std::lock_guard lock(inode->mutex);
    release_storage_locked(*inode);
    inode->reclaim_queued = false;  // anything written since goes with the inode
  }));
}

// ---------------------------------------------------------------------------
// Namespace

Result<Attributes> Volume::getattr(uint64_t inode, Work&) {
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  return node->attributes(profile_);
}

Result<Attributes> Volume::setattr(uint64_t inode, const AttributeChanges& changes, Work& work) {
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  work.file = node->number;
  std::lock_guard lock(node->mutex);
  if (node->is_regular()) before_attribute_change(*node, work);
  auto attributes = do_setattr(*node, changes);
  if (!attributes) return attributes;
  ++work.metadata_updates;
  if (node->is_regular()) after_attribute_change(*node);
  return attributes;
}

void Volume::note_blocks_change(const Inode& node, uint64_t blocks_before, Work& work) {
  if (node.file->space().blocks() != blocks_before) work.changed_attributes.push_back(node.number);
}

void Volume::before_attribute_change(Inode& node, Work& work) {
  // As nfs_setattr and nfs42_proc_deallocate: the client writes back and commits
  // the file before it sends the change.
  if (attributes_synchronous_) node.file->sync(0, kMaxFileSize, work);
}

void Volume::after_attribute_change(Inode& node, uint64_t allocated_end) {
  // The server commits SETATTR, ALLOCATE and DEALLOCATE before it replies.
  if (attributes_synchronous_) node.file->commit_attributes(allocated_end);
  note_uncommitted_locked(node);
}

void Volume::note_uncommitted_locked(Inode& node) {
  if (!journal_commits_files_ || node.in_journal || !node.file->unsynced()) return;
  node.in_journal = true;
  std::lock_guard lock(journal_mutex_);
  uncommitted_.push_back(node.number);
}

void Volume::commit_journal_files() {
  if (!journal_commits_files_) return;
  std::vector<uint64_t> files;
  {
    std::lock_guard lock(journal_mutex_);
    files.swap(uncommitted_);
  }
  for (const uint64_t number : files) {
    auto node = namespace_.find(number);
    if (!node || !node->is_regular()) continue;
    std::lock_guard lock(node->mutex);
    node->in_journal = false;
    // A removed file a crash may still bring back keeps its last sync.
    if (node->nlink == 0 && node->pending_removals > 0) continue;
    node->file->commit();
  }
}

namespace {

// Whether `caller` owns `node` or may write it, by its mode: who the kernel's
// own privilege removal (file_remove_privs) comes from.
bool owns_or_may_write(const Inode& node, const Credentials& caller) REQUIRES(node.mutex) {
  if (caller.uid() == node.uid) return true;
  const uint32_t bits = caller.in_group(node.gid) ? node.permissions >> 3 : node.permissions;
  return (bits & S_IWOTH) != 0;
}

}  // namespace

bool Volume::kill_suidgid_locked(Inode& node, SetIdClearing why) {
  if (why == SetIdClearing::kNone || node.is_directory()) return false;
  if (why == SetIdClearing::kModification && !node.is_regular()) return false;
  // The kernel flags every write by a caller without CAP_FSETID, whatever the
  // file: most come here with nothing to clear, and ask the caller nothing.
  const auto capability = node.xattrs.find("security.capability");
  const bool has_capability = capability != node.xattrs.end();
  if ((node.permissions & (S_ISUID | S_ISGID)) == 0 && !has_capability) return false;
  const Credentials* caller = CallerScope::credentials();
  bool clear_set_id = true;
  if (why == SetIdClearing::kPrivilegeRemoval && caller != nullptr) {
    // A capable caller's removal takes only security.capability (the kernel
    // kills no bit for it). One from a caller that neither owns nor may write
    // the file is a chown(-1, -1), which ext4 refuses: nothing changes.
    clear_set_id = !caller->has_fsetid();
    if (clear_set_id && !owns_or_may_write(node, *caller)) return false;
  } else if (why == SetIdClearing::kPrivilegeRemoval) {
    clear_set_id = false;
  }
  // security.capability goes with any of them (ATTR_KILL_PRIV:
  // security_inode_killpriv).
  bool changed = false;
  if (has_capability) {
    node.xattrs.erase(capability);
    changed = true;
  }
  if (clear_set_id) {
    uint32_t kept = node.permissions & ~S_ISUID;
    // setattr_should_drop_sgid: with group execute it goes; without, unless
    // the caller is in the file's group or (not for a modification, whose
    // caller lacks it by the kernel's word) holds CAP_FSETID.
    if (kept & S_ISGID) {
      const bool may_keep_sgid =
          !(kept & S_IXGRP) &&
          (caller == nullptr || caller->in_group(node.gid) ||
           (why != SetIdClearing::kModification && caller->has_fsetid()));
      if (!may_keep_sgid) kept &= ~S_ISGID;
    }
    changed |= kept != node.permissions;
    node.permissions = kept;
  }
  if (changed) node.ctime = clock_.now();
  return changed;
}

Result<Attributes> Volume::do_setattr(Inode& node, const AttributeChanges& changes) {
  const timespec now = clock_.now();
  if (changes.size) {
    if (node.is_directory()) return fail(EISDIR);
    if (!node.is_regular()) return fail(EINVAL);
    if (*changes.size > kMaxFileSize) return fail(EFBIG);
    // xfs_setattr_size: truncate(2) (no time asked for) to 0 of an empty file
    // with no blocks returns before anything, set-ID bits included.
    const bool only_size = !changes.mode && !changes.uid && !changes.gid && !changes.atime &&
                           !changes.mtime && !changes.by_descriptor;
    if (profile_.truncate_empty_shortcut && only_size && *changes.size == 0 &&
        node.file->size() == 0 && node.file->space().blocks() == 0) {
      return node.attributes(profile_);
    }
  }
  kill_suidgid_locked(node, changes.kill_suidgid);
  if (changes.size) {
    // A size change touches the mtime, and so does any ftruncate; truncate(2)
    // to the same size only on ext4.
    if (*changes.size != node.file->size() || changes.by_descriptor ||
        profile_.truncate_same_size_updates_times) {
      node.mtime = now;
    }
    node.file->truncate(*changes.size);
  }
  if (changes.mode) node.permissions = *changes.mode & 07777;
  if (changes.uid) node.uid = *changes.uid;
  if (changes.gid) node.gid = *changes.gid;
  auto resolve = [&](timespec t) { return t.tv_nsec == UTIME_NOW ? now : t; };
  if (changes.atime && changes.atime->tv_nsec != UTIME_OMIT) node.atime = resolve(*changes.atime);
  if (changes.mtime && changes.mtime->tv_nsec != UTIME_OMIT) node.mtime = resolve(*changes.mtime);
  node.ctime = now;
  return node.attributes(profile_);
}

Result<Attributes> Volume::lookup(uint64_t parent, const std::string& name, Work&) {
  return namespace_.lookup(parent, name);
}

Result<Attributes> Volume::entry(uint64_t parent, const std::string& name) {
  return namespace_.lookup(parent, name, /*reference=*/false);
}

void Volume::forget(uint64_t inode, uint64_t references, Work& work) {
  namespace_.forget(inode, references, work);
}

Result<Attributes> Volume::create(uint64_t parent, const std::string& name, uint32_t mode,
                                  uint64_t rdev, Owner owner, bool open_handle, Work& work) {
  const uint32_t type = mode & S_IFMT;
  if (type == S_IFDIR || type == S_IFLNK) return fail(EINVAL);
  return namespace_.add(parent, name, type == 0 ? (mode | S_IFREG) : mode, owner, rdev, "",
                        open_handle, work);
}

Result<Attributes> Volume::tmpfile(uint64_t parent, uint32_t mode, Owner owner, Work& work) {
  // Never ENOSYS: the FUSE kernel would refuse O_TMPFILE for the whole mount.
  if (!profile_.tmpfile) return fail(EOPNOTSUPP);
  return namespace_.add_unnamed(parent, S_IFREG | (mode & 07777), owner, work);
}

Result<Attributes> Volume::mkdir(uint64_t parent, const std::string& name, uint32_t mode,
                                 Owner owner, Work& work) {
  return namespace_.add(parent, name, S_IFDIR | (mode & 07777), owner, 0, "", false, work);
}

Result<Attributes> Volume::symlink(uint64_t parent, const std::string& name,
                                   const std::string& target, Owner owner, Work& work) {
  if (target.size() >= PATH_MAX) return fail(ENAMETOOLONG);
  return namespace_.add(parent, name, S_IFLNK | 0777, owner, 0, target, false, work);
}

Result<std::string> Volume::readlink(uint64_t inode, Work&) {
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  if (!S_ISLNK(node->mode)) return fail(EINVAL);
  std::lock_guard lock(node->mutex);
  return node->symlink_target;
}

Result<Attributes> Volume::link(uint64_t inode, uint64_t new_parent, const std::string& new_name,
                                Work& work) {
  return namespace_.link(inode, new_parent, new_name, work);
}

Result<void> Volume::unlink(uint64_t parent, const std::string& name, Work& work) {
  return namespace_.unlink(parent, name, work);
}

Result<void> Volume::rmdir(uint64_t parent, const std::string& name, Work& work) {
  return namespace_.rmdir(parent, name, work);
}

Result<void> Volume::rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                            const std::string& new_name, unsigned flags, Work& work) {
  if (profile_.write_back_on_replace) {
    write_back_before_replace(parent, name, new_parent, new_name, flags, work);
  }
  return namespace_.rename(parent, name, new_parent, new_name, flags, work);
}

void Volume::write_back_before_replace(uint64_t parent, const std::string& name,
                                       uint64_t new_parent, const std::string& new_name,
                                       unsigned flags, Work& work) {
  // ext4's auto_da_alloc (ext4_rename: the target exists and is not a
  // directory) and btrfs: a rename of a regular file over another entry
  // writes the source back, and in data=ordered the commit that carries the
  // rename carries that data, so "write a temporary file, rename it over the
  // old one" without fsync leaves the new contents or the old, never an empty
  // file. Here the data is durable from the rename on, whichever commit (the
  // periodic one, any fsync) makes the rename durable; a crash that undoes the
  // rename leaves the source's old name with the new data. The I/O is
  // asynchronous (filemap_flush): the rename is not charged for it. An exchange
  // and a rename that may not replace do not write back.
  if (flags & (RENAME_EXCHANGE | RENAME_NOREPLACE)) return;
  auto source = namespace_.entry(parent, name);
  if (!source || !source->is_regular()) return;
  auto replaced = namespace_.entry(new_parent, new_name);
  if (!replaced || replaced->is_directory() || replaced == source) return;
  Work writeback;
  std::lock_guard lock(source->mutex);
  const uint64_t blocks = source->file->space().blocks();
  source->file->write_back_all(writeback);
  source->file->commit();
  note_blocks_change(*source, blocks, work);
}

Result<std::vector<DirectoryEntry>> Volume::read_directory(uint64_t inode, Work&) {
  return namespace_.read_directory(inode);
}

// ---------------------------------------------------------------------------
// Files

Result<void> Volume::open(uint64_t inode, int flags, Work& work) {
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  if (node->is_directory() && (flags & O_ACCMODE) != O_RDONLY) return fail(EISDIR);
  if (!node->is_regular()) return {};
  if ((flags & O_DIRECT) && !profile_.direct_io) return fail(EINVAL);
  work.file = node->number;
  ++work.opens;
  std::lock_guard lock(node->mutex);
  ++node->open_handles;
  // O_TRUNC is the filesystem's job: the FUSE kernel (atomic_o_trunc, which
  // libfuse enables) passes it to open and sends no truncating setattr.
  if (flags & O_TRUNC) {
    if ((flags & kKillSuidgid) && kill_suidgid_locked(*node, SetIdClearing::kModification)) {
      work.changed_attributes.push_back(node->number);  // the kernel drops size, not mode
    }
    before_attribute_change(*node, work);
    node->file->truncate(0);
    after_attribute_change(*node);
    node->mtime = node->ctime = clock_.now();
  }
  return {};
}

Result<void> Volume::flush(uint64_t inode, bool writer, Work& work) {
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  if (!node->is_regular() || !writer) return {};
  work.file = node->number;
  std::lock_guard lock(node->mutex);
  const uint64_t blocks = node->file->space().blocks();
  // FUSE's RELEASE may arrive after close(2) has returned; the last close is
  // known here, so a stat right after close sees the file as the backend leaves it.
  Work writeback;  // started, not waited for: not charged to the close
  node->file->flush(node->open_handles <= 1, work, writeback);
  note_blocks_change(*node, blocks, work);
  note_uncommitted_locked(*node);
  return {};
}

void Volume::release(uint64_t inode, Work& work) {
  if (auto node = namespace_.find(inode); node && node->is_regular()) {
    std::lock_guard lock(node->mutex);
    if (node->open_handles > 0) --node->open_handles;
    if (node->open_handles == 0) {
      work.file = node->number;
      const uint64_t blocks = node->file->space().blocks();
      node->file->close(work);
      note_blocks_change(*node, blocks, work);
      note_uncommitted_locked(*node);
      // Unlinked while open: nlink changes under this lock too (Namespace::drop_link_locked).
      if (node->nlink.load() == 0) free_storage_locked(node, work);
    }
  }
}

Result<std::shared_ptr<Inode>> Volume::file_for_io(uint64_t inode, uint64_t offset, uint64_t length,
                                                   int flags) {
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  if (node->is_directory()) return fail(EISDIR);
  if (!node->is_regular()) return fail(EINVAL);
  // The kernel checks no alignment for FUSE; the emulated device does, as
  // ext4 and xfs do for O_DIRECT (NFS has no constraint: logical_block_size 1).
  if ((flags & O_DIRECT) &&
      (offset % profile_.logical_block_size != 0 || length % profile_.logical_block_size != 0)) {
    return fail(EINVAL);
  }
  return node;
}

Result<size_t> Volume::read(uint64_t inode, uint64_t offset, std::span<std::byte> out, int flags,
                            Work& work) {
  auto found = file_for_io(inode, offset, out.size(), flags);
  if (!found) return std::unexpected(found.error());
  Inode& node = **found;
  work.file = node.number;
  std::lock_guard lock(node.mutex);
  return node.file->read(offset, out, (flags & O_DIRECT) != 0, work);
}

template <typename Attempt>
auto Volume::retry_after_reclaim(Work& work, Attempt&& attempt) -> decltype(attempt()) {
  const uint64_t boot = crashes();
  auto result = attempt();
  if (result || result.error().value != ENOSPC || !profile_.background_reclaim) return result;
  // As xfs: flush the queue (tasks another thread is running included) and
  // retry once, whatever the flush freed.
  deferred_.flush();
  work.waited_for_deferred = true;
  if (crashes() != boot) return fail(EIO);  // the power went meanwhile
  return attempt();
}

Result<size_t> Volume::write(uint64_t inode, uint64_t offset, std::span<const std::byte> data,
                             int flags, Work& work) {
  return retry_after_reclaim(work, [&] { return do_write(inode, offset, data, flags, work); });
}

Result<size_t> Volume::do_write(uint64_t inode, uint64_t offset, std::span<const std::byte> data,
                                int flags, Work& work) {
  auto found = file_for_io(inode, offset, data.size(), flags);
  if (!found) return std::unexpected(found.error());
  Inode& node = **found;
  work.file = node.number;
  const uint32_t flushes_before = work.flushes;  // copy_range writes chunks into one Work
  {
    std::lock_guard lock(node.mutex);
    // Before the data, as file_remove_privs: a failed write has cleared them too.
    if ((flags & kKillSuidgid) && kill_suidgid_locked(node, SetIdClearing::kModification)) {
      work.changed_attributes.push_back(node.number);  // the kernel drops size, not mode
    }
    auto written = node.file->write(offset, data, flags, work);
    if (!written || *written == 0) return written;
    node.mtime = node.ctime = clock_.now();
    note_uncommitted_locked(node);
  }
  if (flags & O_DSYNC) {
    // Its commit is fsync's: on a journal every namespace change, and every
    // other file's changes, go with it. A flush alone (O_DSYNC over blocks
    // written in place, RegularFile::write) commits no transaction.
    const bool in_place = work.flushes > flushes_before;
    if (namespace_.commit(node.number, /*only_its_creation=*/false, work)) {
      if (in_place) {  // the journal's commit flushes the data too
        --work.flushes;
        ++work.commits;
      }
      commit_journal_files();
    } else if (!in_place) {
      commit_journal_files();
    }
  }
  return data.size();
}

Result<size_t> Volume::copy_range(uint64_t in, uint64_t in_offset, uint64_t out,
                                  uint64_t out_offset, uint64_t length, int flags, Work& work) {
  // Overlapping ranges of one file, compared without overflow.
  if (in == out && (in_offset <= out_offset ? out_offset - in_offset < length
                                            : in_offset - out_offset < length)) {
    return fail(EINVAL);
  }
  // In chunks, each read then written: one request, the work of both. A power
  // cut between chunks ends it: what follows would land on the crashed volume.
  constexpr uint64_t kChunk = 1 << 20;
  const uint64_t boot = crashes();
  std::vector<std::byte> buffer(std::min(length, kChunk));
  uint64_t copied = 0;
  const auto partial = [&](Errno error) -> Result<size_t> {
    if (copied > 0) return copied;
    return std::unexpected(error);
  };
  while (copied < length) {
    if (crashes() != boot) return partial(Errno{EIO});
    const std::span<std::byte> chunk(buffer.data(), std::min(length - copied, kChunk));
    auto got = read(in, in_offset + copied, chunk, 0, work);
    if (!got) return partial(got.error());
    if (*got == 0) break;  // the source's end
    auto put = write(out, out_offset + copied, chunk.first(*got), flags & (O_SYNC | O_DSYNC), work);
    if (!put) return partial(put.error());
    copied += *got;
    if (*got < chunk.size()) break;
  }
  work.bytes = copied;
  work.file = out;
  return copied;
}

Result<void> Volume::do_fallocate(Inode& node, int mode, uint64_t offset, uint64_t length,
                                  Work& work) {
  FallocateMode kind;
  if (mode == 0) {
    kind = FallocateMode::kAllocate;
  } else if (mode == FALLOC_FL_KEEP_SIZE) {
    kind = FallocateMode::kKeepSize;
  } else if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
    kind = FallocateMode::kPunchHole;
  } else if ((mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE) {
    kind = FallocateMode::kZeroRange;
  } else {
    return fail(EOPNOTSUPP);
  }
  if (!profile_.supports(kind)) return fail(EOPNOTSUPP);
  if (node.is_directory()) return fail(EISDIR);
  if (!node.is_regular()) return fail(ENODEV);
  const uint64_t size_before = node.file->size();
  // NFS 4.2's client writes the file back before a DEALLOCATE, not an ALLOCATE.
  if (kind == FallocateMode::kPunchHole) before_attribute_change(node, work);
  if (auto done =
          node.file->fallocate(kind, (mode & FALLOC_FL_KEEP_SIZE) != 0, offset, length, work);
      !done) {
    return done;
  }
  const bool sets_size = kind == FallocateMode::kAllocate && !(mode & FALLOC_FL_KEEP_SIZE);
  after_attribute_change(node, sets_size ? offset + length : 0);
  const timespec now = clock_.now();
  if (node.file->size() != size_before) node.mtime = now;
  node.ctime = now;
  return {};
}

Result<void> Volume::fallocate(uint64_t inode, int mode, uint64_t offset, uint64_t length,
                               Work& work) {
  return retry_after_reclaim(work,
                             [&] { return fallocate_once(inode, mode, offset, length, work); });
}

Result<void> Volume::fallocate_once(uint64_t inode, int mode, uint64_t offset, uint64_t length,
                                    Work& work) {
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  work.file = node->number;
  std::lock_guard lock(node->mutex);
  if (auto done = do_fallocate(*node, mode, offset, length, work); !done) return done;
  if (mode & FALLOC_FL_PUNCH_HOLE) {
    ++work.punches;
    work.bytes = length;
  } else {
    ++work.fallocates;
  }
  return {};
}

Result<void> Volume::fsync(uint64_t inode, bool datasync, Work& work) {
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  bool committed = false;
  bool in_place = false;
  if (node->is_regular()) {
    work.file = node->number;
    std::lock_guard lock(node->mutex);
    const uint64_t blocks = node->file->space().blocks();
    in_place = datasync && node->file->overwritten_in_place_only();
    committed = node->file->sync(0, kMaxFileSize, work, in_place);
    note_blocks_change(*node, blocks, work);
  }
  // The namespace changes the profile's model commits with it (NamespaceJournal):
  // on one journal every change, on a log tree the inode's own (a directory's:
  // its entries'); a directory's fsync is how a program asks for them.
  // As ext4's i_datasync_tid: fdatasync of a file with nothing to make durable
  // finds no transaction of its own to commit, unless the file's creation is
  // still pending (a new inode's creation is part of its data).
  const bool journal =
      namespace_.commit(node->number, datasync && node->is_regular() && !committed, work);
  if (journal && !committed) ++work.commits;
  if (journal && committed && in_place) {  // the journal's commit flushes the data too
    --work.flushes;
    ++work.commits;
  }
  // The transaction it commits holds every other file's changes too: their
  // truncates, punches, allocations and the sizes writeback reached. An
  // fdatasync of overwrites in place commits none.
  if ((committed && !in_place) || journal) commit_journal_files();
  return {};
}

Result<uint64_t> Volume::seek(uint64_t inode, uint64_t offset, int whence, Work&) {
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return fail(EINVAL);
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  if (!node->is_regular()) return fail(EINVAL);
  std::lock_guard lock(node->mutex);
  return node->file->seek(offset, whence);
}

Result<FilesystemStats> Volume::statfs(Work&) {
  const FreeSpaceSummary space = space_.allocator().summary();
  FilesystemStats s;
  s.block_size = profile_.statfs_block_size;
  s.fragment_size = profile_.statfs_fragment_size;
  // As ext4 and xfs report it: group metadata is not part of the size.
  s.blocks = (profile_.capacity_bytes - space.metadata_blocks * unit_) / s.fragment_size;
  // What background tasks are freeing counts as free: an allocation that
  // needs it waits for them (retry_after_reclaim).
  s.blocks_free = ((space.free_blocks - space.reserved_blocks) * unit_ +
                   deferred_.stats().pending_free_bytes) /
                  s.fragment_size;
  s.blocks_available = s.blocks_free;
  s.files = Namespace::kMaxInodes;
  s.files_free = Namespace::kMaxInodes - namespace_.inode_count();
  s.name_max = profile_.name_max;
  return s;
}

}  // namespace mimicfs
