#include "backends/volume.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>

namespace mimicfs {
namespace {

// Linux's limits for a file offset and an xattr; the emulated backends share them.
constexpr uint64_t kMaxFileSize = RegularFile::kMaxFileSize;
constexpr size_t kMaxXattrValue = 65536;
constexpr size_t kMaxXattrName = 255;
constexpr uint64_t kMaxInodes = uint64_t{1} << 32;

}  // namespace

Volume::Volume(Profile profile, std::unique_ptr<DataStore> store, const WallClock& clock)
    : profile_(std::move(profile)),
      unit_(profile_.allocation_unit),
      store_(std::move(store)),
      clock_(clock),
      space_(profile_),
      dirty_pages_(profile_.dirty_limit_bytes),
      journal_(NamespaceJournal::durability_of(profile_)) {
  auto root = std::make_shared<Inode>(kRootInode, S_IFDIR, 0);
  std::lock_guard lock(root->mutex);  // not shared yet: for the analysis
  root->permissions = 0755;
  root->atime = root->mtime = root->ctime = clock_.now();
  root->nlink = 2;
  root->parent = kRootInode;
  root->references = 1;  // the mount itself: the root is never destroyed
  inodes_.emplace(kRootInode, std::move(root));
}

Volume::~Volume() = default;

// ---------------------------------------------------------------------------
// Helpers

std::shared_ptr<Inode> Volume::find_locked(uint64_t inode) {
  auto it = inodes_.find(inode);
  return it == inodes_.end() ? nullptr : it->second;
}

std::shared_ptr<Inode> Volume::find(uint64_t inode) {
  std::lock_guard lock(namespace_mutex_);
  return find_locked(inode);
}

Result<std::shared_ptr<Inode>> Volume::directory_locked(uint64_t inode) {
  auto dir = find_locked(inode);
  if (!dir) return fail(ENOENT);
  if (!dir->is_directory()) return fail(ENOTDIR);
  return dir;
}

std::shared_ptr<Inode> Volume::new_inode(uint32_t mode, Owner owner, const Inode& parent) {
  // As xfs and ext4's Orlov allocator: a new directory goes to the next group,
  // a file to its directory's.
  const uint64_t group =
      S_ISDIR(mode) ? next_directory_group_++ % space_.allocator().group_count() : parent.group;
  auto inode = std::make_shared<Inode>(next_inode_++, mode & S_IFMT, group);
  std::lock_guard lock(inode->mutex);  // not shared yet: for the analysis
  inode->permissions = mode & 07777;
  inode->uid = owner.uid;
  inode->gid = owner.gid;
  inode->atime = inode->mtime = inode->ctime = clock_.now();
  if (inode->is_regular()) {
    inode->file =
        std::make_unique<RegularFile>(profile_, space_, dirty_pages_, group, store_->create_file());
  }
  return inode;
}

Attributes Volume::attributes(const Inode& inode) const {
  Attributes a;
  a.inode = inode.number;
  a.mode = inode.mode | inode.permissions;
  a.nlink = inode.nlink.load(std::memory_order_relaxed);
  a.uid = inode.uid;
  a.gid = inode.gid;
  a.rdev = inode.rdev;
  a.size = S_ISLNK(inode.mode) ? inode.symlink_target.size() : inode.file ? inode.file->size() : 0;
  // Delayed blocks count, as on ext4 and xfs: they are promised to the file.
  a.blocks = inode.file ? inode.file->space().blocks() * unit_ / 512 : 0;
  a.block_size = static_cast<uint32_t>(profile_.statfs_block_size);
  a.atime = inode.atime;
  a.mtime = inode.mtime;
  a.ctime = inode.ctime;
  return a;
}

Result<Attributes> Volume::add_entry_locked(Inode& parent, const std::string& name,
                                            std::shared_ptr<Inode> child) {
  if (name.size() > profile_.name_max) return fail(ENAMETOOLONG);
  if (parent.entries.contains(name)) return fail(EEXIST);
  if (inodes_.size() >= kMaxInodes) return fail(ENOSPC);
  child->nlink = child->is_directory() ? 2 : 1;
  child->references = 1;
  child->parent = parent.number;
  child->name = name;
  if (child->is_directory()) parent.nlink.fetch_add(1);
  journal_.created(child->number, parent.number, name);
  parent.entries.emplace(name, child);
  inodes_.emplace(child->number, child);
  {
    std::lock_guard lock(parent.mutex);
    parent.mtime = parent.ctime = clock_.now();
  }
  std::lock_guard lock(child->mutex);
  return attributes(*child);
}

void Volume::drop_link_locked(const std::shared_ptr<Inode>& child, Work& work) {
  uint32_t remaining;
  {
    // A file's last link and its last handle are decided under its lock, so
    // exactly one of unlink and release frees the storage.
    std::lock_guard lock(child->mutex);
    remaining = child->is_directory() ? 0 : child->nlink.load() - 1;
    child->nlink = remaining;
    child->ctime = clock_.now();
    if (remaining == 0 && child->is_regular()) {
      // Charged whether the blocks go now or at the last close: seed 004's cost
      // of freeing a punched file's extents is the unlink's (unless a background
      // task frees them, and costs them).
      if (!profile_.background_reclaim) {
        work.extents_freed += child->file->space().extents().extent_count();
      }
      // As Linux's final iput: the last link of a file nobody has open frees
      // its blocks now; the kernel's cached reference only keeps the inode number.
      if (child->open_handles == 0) free_storage_locked(child, work);
    }
  }
  if (remaining == 0 && child->references == 0) destroy_locked(child, work);
}

void Volume::free_storage_locked(const std::shared_ptr<Inode>& inode, Work& work) {
  if (!profile_.background_reclaim) {
    inode->file->release();
    return;
  }
  // The page cache and contents go with the inode; the blocks wait for the task.
  inode->file->drop_contents();
  if (inode->reclaim_queued) return;
  inode->reclaim_queued = true;
  const FileSpace& space = inode->file->space();
  const DeferredTask task{0, DeferredTask::Kind::kReclaim, inode->number,
                          space.extents().extent_count(), space.blocks() * unit_};
  work.deferred.push_back(deferred_.defer(task, [inode] {
    std::lock_guard lock(inode->mutex);
    inode->file->release();
    inode->reclaim_queued = false;  // anything written since goes with the inode
  }));
}

void Volume::destroy_locked(const std::shared_ptr<Inode>& inode, Work& work) {
  if (inode->number == kRootInode) return;
  inodes_.erase(inode->number);
  work.destroyed_inodes.push_back(inode->number);
  // The file's blocks go back now; the Inode goes with its last shared_ptr.
  std::lock_guard lock(inode->mutex);
  if (inode->file && !inode->reclaim_queued) inode->file->release();
}

// ---------------------------------------------------------------------------
// Namespace

Result<Attributes> Volume::lookup(uint64_t parent, const std::string& name, Work&) {
  std::lock_guard lock(namespace_mutex_);
  auto dir = directory_locked(parent);
  if (!dir) return std::unexpected(dir.error());
  if (name.size() > profile_.name_max) return fail(ENAMETOOLONG);
  std::shared_ptr<Inode> child;
  if (name == ".") {
    child = *dir;
  } else if (name == "..") {
    child = find_locked((*dir)->parent);
  } else {
    auto it = (*dir)->entries.find(name);
    if (it != (*dir)->entries.end()) child = it->second;
  }
  if (!child) return fail(ENOENT);
  ++child->references;
  std::lock_guard inode_lock(child->mutex);
  return attributes(*child);
}

void Volume::forget(uint64_t inode, uint64_t references, Work& work) {
  std::lock_guard lock(namespace_mutex_);
  auto node = find_locked(inode);
  if (!node || inode == kRootInode) return;
  node->references -= std::min(node->references, references);
  if (node->references == 0 && node->nlink == 0) destroy_locked(node, work);
}

Result<Attributes> Volume::getattr(uint64_t inode, Work&) {
  auto node = find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  return attributes(*node);
}

Result<Attributes> Volume::setattr(uint64_t inode, const AttributeChanges& changes, Work& work) {
  auto node = find(inode);
  if (!node) return fail(ENOENT);
  work.file = node->number;
  std::lock_guard lock(node->mutex);
  auto attributes = do_setattr(*node, changes);
  if (attributes) ++work.metadata_updates;
  return attributes;
}

Result<Attributes> Volume::do_setattr(Inode& node, const AttributeChanges& changes) {
  const timespec now = clock_.now();
  if (changes.size) {
    if (node.is_directory()) return fail(EISDIR);
    if (!node.is_regular()) return fail(EINVAL);
    if (*changes.size > kMaxFileSize) return fail(EFBIG);
    node.file->truncate(*changes.size);
    node.mtime = now;
  }
  if (changes.mode) node.permissions = *changes.mode & 07777;
  if (changes.uid) node.uid = *changes.uid;
  if (changes.gid) node.gid = *changes.gid;
  auto resolve = [&](timespec t) { return t.tv_nsec == UTIME_NOW ? now : t; };
  if (changes.atime && changes.atime->tv_nsec != UTIME_OMIT) node.atime = resolve(*changes.atime);
  if (changes.mtime && changes.mtime->tv_nsec != UTIME_OMIT) node.mtime = resolve(*changes.mtime);
  node.ctime = now;
  return attributes(node);
}

Result<Attributes> Volume::create(uint64_t parent, const std::string& name, uint32_t mode,
                                  uint64_t rdev, Owner owner, bool open_handle, Work& work) {
  const uint32_t type = mode & S_IFMT;
  if (type == S_IFDIR || type == S_IFLNK) return fail(EINVAL);
  std::lock_guard lock(namespace_mutex_);
  auto dir = directory_locked(parent);
  if (!dir) return std::unexpected(dir.error());
  auto child = new_inode(type == 0 ? (mode | S_IFREG) : mode, owner, **dir);
  {
    std::lock_guard child_lock(child->mutex);
    child->rdev = rdev;
    if (open_handle && child->is_regular()) child->open_handles = 1;
  }
  work.file = child->number;
  auto attributes = add_entry_locked(**dir, name, std::move(child));
  if (attributes) ++work.metadata_updates;
  return attributes;
}

Result<Attributes> Volume::mkdir(uint64_t parent, const std::string& name, uint32_t mode,
                                 Owner owner, Work& work) {
  std::lock_guard lock(namespace_mutex_);
  auto dir = directory_locked(parent);
  if (!dir) return std::unexpected(dir.error());
  auto attributes =
      add_entry_locked(**dir, name, new_inode(S_IFDIR | (mode & 07777), owner, **dir));
  if (attributes) ++work.metadata_updates;
  return attributes;
}

Result<Attributes> Volume::symlink(uint64_t parent, const std::string& name,
                                   const std::string& target, Owner owner, Work& work) {
  if (target.size() >= PATH_MAX) return fail(ENAMETOOLONG);
  std::lock_guard lock(namespace_mutex_);
  auto dir = directory_locked(parent);
  if (!dir) return std::unexpected(dir.error());
  auto child = new_inode(S_IFLNK | 0777, owner, **dir);
  {
    std::lock_guard child_lock(child->mutex);
    child->symlink_target = target;
  }
  auto attributes = add_entry_locked(**dir, name, std::move(child));
  if (attributes) ++work.metadata_updates;
  return attributes;
}

Result<std::string> Volume::readlink(uint64_t inode, Work&) {
  auto node = find(inode);
  if (!node) return fail(ENOENT);
  if (!S_ISLNK(node->mode)) return fail(EINVAL);
  std::lock_guard lock(node->mutex);
  return node->symlink_target;
}

Result<Attributes> Volume::link(uint64_t inode, uint64_t new_parent, const std::string& new_name,
                                Work& work) {
  std::lock_guard lock(namespace_mutex_);
  auto node = find_locked(inode);
  if (!node) return fail(ENOENT);
  if (node->is_directory()) return fail(EPERM);
  if (node->nlink == 0) return fail(ENOENT);  // linkat of an unlinked file without O_TMPFILE
  auto dir = directory_locked(new_parent);
  if (!dir) return std::unexpected(dir.error());
  if (new_name.size() > profile_.name_max) return fail(ENAMETOOLONG);
  if ((*dir)->entries.contains(new_name)) return fail(EEXIST);
  (*dir)->entries.emplace(new_name, node);
  node->nlink.fetch_add(1);
  ++node->references;
  journal_.created(node->number, (*dir)->number, new_name);
  ++work.metadata_updates;
  const timespec now = clock_.now();
  {
    std::lock_guard dir_lock((*dir)->mutex);
    (*dir)->mtime = (*dir)->ctime = now;
  }
  std::lock_guard node_lock(node->mutex);
  node->ctime = now;
  return attributes(*node);
}

Result<void> Volume::unlink(uint64_t parent, const std::string& name, Work& work) {
  std::lock_guard lock(namespace_mutex_);
  auto dir = directory_locked(parent);
  if (!dir) return std::unexpected(dir.error());
  auto it = (*dir)->entries.find(name);
  if (it == (*dir)->entries.end()) return fail(ENOENT);
  if (it->second->is_directory()) return fail(EISDIR);
  auto child = it->second;
  (*dir)->entries.erase(it);
  {
    std::lock_guard dir_lock((*dir)->mutex);
    (*dir)->mtime = (*dir)->ctime = clock_.now();
  }
  work.file = child->number;
  ++work.unlinks;
  drop_link_locked(child, work);
  return {};
}

Result<void> Volume::rmdir(uint64_t parent, const std::string& name, Work& work) {
  if (name == ".") return fail(EINVAL);
  if (name == "..") return fail(ENOTEMPTY);
  std::lock_guard lock(namespace_mutex_);
  auto dir = directory_locked(parent);
  if (!dir) return std::unexpected(dir.error());
  auto it = (*dir)->entries.find(name);
  if (it == (*dir)->entries.end()) return fail(ENOENT);
  if (!it->second->is_directory()) return fail(ENOTDIR);
  if (!it->second->entries.empty()) return fail(ENOTEMPTY);
  auto child = it->second;
  (*dir)->entries.erase(it);
  (*dir)->nlink.fetch_sub(1);
  {
    std::lock_guard dir_lock((*dir)->mutex);
    (*dir)->mtime = (*dir)->ctime = clock_.now();
  }
  ++work.unlinks;
  drop_link_locked(child, work);
  return {};
}

Result<void> Volume::rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                            const std::string& new_name, unsigned flags, Work& work) {
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return fail(EINVAL);
  if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE)) return fail(EINVAL);
  std::lock_guard lock(namespace_mutex_);
  auto from_dir = directory_locked(parent);
  if (!from_dir) return std::unexpected(from_dir.error());
  auto to_dir = directory_locked(new_parent);
  if (!to_dir) return std::unexpected(to_dir.error());
  if (new_name.size() > profile_.name_max) return fail(ENAMETOOLONG);
  auto source_it = (*from_dir)->entries.find(name);
  if (source_it == (*from_dir)->entries.end()) return fail(ENOENT);
  std::shared_ptr<Inode> source = source_it->second;
  auto target_it = (*to_dir)->entries.find(new_name);
  std::shared_ptr<Inode> target =
      target_it == (*to_dir)->entries.end() ? nullptr : target_it->second;

  // A directory may not move below itself.
  auto is_ancestor_or_self = [&](const std::shared_ptr<Inode>& dir, uint64_t of) {
    for (uint64_t cursor = of;;) {
      if (cursor == dir->number) return true;
      if (cursor == kRootInode) return false;
      assert_held(namespace_mutex_);  // the lambda runs under the caller's lock
      auto node = find_locked(cursor);
      if (!node) return false;
      cursor = node->parent;
    }
  };
  if (source->is_directory() && is_ancestor_or_self(source, new_parent)) return fail(EINVAL);

  const timespec now = clock_.now();
  ++work.metadata_updates;
  auto touch = [&](Inode& node) {
    std::lock_guard node_lock(node.mutex);
    node.mtime = node.ctime = now;
  };
  auto move_directory = [&](const std::shared_ptr<Inode>& dir, Inode& from, Inode& to) {
    if (!dir->is_directory() || &from == &to) return;
    dir->parent = to.number;
    from.nlink.fetch_sub(1);
    to.nlink.fetch_add(1);
  };

  if (flags & RENAME_EXCHANGE) {
    if (!target) return fail(ENOENT);
    if (target->is_directory() && is_ancestor_or_self(target, parent)) return fail(EINVAL);
    source_it->second = target;
    (*to_dir)->entries[new_name] = source;
    move_directory(source, **from_dir, **to_dir);
    move_directory(target, **to_dir, **from_dir);
    source->parent = (*to_dir)->number;
    target->parent = (*from_dir)->number;
    std::swap(source->name, target->name);
    touch(**from_dir);
    touch(**to_dir);
    return {};
  }
  if (target) {
    if (flags & RENAME_NOREPLACE) return fail(EEXIST);
    if (target == source) return {};  // two links to one inode: POSIX says do nothing
    if (source->is_directory() && !target->is_directory()) return fail(ENOTDIR);
    if (!source->is_directory() && target->is_directory()) return fail(EISDIR);
    if (target->is_directory() && !target->entries.empty()) return fail(ENOTEMPTY);
    (*to_dir)->entries.erase(target_it);
    if (target->is_directory()) (*to_dir)->nlink.fetch_sub(1);
    ++work.unlinks;
    drop_link_locked(target, work);
  }
  (*from_dir)->entries.erase(name);
  (*to_dir)->entries.emplace(new_name, source);
  move_directory(source, **from_dir, **to_dir);
  if (!target)
    journal_.renamed(source->number, (*to_dir)->number, new_name, (*from_dir)->number, name);
  source->parent = (*to_dir)->number;
  source->name = new_name;
  touch(**from_dir);
  if (*to_dir != *from_dir) touch(**to_dir);
  std::lock_guard source_lock(source->mutex);
  source->ctime = now;
  return {};
}

Result<std::vector<DirectoryEntry>> Volume::read_directory(uint64_t inode, Work&) {
  std::lock_guard lock(namespace_mutex_);
  auto dir = directory_locked(inode);
  if (!dir) return std::unexpected(dir.error());
  std::vector<DirectoryEntry> entries;
  entries.reserve((*dir)->entries.size() + 2);
  entries.push_back({".", (*dir)->number, S_IFDIR});
  entries.push_back({"..", (*dir)->parent, S_IFDIR});
  for (const auto& [name, child] : (*dir)->entries) {
    entries.push_back({name, child->number, child->mode & S_IFMT});
  }
  return entries;
}

// ---------------------------------------------------------------------------
// Files

Result<void> Volume::open(uint64_t inode, int flags, Work& work) {
  auto node = find(inode);
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
    node->file->truncate(0);
    node->mtime = node->ctime = clock_.now();
  }
  return {};
}

Result<void> Volume::flush(uint64_t inode, bool writer, Work& work) {
  auto node = find(inode);
  if (!node) return fail(ENOENT);
  if (!node->is_regular() || !writer) return {};
  work.file = node->number;
  std::lock_guard lock(node->mutex);
  // FUSE's RELEASE may arrive after close(2) has returned; the last close is
  // known here, so a stat right after close sees the file as the backend leaves it.
  node->file->flush(node->open_handles <= 1, work);
  return {};
}

void Volume::release(uint64_t inode, Work& work) {
  if (auto node = find(inode); node && node->is_regular()) {
    std::lock_guard lock(node->mutex);
    if (node->open_handles > 0) --node->open_handles;
    if (node->open_handles == 0) {
      work.file = node->number;
      node->file->close(work);
      // Unlinked while open: nlink changes under this lock too (drop_link_locked).
      if (node->nlink.load() == 0) free_storage_locked(node, work);
    }
  }
}

Result<std::shared_ptr<Inode>> Volume::file_for_io(uint64_t inode, uint64_t offset, uint64_t length,
                                                   int flags) {
  auto node = find(inode);
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

Result<size_t> Volume::write(uint64_t inode, uint64_t offset, std::span<const std::byte> data,
                             int flags, Work& work) {
  auto found = file_for_io(inode, offset, data.size(), flags);
  if (!found) return std::unexpected(found.error());
  Inode& node = **found;
  work.file = node.number;
  {
    std::lock_guard lock(node.mutex);
    auto written = node.file->write(offset, data, flags, work);
    if (!written || *written == 0) return written;
    node.mtime = node.ctime = clock_.now();
  }
  if (flags & O_DSYNC) {
    // Its commit is the one journal's: every namespace change goes with it, as with fsync.
    std::lock_guard lock(namespace_mutex_);
    journal_.commit();
  }
  return data.size();
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
  if (auto done =
          node.file->fallocate(kind, (mode & FALLOC_FL_KEEP_SIZE) != 0, offset, length, work);
      !done) {
    return done;
  }
  const timespec now = clock_.now();
  if (node.file->size() != size_before) node.mtime = now;
  node.ctime = now;
  return {};
}

Result<void> Volume::fallocate(uint64_t inode, int mode, uint64_t offset, uint64_t length,
                               Work& work) {
  auto node = find(inode);
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
  auto node = find(inode);
  if (!node) return fail(ENOENT);
  bool committed = false;
  if (node->is_regular()) {
    work.file = node->number;
    std::lock_guard lock(node->mutex);
    committed = node->file->sync(0, kMaxFileSize, work);
  }
  // One journal: committing the file's transaction commits every namespace
  // change with it; a directory's fsync is how a program asks for exactly that.
  std::lock_guard lock(namespace_mutex_);
  // As ext4's i_datasync_tid: fdatasync of a file with nothing to make durable
  // finds no transaction of its own to commit, unless the file's creation is
  // still in the journal (a new inode's creation is part of its data).
  if (datasync && node->is_regular() && !committed && !journal_.creates(node->number)) return {};
  if (journal_.commit() && !committed) ++work.commits;
  return {};
}

Result<uint64_t> Volume::seek(uint64_t inode, uint64_t offset, int whence, Work&) {
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return fail(EINVAL);
  auto node = find(inode);
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
  s.blocks_free = (space.free_blocks - space.reserved_blocks) * unit_ / s.fragment_size;
  s.blocks_available = s.blocks_free;
  s.files = kMaxInodes;
  {
    std::lock_guard lock(namespace_mutex_);
    s.files_free = kMaxInodes - inodes_.size();
  }
  s.name_max = profile_.name_max;
  return s;
}

// ---------------------------------------------------------------------------
// Extended attributes

Result<void> Volume::setxattr(uint64_t inode, const std::string& name, std::string_view value,
                              int flags, Work&) {
  if (name.empty() || name.size() > kMaxXattrName) return fail(ERANGE);
  if (value.size() > kMaxXattrValue) return fail(E2BIG);
  auto node = find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  const bool exists = node->xattrs.contains(name);
  if ((flags & XATTR_CREATE) && exists) return fail(EEXIST);
  if ((flags & XATTR_REPLACE) && !exists) return fail(ENODATA);
  node->xattrs[name] = std::string(value);
  node->ctime = clock_.now();
  return {};
}

Result<std::string> Volume::getxattr(uint64_t inode, const std::string& name, Work&) {
  auto node = find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  auto it = node->xattrs.find(name);
  if (it == node->xattrs.end()) return fail(ENODATA);
  return it->second;
}

Result<std::vector<std::string>> Volume::listxattr(uint64_t inode, Work&) {
  auto node = find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  std::vector<std::string> names;
  for (const auto& [name, value] : node->xattrs) names.push_back(name);
  return names;
}

Result<void> Volume::removexattr(uint64_t inode, const std::string& name, Work&) {
  auto node = find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  if (node->xattrs.erase(name) == 0) return fail(ENODATA);
  node->ctime = clock_.now();
  return {};
}

// ---------------------------------------------------------------------------
// Emulated time, durability and faults

std::string Volume::path(uint64_t inode) {
  std::lock_guard lock(namespace_mutex_);
  return path_locked(inode);
}

std::string Volume::path_locked(uint64_t inode) {
  std::vector<std::string_view> names;
  for (auto node = find_locked(inode); node && node->number != kRootInode;
       node = find_locked(node->parent)) {
    if (node->parent == 0 || names.size() > inodes_.size()) return "";  // not linked
    names.push_back(node->name);
  }
  if (names.empty()) return "/";
  std::string path;
  for (auto it = names.rbegin(); it != names.rend(); ++it) path += "/" + std::string(*it);
  return path;
}

CrashReport Volume::crash(Work& work) {
  CrashReport report;
  std::lock_guard lock(namespace_mutex_);
  // Log recovery finishes what background workers had not (xfs's unlinked
  // list); under the lock, so no operation queues a task meanwhile.
  deferred_.complete_all();
  // Namespace changes since the last commit, newest first.
  const std::vector<NamespaceJournal::Change> lost = journal_.lose();
  for (const NamespaceJournal::Change& change : lost) {
    auto dir = find_locked(change.parent);
    if (!dir || !dir->is_directory()) continue;
    auto entry = dir->entries.find(change.name);
    if (entry == dir->entries.end() || entry->second->number != change.inode) continue;
    const std::shared_ptr<Inode> inode = entry->second;
    report.removed_entries.emplace_back(dir->number, change.name);
    if (change.kind == NamespaceJournal::Change::Kind::kCreated) {
      if (inode->is_directory() && !inode->entries.empty()) continue;
      dir->entries.erase(entry);
      if (inode->is_directory()) dir->nlink.fetch_sub(1);
      drop_link_locked(inode, work);
      continue;
    }
    auto from = find_locked(change.from_parent);
    if (!from || !from->is_directory() || from->entries.contains(change.from_name)) continue;
    dir->entries.erase(entry);
    from->entries.emplace(change.from_name, inode);
    if (inode->is_directory() && from != dir) {
      dir->nlink.fetch_sub(1);
      from->nlink.fetch_add(1);
    }
    inode->parent = from->number;
    inode->name = change.from_name;
  }
  const size_t undone = lost.size();
  // Files whose creation was undone: gone at once.
  for (const DeferredTask& task : work.deferred) deferred_.complete(task.id);
  work.deferred.clear();
  for (const auto& [number, node] : inodes_) {
    if (!node->is_regular()) continue;
    std::lock_guard node_lock(node->mutex);
    if (node->file->power_cut()) report.restored_files.push_back(number);
  }
  for (const uint64_t number : report.restored_files) {
    const std::shared_ptr<Inode>& node = inodes_.at(number);
    std::lock_guard node_lock(node->mutex);
    node->file->recover();
  }
  spdlog::warn("crash: {} files put back to their last sync, {} namespace changes undone",
               report.restored_files.size(), undone);
  return report;
}

// ---------------------------------------------------------------------------
// Statistics

FileStats Volume::file_stats_locked(const Inode& node) const {
  FileStats f = node.file ? node.file->stats() : FileStats{};
  f.inode = node.number;
  return f;
}

Result<FileStats> Volume::file_stats(uint64_t inode) {
  auto node = find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  return file_stats_locked(*node);
}

Result<std::vector<Extent>> Volume::file_extents(uint64_t inode) {
  auto node = find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  if (!node->file) return std::vector<Extent>{};
  return node->file->space().extents().all();
}

DeviceStats Volume::device_stats() const { return space_.stats(profile_.capacity_bytes); }

void Volume::for_each_file(const std::function<void(const std::string&, const Inode&)>& visit) {
  // Paths of regular files, depth first; a file with several links is visited
  // once, under the first path found.
  std::lock_guard lock(namespace_mutex_);
  std::vector<uint64_t> seen;
  std::function<void(const Inode&, const std::string&)> walk = [&](const Inode& dir,
                                                                   const std::string& prefix) {
    for (const auto& [name, child] : dir.entries) {
      const std::string path = prefix + "/" + name;
      if (child->is_directory()) {
        walk(*child, path);
      } else if (child->is_regular() &&
                 std::find(seen.begin(), seen.end(), child->number) == seen.end()) {
        if (child->nlink > 1) seen.push_back(child->number);
        std::lock_guard child_lock(child->mutex);
        visit(path, *child);
      }
    }
  };
  walk(*inodes_.at(kRootInode), "");
}

StatsSnapshot Volume::snapshot() {
  StatsSnapshot s;
  s.profile = profile_.name;
  s.device = device_stats();
  s.deferred = deferred_.stats();
  for_each_file([&](const std::string& path, const Inode& node) {
    assert_held(node.mutex);
    s.files.emplace(path, file_stats_locked(node));
  });
  return s;
}

DeviceLayout Volume::layout() {
  DeviceLayout l;
  l.profile = profile_.name;
  l.device = device_stats();
  l.allocation_group_bytes = profile_.allocation_group_bytes;
  l.group_metadata_bytes = profile_.group_metadata_bytes;
  for_each_file([&](const std::string& path, const Inode& node) {
    assert_held(node.mutex);
    l.files.emplace(path,
                    FileLayout{node.number, node.file->size(), node.file->space().extents().all()});
  });
  return l;
}

}  // namespace mimicfs
