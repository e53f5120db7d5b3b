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
constexpr uint64_t kMaxFileSize = std::numeric_limits<int64_t>::max();
constexpr size_t kMaxXattrValue = 65536;
constexpr size_t kMaxXattrName = 255;
constexpr uint64_t kMaxInodes = uint64_t{1} << 32;

uint64_t div_up(uint64_t value, uint64_t unit) { return (value + unit - 1) / unit; }

constexpr uint64_t kAllBlocks = FileSpace::kAllBlocks;

}  // namespace

struct Volume::Inode {
  Inode(uint64_t number, uint32_t mode, uint64_t group, DeviceSpace& device, uint64_t dirty_unit)
      : number(number), mode(mode), group(group), space(device, group), cache(dirty_unit) {}
  const uint64_t number;
  const uint32_t mode;   // type bits never change; permission bits live in `permissions`
  const uint64_t group;  // the allocation group its blocks are placed in

  mutable std::mutex mutex;
  // Guarded by mutex:
  uint32_t permissions = 0;
  uint32_t uid = 0, gid = 0;
  uint64_t rdev = 0;
  uint64_t size = 0;
  timespec atime{}, mtime{}, ctime{};
  std::map<std::string, std::string> xattrs;
  FileSpace space;
  uint32_t open_handles = 0;
  FilePageCache cache;
  FileDurability durability;
  std::unique_ptr<FileData> data;  // regular files only
  std::string symlink_target;

  // Guarded by Volume::namespace_mutex_ (nlink is atomic so getattr can read it
  // without that lock; a file's last link drops under its mutex too, where
  // release() reads it):
  std::atomic<uint32_t> nlink{0};
  uint64_t references = 0;
  std::map<std::string, std::shared_ptr<Inode>> entries;  // directories only
  uint64_t parent = 0;  // the directory of its last entry (0: none yet)
  std::string name;     // that entry's name, for fault rules' paths

  bool is_directory() const { return S_ISDIR(mode); }
  bool is_regular() const { return S_ISREG(mode); }
};

Volume::Volume(Profile profile, std::unique_ptr<DataStore> store, const WallClock& clock)
    : profile_(std::move(profile)),
      unit_(profile_.allocation_unit),
      store_(std::move(store)),
      clock_(clock),
      space_(profile_),
      journal_(NamespaceJournal::durability_of(profile_)) {
  auto root = std::make_shared<Inode>(kRootInode, S_IFDIR, 0, space_, profile_.dirty_unit);
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

std::shared_ptr<Volume::Inode> Volume::find_locked(uint64_t inode) {
  auto it = inodes_.find(inode);
  return it == inodes_.end() ? nullptr : it->second;
}

std::shared_ptr<Volume::Inode> Volume::find(uint64_t inode) {
  std::lock_guard lock(namespace_mutex_);
  return find_locked(inode);
}

Result<std::shared_ptr<Volume::Inode>> Volume::directory_locked(uint64_t inode) {
  auto dir = find_locked(inode);
  if (!dir) return fail(ENOENT);
  if (!dir->is_directory()) return fail(ENOTDIR);
  return dir;
}

std::shared_ptr<Volume::Inode> Volume::new_inode(uint32_t mode, Owner owner, const Inode& parent) {
  // As xfs and ext4's Orlov allocator: a new directory goes to the next group,
  // a file to its directory's.
  const uint64_t group =
      S_ISDIR(mode) ? next_directory_group_++ % space_.allocator().group_count() : parent.group;
  auto inode =
      std::make_shared<Inode>(next_inode_++, mode & S_IFMT, group, space_, profile_.dirty_unit);
  inode->permissions = mode & 07777;
  inode->uid = owner.uid;
  inode->gid = owner.gid;
  inode->atime = inode->mtime = inode->ctime = clock_.now();
  if (inode->is_regular()) inode->data = store_->create_file();
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
  a.size = S_ISLNK(inode.mode) ? inode.symlink_target.size() : inode.size;
  // Delayed blocks count, as on ext4 and xfs: they are promised to the file.
  a.blocks = inode.space.blocks() * unit_ / 512;
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
      // of freeing a punched file's extents is the unlink's.
      work.extents_freed += child->space.extents().extent_count();
      // As Linux's final iput: the last link of a file nobody has open frees
      // its blocks now; the kernel's cached reference only keeps the inode number.
      if (child->open_handles == 0) release_storage(*child);
    }
  }
  if (remaining == 0 && child->references == 0) destroy_locked(child, work);
}

void Volume::release_storage(Inode& inode) {
  dirty_bytes_.fetch_sub(inode.cache.dirty_bytes(), std::memory_order_relaxed);
  inode.cache.clear();
  inode.durability.synced(0);
  inode.space.release();
  if (inode.data) inode.data->zero(0, inode.size);
  inode.size = 0;
}

void Volume::destroy_locked(const std::shared_ptr<Inode>& inode, Work& work) {
  if (inode->number == kRootInode) return;
  inodes_.erase(inode->number);
  work.destroyed_inodes.push_back(inode->number);
  std::lock_guard lock(inode->mutex);
  release_storage(*inode);
  inode->data.reset();
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
    truncate_locked(node, *changes.size);
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
  child->rdev = rdev;
  if (open_handle && child->is_regular()) child->open_handles = 1;
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
  child->symlink_target = target;
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
    truncate_locked(*node, 0);
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
  // NFS close-to-open: nfs_file_flush writes the dirty pages and commits them.
  if (profile_.flush_on_close) sync_range_locked(*node, 0, kMaxFileSize, work);
  // FUSE's RELEASE may arrive after close(2) has returned; the last close is
  // known here, so a stat right after close sees the file as the backend leaves it.
  if (node->open_handles <= 1) {
    node->space.close(node->size, work);
  } else {
    node->space.flush_delayed(0, kAllBlocks, node->size, work);
  }
  return {};
}

void Volume::release(uint64_t inode, Work& work) {
  if (auto node = find(inode); node && node->is_regular()) {
    std::lock_guard lock(node->mutex);
    if (node->open_handles > 0) --node->open_handles;
    if (node->open_handles == 0) {
      work.file = node->number;
      node->space.close(node->size, work);
      // Unlinked while open: nlink changes under this lock too (drop_link_locked).
      if (node->nlink.load() == 0) release_storage(*node);
    }
  }
}

Result<std::shared_ptr<Volume::Inode>> Volume::file_for_io(uint64_t inode, uint64_t offset,
                                                           uint64_t length, int flags) {
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
  const std::shared_ptr<Inode>& node = *found;
  const bool direct = (flags & O_DIRECT) != 0;
  work.file = node->number;
  std::lock_guard lock(node->mutex);
  if (offset >= node->size) return size_t{0};
  const size_t length = std::min<uint64_t>(out.size(), node->size - offset);
  node->data->read(offset, out.first(length));
  work.bytes = length;
  if (direct) {
    work.device_reads += device_work(*node, offset, length);
  } else {
    ++work.cache_copies;
    work.cache_copy_bytes += length;
    for (const BlockRange& range : node->cache.read(offset, length)) {
      work.device_reads += device_work(*node, range.start, range.length);
    }
  }
  return length;
}

Result<size_t> Volume::write_locked(Inode& node, uint64_t offset, std::span<const std::byte> data,
                                    Work& work) {
  if (data.empty()) return size_t{0};
  if (offset > kMaxFileSize || data.size() > kMaxFileSize - offset) return fail(EFBIG);
  const uint64_t end = offset + data.size();
  const uint64_t first = offset / unit_;
  const uint64_t size = std::max(node.size, end);
  if (auto r = node.space.write(first, div_up(end, unit_) - first, size, work); !r) {
    return std::unexpected(r.error());
  }
  node.size = size;
  node.data->write(offset, data);
  node.mtime = node.ctime = clock_.now();
  return data.size();
}

Result<size_t> Volume::write(uint64_t inode, uint64_t offset, std::span<const std::byte> data,
                             int flags, Work& work) {
  auto found = file_for_io(inode, offset, data.size(), flags);
  if (!found) return std::unexpected(found.error());
  const std::shared_ptr<Inode>& node = *found;
  const bool direct = (flags & O_DIRECT) != 0;
  const bool sync = (flags & O_DSYNC) != 0;  // O_SYNC includes the O_DSYNC bit
  work.file = node->number;
  {
    std::lock_guard lock(node->mutex);
    if (flags & O_APPEND) offset = node->size;
    if (data.empty()) return size_t{0};
    if (offset > kMaxFileSize || data.size() > kMaxFileSize - offset) return fail(EFBIG);
    prepare_change(*node, offset, data.size());
    if (auto written = write_locked(*node, offset, data, work); !written) return written;
    work.bytes = data.size();
    node->durability.written(offset, data.size());
    if (direct) {
      dirty_bytes_.fetch_sub(node->cache.written_through(offset, data.size()),
                             std::memory_order_relaxed);
      // Direct I/O allocates at once, never delayed.
      node->space.flush_delayed(0, kAllBlocks, node->size, work);
      work.device_writes += device_work(*node, offset, data.size());
    } else {
      ++work.cache_copies;
      work.cache_copy_bytes += data.size();
      dirty_bytes_.fetch_add(node->cache.write(offset, data.size()), std::memory_order_relaxed);
    }
    if (sync) {
      // As generic_write_sync (iomap's direct I/O completion calls it too): the
      // range is written back and committed now.
      sync_range_locked(*node, offset, data.size(), work);
    } else if (!direct && profile_.dirty_limit_bytes > 0 &&
               dirty_bytes_.load(std::memory_order_relaxed) > profile_.dirty_limit_bytes) {
      // As balance_dirty_pages: past the dirty limit the writer writes back.
      writeback_locked(*node, 0, kMaxFileSize, work);
    }
  }
  if (sync) {
    // Its commit is the one journal's: every namespace change goes with it, as with fsync.
    std::lock_guard lock(namespace_mutex_);
    journal_.commit();
  }
  return data.size();
}

void Volume::truncate_locked(Inode& node, uint64_t size) {
  // Whole blocks past the new end are freed, blocks preallocated past EOF too,
  // even when the size does not change (as ext4 and xfs do: truncating to the
  // current size is how a program drops its preallocation); the tail of the last
  // block stays allocated and is zeroed.
  node.durability.metadata_changed();
  if (size < node.size) prepare_change(node, size, node.size - size);
  if (size <= node.size) {
    dirty_bytes_.fetch_sub(node.cache.drop(size, kMaxFileSize - size), std::memory_order_relaxed);
    const uint64_t keep_blocks = div_up(size, unit_);
    node.space.truncate(keep_blocks, size == 0);
    if (size < node.size) node.data->zero(size, node.size - size);
  }
  node.size = size;
}

void Volume::punch_locked(Inode& node, uint64_t offset, uint64_t length) {
  const uint64_t end = offset + length;
  prepare_change(node, offset, length);
  node.durability.metadata_changed();
  dirty_bytes_.fetch_sub(node.cache.drop(offset, length), std::memory_order_relaxed);
  const uint64_t first_whole = div_up(offset, unit_);
  const uint64_t end_whole = end / unit_;
  node.space.punch(first_whole, first_whole < end_whole ? end_whole - first_whole : 0);
  if (offset < node.size) node.data->zero(offset, std::min(end, node.size) - offset);
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
  if (length == 0) return fail(EINVAL);
  if (offset > kMaxFileSize || length > kMaxFileSize - offset) return fail(EFBIG);

  const uint64_t end = offset + length;
  const uint64_t first = offset / unit_;
  const uint64_t count = div_up(end, unit_) - first;
  const bool keep_size = (mode & FALLOC_FL_KEEP_SIZE) != 0;
  switch (kind) {
    case FallocateMode::kAllocate:
    case FallocateMode::kKeepSize:
      prepare_change(node, offset, length);  // synced holes it fills come back at a crash
      if (auto r = node.space.allocate(first, count, node.size, work); !r) return r;
      break;
    case FallocateMode::kPunchHole:
      punch_locked(node, offset, length);
      break;
    case FallocateMode::kZeroRange: {
      // As ext4: whole blocks become unwritten extents, partial ones are zeroed in
      // place. Every block of the range is reserved first, so ENOSPC changes nothing.
      if (auto r = node.space.reserve(count); !r) return r;
      punch_locked(node, offset, length);
      node.space.allocate_reserved(first, count, node.size, work);
      break;
    }
  }
  node.durability.metadata_changed();
  const timespec now = clock_.now();
  if (!keep_size && kind != FallocateMode::kPunchHole && end > node.size) {
    node.size = end;
    node.mtime = now;
  }
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
    committed = sync_range_locked(*node, 0, kMaxFileSize, work);
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
  if (offset >= node->size) return fail(ENXIO);
  const uint64_t block = offset / unit_;
  // Delayed blocks are data: they hold written bytes not yet given device blocks.
  if (whence == SEEK_DATA) {
    const std::optional<uint64_t> data_block = node->space.next_data(block);
    if (!data_block) return fail(ENXIO);
    const uint64_t position = std::max(offset, *data_block * unit_);
    if (position >= node->size) return fail(ENXIO);
    return position;
  }
  const uint64_t position = std::max(offset, node->space.next_hole(block) * unit_);
  return std::min(position, node->size);  // EOF is a hole
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

void Volume::prepare_change(Inode& node, uint64_t offset, uint64_t length) {
  node.durability.before_change(
      offset, length, [&](uint64_t from, uint64_t count) -> std::optional<std::string> {
        // A page without data blocks (hole, unwritten, nothing delayed) is
        // restored as a hole, so a crash gives back the allocation too.
        const uint64_t first = from / unit_;
        const uint64_t blocks = div_up(from + count, unit_) - first;
        if (!node.space.has_data(first, blocks)) return std::nullopt;
        std::string bytes(count, '\0');
        node.data->read(from, std::as_writable_bytes(std::span(bytes.data(), count)));
        return bytes;
      });
}

DeviceWork Volume::device_work(const Inode& node, uint64_t offset, uint64_t length) const {
  DeviceWork work;
  if (length == 0) return work;
  work.requests = device_requests(length, profile_.max_request_bytes);
  work.bytes = length;
  const uint64_t first = offset / unit_;
  const uint64_t extents =
      node.space.extents().find(first, div_up(offset + length, unit_) - first).size();
  if (extents > 1) work.extra_extents = extents - 1;
  return work;
}

void Volume::writeback_locked(Inode& node, uint64_t offset, uint64_t length, Work& work) {
  const uint64_t first = offset / unit_;
  const uint64_t end =
      length >= kMaxFileSize - offset ? kAllBlocks : div_up(offset + length, unit_);
  node.space.flush_delayed(first, end - first, node.size, work);
  for (const BlockRange& range : node.cache.take_dirty(offset, length)) {
    dirty_bytes_.fetch_sub(range.length, std::memory_order_relaxed);
    work.device_writes += device_work(node, range.start, range.length);
  }
}

bool Volume::sync_range_locked(Inode& node, uint64_t offset, uint64_t length, Work& work) {
  writeback_locked(node, offset, length, work);
  const bool commit = node.durability.unsynced();
  if (commit) ++work.commits;
  if (offset == 0 && length >= kMaxFileSize) {
    node.durability.synced(node.size);
  } else {
    node.durability.range_synced(offset, length, node.size, [&](uint64_t from, uint64_t count) {
      std::string bytes(count, '\0');
      node.data->read(from, std::as_writable_bytes(std::span(bytes.data(), count)));
      return std::optional<std::string>(std::move(bytes));
    });
  }
  return commit;
}

void Volume::restore_durable_locked(Inode& node, Work& work) {
  const uint64_t synced_size = node.durability.synced_size();
  const auto saved = node.durability.saved_pages();  // a copy: truncating saves more
  dirty_bytes_.fetch_sub(node.cache.dirty_bytes(), std::memory_order_relaxed);
  node.cache.clear();
  if (node.size > synced_size) {
    truncate_locked(node, synced_size);
  } else {
    node.size = synced_size;
  }
  for (const auto& [page, contents] : saved) {
    if (page >= synced_size) continue;
    const uint64_t length = std::min(FileDurability::kPageBytes, synced_size - page);
    if (!contents) {
      punch_locked(node, page, length);
    } else if (auto written = write_locked(node, page, std::as_bytes(std::span(*contents)), work);
               !written) {
      spdlog::warn("crash: inode {}: cannot restore {} bytes at {}: {}", node.number,
                   contents->size(), page, errno_name(written.error().value));
    }
  }
  // The synced data was on the device: restored pages get their blocks now,
  // not at the next writeback, and no preallocation beyond them.
  node.space.allocate_delayed_exactly(work);
  dirty_bytes_.fetch_sub(node.cache.dirty_bytes(), std::memory_order_relaxed);
  node.cache.clear();
  node.durability.synced(node.size);
}

CrashReport Volume::crash(Work& work) {
  CrashReport report;
  std::lock_guard lock(namespace_mutex_);
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
  for (const auto& [number, node] : inodes_) {
    if (!node->is_regular()) continue;
    std::lock_guard node_lock(node->mutex);
    // A power cut empties the host's page cache, of synced files too.
    dirty_bytes_.fetch_sub(node->cache.dirty_bytes(), std::memory_order_relaxed);
    node->cache.clear();
    if (!node->durability.unsynced()) continue;
    restore_durable_locked(*node, work);
    report.restored_files.push_back(number);
  }
  spdlog::warn("crash: {} files put back to their last sync, {} namespace changes undone",
               report.restored_files.size(), undone);
  return report;
}

// ---------------------------------------------------------------------------
// Statistics

FileStats Volume::file_stats_locked(const Inode& node) const {
  FileStats f;
  f.inode = node.number;
  f.size = node.size;
  node.space.describe(div_up(node.size, unit_), f);
  f.dirty_bytes = node.cache.dirty_bytes();
  f.unsynced_bytes = node.durability.unsynced_bytes();
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
  return node->space.extents().all();
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
  for_each_file([&](const std::string& path, const Inode& node) {
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
    l.files.emplace(path, FileLayout{node.number, node.size, node.space.extents().all()});
  });
  return l;
}

}  // namespace mimicfs
