// SPDX-License-Identifier: Apache-2.0
#include "engine/core/volume.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <unistd.h>

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

OperationReply Volume::dispatch(const Operation& operation, Work& work) {
  return serve_operation(operation, [&](const auto& request) { return serve(request, work); });
}

Result<Attributes> Volume::serve(const ops::Lookup& request, Work&) {
  const auto& [parent, name] = request;
  return namespace_.lookup(parent, name);
}

Result<Attributes> Volume::entry(uint64_t parent, const std::string& name) {
  return namespace_.lookup(parent, name, /*reference=*/false);
}

Result<void> Volume::serve(const ops::Forget& request, Work& work) {
  const auto& [inode, references] = request;
  namespace_.forget(inode, references, work);
  return {};
}

Result<Attributes> Volume::serve(const ops::Create& request, Work& work) {
  const auto& [parent, name, mode, rdev, owner, open_handle] = request;
  const uint32_t type = mode & S_IFMT;
  if (type == S_IFDIR || type == S_IFLNK) return fail(EINVAL);
  return namespace_.add(parent, name, type == 0 ? (mode | S_IFREG) : mode, owner, rdev, "",
                        open_handle, work);
}

Result<Attributes> Volume::serve(const ops::Tmpfile& request, Work& work) {
  const auto& [parent, mode, owner] = request;
  // Never ENOSYS: the FUSE kernel would refuse O_TMPFILE for the whole mount.
  if (!profile_.tmpfile) return fail(EOPNOTSUPP);
  return namespace_.add_unnamed(parent, S_IFREG | (mode & 07777), owner, work);
}

Result<Attributes> Volume::serve(const ops::Mkdir& request, Work& work) {
  const auto& [parent, name, mode, owner] = request;
  return namespace_.add(parent, name, S_IFDIR | (mode & 07777), owner, 0, "", false, work);
}

Result<Attributes> Volume::serve(const ops::Symlink& request, Work& work) {
  const auto& [parent, name, target, owner] = request;
  if (target.size() >= PATH_MAX) return fail(ENAMETOOLONG);
  return namespace_.add(parent, name, S_IFLNK | 0777, owner, 0, target, false, work);
}

Result<std::string> Volume::serve(const ops::Readlink& request, Work&) {
  const uint64_t inode = request.inode;
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  if (!S_ISLNK(node->mode)) return fail(EINVAL);
  std::lock_guard lock(node->mutex);
  return node->symlink_target;
}

Result<Attributes> Volume::serve(const ops::Link& request, Work& work) {
  const auto& [inode, new_parent, new_name] = request;
  return namespace_.link(inode, new_parent, new_name, work);
}

Result<void> Volume::serve(const ops::Unlink& request, Work& work) {
  const auto& [parent, name] = request;
  return namespace_.unlink(parent, name, work);
}

Result<void> Volume::serve(const ops::Rmdir& request, Work& work) {
  const auto& [parent, name] = request;
  return namespace_.rmdir(parent, name, work);
}

Result<void> Volume::serve(const ops::Rename& request, Work& work) {
  const auto& [parent, name, new_parent, new_name, flags] = request;
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

Result<std::vector<DirectoryEntry>> Volume::serve(const ops::ReadDirectory& request, Work&) {
  const uint64_t inode = request.inode;
  return namespace_.read_directory(inode);
}

// ---------------------------------------------------------------------------
// Files

Result<void> Volume::serve(const ops::Open& request, Work& work) {
  const auto& [inode, flags, handle] = request;
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

Result<void> Volume::serve(const ops::Flush& request, Work& work) {
  const auto& [inode, writer] = request;
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

Result<void> Volume::serve(const ops::Release& request, Work& work) {
  const uint64_t inode = request.inode;
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
  return {};
}

Result<void> Volume::serve(const ops::Fsync& request, Work& work) {
  const auto& [inode, datasync] = request;
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

Result<FilesystemStats> Volume::serve(const ops::Statfs&, Work&) {
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
