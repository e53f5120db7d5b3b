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

}  // namespace

struct Volume::Inode {
  Inode(uint64_t number, uint32_t mode) : number(number), mode(mode) {}
  const uint64_t number;
  const uint32_t mode;  // type bits never change; permission bits live in `permissions`

  mutable std::mutex mutex;
  // Guarded by mutex:
  uint32_t permissions = 0;
  uint32_t uid = 0, gid = 0;
  uint64_t rdev = 0;
  uint64_t size = 0;
  timespec atime{}, mtime{}, ctime{};
  std::map<std::string, std::string> xattrs;
  ExtentMap extents;
  std::unique_ptr<FileData> data;  // regular files only
  std::string symlink_target;

  // Guarded by Volume::namespace_mutex_ (nlink is atomic so getattr can read it
  // without that lock):
  std::atomic<uint32_t> nlink{0};
  uint64_t references = 0;
  std::map<std::string, std::shared_ptr<Inode>> entries;  // directories only
  uint64_t parent = 0;                                    // directories only

  bool is_directory() const { return S_ISDIR(mode); }
  bool is_regular() const { return S_ISREG(mode); }
};

Volume::Volume(Profile profile, std::unique_ptr<DataStore> store, const WallClock& clock)
    : profile_(std::move(profile)),
      unit_(profile_.allocation_unit),
      store_(std::move(store)),
      clock_(clock),
      policy_(make_allocation_policy(profile_.allocation_policy)),
      allocator_(profile_.capacity_bytes / profile_.allocation_unit) {
  if (!policy_) {
    throw std::invalid_argument(
        fmt::format("unknown allocation policy \"{}\"", profile_.allocation_policy));
  }
  auto root = std::make_shared<Inode>(kRootInode, S_IFDIR);
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

std::shared_ptr<Volume::Inode> Volume::new_inode(uint32_t mode, Owner owner) {
  auto inode = std::make_shared<Inode>(next_inode_++, mode & S_IFMT);
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
  a.blocks = inode.extents.mapped_blocks() * unit_ / 512;
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
  if (child->is_directory()) {
    child->parent = parent.number;
    parent.nlink.fetch_add(1);
  }
  parent.entries.emplace(name, child);
  inodes_.emplace(child->number, child);
  {
    std::lock_guard lock(parent.mutex);
    parent.mtime = parent.ctime = clock_.now();
  }
  std::lock_guard lock(child->mutex);
  return attributes(*child);
}

void Volume::drop_link_locked(const std::shared_ptr<Inode>& child) {
  const uint32_t remaining = child->is_directory() ? 0 : child->nlink.fetch_sub(1) - 1;
  if (child->is_directory()) child->nlink = 0;
  {
    std::lock_guard lock(child->mutex);
    child->ctime = clock_.now();
  }
  if (remaining == 0 && child->references == 0) destroy_locked(child);
}

void Volume::destroy_locked(const std::shared_ptr<Inode>& inode) {
  if (inode->number == kRootInode) return;
  inodes_.erase(inode->number);
  std::lock_guard lock(inode->mutex);
  for (const BlockRange& run : inode->extents.unmap(0, std::numeric_limits<uint64_t>::max() / 2)) {
    allocator_.release(run);
  }
  inode->data.reset();
}

// ---------------------------------------------------------------------------
// Namespace

Result<Attributes> Volume::lookup(uint64_t parent, const std::string& name) {
  auto result = [&]() -> Result<Attributes> {
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
  }();
  return counters_.record(Op::kLookup, 0, std::move(result));
}

void Volume::forget(uint64_t inode, uint64_t references) {
  std::lock_guard lock(namespace_mutex_);
  auto node = find_locked(inode);
  if (!node || inode == kRootInode) return;
  node->references -= std::min(node->references, references);
  if (node->references == 0 && node->nlink == 0) destroy_locked(node);
}

Result<Attributes> Volume::getattr(uint64_t inode) {
  auto result = [&]() -> Result<Attributes> {
    auto node = find(inode);
    if (!node) return fail(ENOENT);
    std::lock_guard lock(node->mutex);
    return attributes(*node);
  }();
  return counters_.record(Op::kGetattr, 0, std::move(result));
}

Result<Attributes> Volume::setattr(uint64_t inode, const AttributeChanges& changes) {
  auto result = [&]() -> Result<Attributes> {
    auto node = find(inode);
    if (!node) return fail(ENOENT);
    std::lock_guard lock(node->mutex);
    return do_setattr(*node, changes);
  }();
  counters_.record(changes.size ? Op::kTruncate : Op::kSetattr, 0,
                   result ? 0 : result.error().value);
  return result;
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
                                  uint64_t rdev, Owner owner) {
  auto result = [&]() -> Result<Attributes> {
    const uint32_t type = mode & S_IFMT;
    if (type == S_IFDIR || type == S_IFLNK) return fail(EINVAL);
    std::lock_guard lock(namespace_mutex_);
    auto dir = directory_locked(parent);
    if (!dir) return std::unexpected(dir.error());
    auto child = new_inode(type == 0 ? (mode | S_IFREG) : mode, owner);
    child->rdev = rdev;
    return add_entry_locked(**dir, name, std::move(child));
  }();
  return counters_.record(Op::kCreate, 0, std::move(result));
}

Result<Attributes> Volume::mkdir(uint64_t parent, const std::string& name, uint32_t mode,
                                 Owner owner) {
  auto result = [&]() -> Result<Attributes> {
    std::lock_guard lock(namespace_mutex_);
    auto dir = directory_locked(parent);
    if (!dir) return std::unexpected(dir.error());
    return add_entry_locked(**dir, name, new_inode(S_IFDIR | (mode & 07777), owner));
  }();
  return counters_.record(Op::kMkdir, 0, std::move(result));
}

Result<Attributes> Volume::symlink(uint64_t parent, const std::string& name,
                                   const std::string& target, Owner owner) {
  auto result = [&]() -> Result<Attributes> {
    if (target.size() >= PATH_MAX) return fail(ENAMETOOLONG);
    std::lock_guard lock(namespace_mutex_);
    auto dir = directory_locked(parent);
    if (!dir) return std::unexpected(dir.error());
    auto child = new_inode(S_IFLNK | 0777, owner);
    child->symlink_target = target;
    return add_entry_locked(**dir, name, std::move(child));
  }();
  return counters_.record(Op::kSymlink, 0, std::move(result));
}

Result<std::string> Volume::readlink(uint64_t inode) {
  auto result = [&]() -> Result<std::string> {
    auto node = find(inode);
    if (!node) return fail(ENOENT);
    if (!S_ISLNK(node->mode)) return fail(EINVAL);
    std::lock_guard lock(node->mutex);
    return node->symlink_target;
  }();
  return counters_.record(Op::kReadlink, 0, std::move(result));
}

Result<Attributes> Volume::link(uint64_t inode, uint64_t new_parent, const std::string& new_name) {
  auto result = [&]() -> Result<Attributes> {
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
    const timespec now = clock_.now();
    {
      std::lock_guard dir_lock((*dir)->mutex);
      (*dir)->mtime = (*dir)->ctime = now;
    }
    std::lock_guard node_lock(node->mutex);
    node->ctime = now;
    return attributes(*node);
  }();
  return counters_.record(Op::kLink, 0, std::move(result));
}

Result<void> Volume::unlink(uint64_t parent, const std::string& name) {
  auto result = [&]() -> Result<void> {
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
    drop_link_locked(child);
    return {};
  }();
  return counters_.record(Op::kUnlink, 0, std::move(result));
}

Result<void> Volume::rmdir(uint64_t parent, const std::string& name) {
  auto result = [&]() -> Result<void> {
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
    drop_link_locked(child);
    return {};
  }();
  return counters_.record(Op::kRmdir, 0, std::move(result));
}

Result<void> Volume::rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                            const std::string& new_name, unsigned flags) {
  auto result = [&]() -> Result<void> {
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
      drop_link_locked(target);
    }
    (*from_dir)->entries.erase(name);
    (*to_dir)->entries.emplace(new_name, source);
    move_directory(source, **from_dir, **to_dir);
    touch(**from_dir);
    if (*to_dir != *from_dir) touch(**to_dir);
    std::lock_guard source_lock(source->mutex);
    source->ctime = now;
    return {};
  }();
  return counters_.record(Op::kRename, 0, std::move(result));
}

Result<std::vector<DirectoryEntry>> Volume::read_directory(uint64_t inode) {
  auto result = [&]() -> Result<std::vector<DirectoryEntry>> {
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
  }();
  return counters_.record(Op::kReaddir, 0, std::move(result));
}

// ---------------------------------------------------------------------------
// Files

Result<void> Volume::open(uint64_t inode, int flags) {
  auto result = [&]() -> Result<void> {
    auto node = find(inode);
    if (!node) return fail(ENOENT);
    if (node->is_directory() && (flags & O_ACCMODE) != O_RDONLY) return fail(EISDIR);
    // O_TRUNC is the filesystem's job: the FUSE kernel (atomic_o_trunc, which
    // libfuse enables) passes it to open and sends no truncating setattr.
    if ((flags & O_TRUNC) && node->is_regular()) {
      std::lock_guard lock(node->mutex);
      truncate_locked(*node, 0);
      node->mtime = node->ctime = clock_.now();
    }
    return {};
  }();
  return counters_.record(Op::kOpen, 0, std::move(result));
}

void Volume::release(uint64_t /*inode*/) { counters_.record(Op::kRelease, 0, 0); }

Result<size_t> Volume::read(uint64_t inode, uint64_t offset, std::span<std::byte> out) {
  auto result = [&]() -> Result<size_t> {
    auto node = find(inode);
    if (!node) return fail(ENOENT);
    if (node->is_directory()) return fail(EISDIR);
    if (!node->is_regular()) return fail(EINVAL);
    std::lock_guard lock(node->mutex);
    if (offset >= node->size) return size_t{0};
    const size_t length = std::min<uint64_t>(out.size(), node->size - offset);
    node->data->read(offset, out.first(length));
    return length;
  }();
  return counters_.record(Op::kRead, result.value_or(0), std::move(result));
}

Result<void> Volume::allocate_holes(Inode& node, uint64_t first, uint64_t count, bool unwritten) {
  std::vector<BlockRange> mapped;  // file ranges mapped so far, undone on ENOSPC
  for (const BlockRange& hole : node.extents.holes(first, count)) {
    const uint64_t goal = policy_->goal(node.extents, hole.start, allocator_);
    auto runs = allocator_.allocate(goal, hole.length);
    if (!runs) {
      for (const BlockRange& range : mapped) {
        for (const BlockRange& run : node.extents.unmap(range.start, range.length)) {
          allocator_.release(run);
        }
      }
      return std::unexpected(runs.error());
    }
    uint64_t logical = hole.start;
    for (const BlockRange& run : *runs) {
      node.extents.map(logical, run.start, run.length, unwritten);
      logical += run.length;
    }
    mapped.push_back(hole);
  }
  return {};
}

Result<size_t> Volume::write(uint64_t inode, uint64_t offset, std::span<const std::byte> data,
                             bool append) {
  auto result = [&]() -> Result<size_t> {
    auto node = find(inode);
    if (!node) return fail(ENOENT);
    if (node->is_directory()) return fail(EISDIR);
    if (!node->is_regular()) return fail(EINVAL);
    std::lock_guard lock(node->mutex);
    if (append) offset = node->size;
    if (data.empty()) return size_t{0};
    if (offset > kMaxFileSize || data.size() > kMaxFileSize - offset) return fail(EFBIG);
    const uint64_t end = offset + data.size();
    const uint64_t first = offset / unit_;
    const uint64_t count = div_up(end, unit_) - first;
    if (auto allocated = allocate_holes(*node, first, count, /*unwritten=*/false); !allocated) {
      return std::unexpected(allocated.error());
    }
    node->extents.mark_written(first, count);
    node->data->write(offset, data);
    node->size = std::max(node->size, end);
    node->mtime = node->ctime = clock_.now();
    return data.size();
  }();
  return counters_.record(Op::kWrite, result.value_or(0), std::move(result));
}

void Volume::truncate_locked(Inode& node, uint64_t size) {
  if (size < node.size) {
    // Whole blocks past the new end are freed (so are blocks preallocated past
    // EOF); the tail of the last block stays allocated and is zeroed.
    const uint64_t keep_blocks = div_up(size, unit_);
    for (const BlockRange& run :
         node.extents.unmap(keep_blocks, std::numeric_limits<uint64_t>::max() / 2 - keep_blocks)) {
      allocator_.release(run);
    }
    node.data->zero(size, node.size - size);
  }
  node.size = size;
}

void Volume::punch_locked(Inode& node, uint64_t offset, uint64_t length) {
  const uint64_t end = offset + length;
  const uint64_t first_whole = div_up(offset, unit_);
  const uint64_t end_whole = end / unit_;
  if (first_whole < end_whole) {
    for (const BlockRange& run : node.extents.unmap(first_whole, end_whole - first_whole)) {
      allocator_.release(run);
    }
  }
  if (offset < node.size) node.data->zero(offset, std::min(end, node.size) - offset);
}

Result<void> Volume::do_fallocate(Inode& node, int mode, uint64_t offset, uint64_t length) {
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
      if (auto r = allocate_holes(node, first, count, /*unwritten=*/true); !r) return r;
      break;
    case FallocateMode::kPunchHole:
      punch_locked(node, offset, length);
      break;
    case FallocateMode::kZeroRange:
      // As ext4: whole blocks become unwritten extents, partial ones are zeroed in place.
      punch_locked(node, offset, length);
      if (auto r = allocate_holes(node, first, count, /*unwritten=*/true); !r) return r;
      break;
  }
  const timespec now = clock_.now();
  if (!keep_size && kind != FallocateMode::kPunchHole && end > node.size) {
    node.size = end;
    node.mtime = now;
  }
  node.ctime = now;
  return {};
}

Result<void> Volume::fallocate(uint64_t inode, int mode, uint64_t offset, uint64_t length) {
  auto result = [&]() -> Result<void> {
    auto node = find(inode);
    if (!node) return fail(ENOENT);
    std::lock_guard lock(node->mutex);
    return do_fallocate(*node, mode, offset, length);
  }();
  if (!result) {
    spdlog::debug("fallocate(inode {}, mode {:#x}, {}+{}): {}", inode, mode, offset, length,
                  errno_name(result.error().value));
  }
  return counters_.record(Op::kFallocate, 0, std::move(result));
}

Result<void> Volume::fsync(uint64_t inode, bool /*datasync*/) {
  auto result = [&]() -> Result<void> {
    if (!find(inode)) return fail(ENOENT);
    return {};
  }();
  return counters_.record(Op::kFsync, 0, std::move(result));
}

Result<uint64_t> Volume::seek(uint64_t inode, uint64_t offset, int whence) {
  auto result = [&]() -> Result<uint64_t> {
    if (whence != SEEK_DATA && whence != SEEK_HOLE) return fail(EINVAL);
    auto node = find(inode);
    if (!node) return fail(ENOENT);
    if (!node->is_regular()) return fail(EINVAL);
    std::lock_guard lock(node->mutex);
    if (offset >= node->size) return fail(ENXIO);
    const uint64_t block = offset / unit_;
    if (whence == SEEK_DATA) {
      auto data_block = node->extents.next_data(block);
      if (!data_block) return fail(ENXIO);
      const uint64_t position = std::max(offset, *data_block * unit_);
      if (position >= node->size) return fail(ENXIO);
      return position;
    }
    const uint64_t position = std::max(offset, node->extents.next_hole(block) * unit_);
    return std::min(position, node->size);  // EOF is a hole
  }();
  return counters_.record(Op::kLseek, 0, std::move(result));
}

FilesystemStats Volume::statfs() {
  const FreeSpaceSummary space = allocator_.summary();
  FilesystemStats s;
  s.block_size = profile_.statfs_block_size;
  s.fragment_size = profile_.statfs_fragment_size;
  s.blocks = profile_.capacity_bytes / s.fragment_size;
  s.blocks_free = space.free_blocks * unit_ / s.fragment_size;
  s.blocks_available = s.blocks_free;
  s.files = kMaxInodes;
  {
    std::lock_guard lock(namespace_mutex_);
    s.files_free = kMaxInodes - inodes_.size();
  }
  s.name_max = profile_.name_max;
  counters_.record(Op::kStatfs, 0, 0);
  return s;
}

// ---------------------------------------------------------------------------
// Extended attributes

Result<void> Volume::setxattr(uint64_t inode, const std::string& name, std::string_view value,
                              int flags) {
  auto result = [&]() -> Result<void> {
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
  }();
  return counters_.record(Op::kSetxattr, 0, std::move(result));
}

Result<std::string> Volume::getxattr(uint64_t inode, const std::string& name) {
  auto result = [&]() -> Result<std::string> {
    auto node = find(inode);
    if (!node) return fail(ENOENT);
    std::lock_guard lock(node->mutex);
    auto it = node->xattrs.find(name);
    if (it == node->xattrs.end()) return fail(ENODATA);
    return it->second;
  }();
  return counters_.record(Op::kGetxattr, 0, std::move(result));
}

Result<std::vector<std::string>> Volume::listxattr(uint64_t inode) {
  auto result = [&]() -> Result<std::vector<std::string>> {
    auto node = find(inode);
    if (!node) return fail(ENOENT);
    std::lock_guard lock(node->mutex);
    std::vector<std::string> names;
    for (const auto& [name, value] : node->xattrs) names.push_back(name);
    return names;
  }();
  return counters_.record(Op::kListxattr, 0, std::move(result));
}

Result<void> Volume::removexattr(uint64_t inode, const std::string& name) {
  auto result = [&]() -> Result<void> {
    auto node = find(inode);
    if (!node) return fail(ENOENT);
    std::lock_guard lock(node->mutex);
    if (node->xattrs.erase(name) == 0) return fail(ENODATA);
    node->ctime = clock_.now();
    return {};
  }();
  return counters_.record(Op::kRemovexattr, 0, std::move(result));
}

// ---------------------------------------------------------------------------
// Statistics

FileStats Volume::file_stats_locked(const Inode& node) const {
  const ExtentSummary summary = node.extents.summarize();
  FileStats f;
  f.inode = node.number;
  f.size = node.size;
  f.allocated_bytes = summary.mapped_blocks * unit_;
  f.extents = summary.extents;
  f.fragments = summary.fragments;
  f.unwritten_extents = summary.unwritten_extents;
  f.holes = node.extents.count_holes(div_up(node.size, unit_));
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
  return node->extents.all();
}

StatsSnapshot Volume::snapshot() {
  StatsSnapshot s;
  s.profile = profile_.name;
  const FreeSpaceSummary space = allocator_.summary();
  s.device.allocation_unit = unit_;
  s.device.capacity_bytes = profile_.capacity_bytes;
  s.device.allocated_bytes = (space.total_blocks - space.free_blocks) * unit_;
  s.device.free_bytes = space.free_blocks * unit_;
  s.device.free_extents = space.free_extents;
  s.device.largest_free_extent_bytes = space.largest_free_extent * unit_;
  s.ops = counters_.snapshot();

  // Paths of regular files, depth first; a file with several links is listed once,
  // under the first path found.
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
        s.files.emplace(path, file_stats_locked(*child));
      }
    }
  };
  walk(*inodes_.at(kRootInode), "");
  return s;
}

}  // namespace mimicfs
