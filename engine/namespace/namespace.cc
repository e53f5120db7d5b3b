// SPDX-License-Identifier: Apache-2.0
#include "engine/namespace/namespace.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>

#include <algorithm>
#include <unordered_set>

namespace mimicfs {

Namespace::Namespace(const Profile& profile, uint64_t group_count, const WallClock& clock,
                     Hooks hooks)
    : profile_(profile),
      group_count_(group_count),
      clock_(clock),
      hooks_(std::move(hooks)),
      journal_(NamespaceJournal::durability_of(profile)) {
  auto root = std::make_shared<Inode>(kRootInode, S_IFDIR, 0);
  // Not shared yet; both locks for the analysis, in the lock order.
  std::lock_guard table_lock(mutex_);
  {
    std::lock_guard lock(root->mutex);
    root->permissions = 0755;
    root->atime = root->mtime = root->ctime = clock_.now();
  }
  root->nlink = 2;
  root->parent = kRootInode;
  root->references = 1;  // the mount itself: the root is never destroyed
  inodes_.emplace(kRootInode, std::move(root));
}

std::shared_ptr<Inode> Namespace::find_locked(uint64_t inode) {
  auto it = inodes_.find(inode);
  return it == inodes_.end() ? nullptr : it->second;
}

std::shared_ptr<Inode> Namespace::find(uint64_t inode) {
  std::lock_guard lock(mutex_);
  return find_locked(inode);
}

Result<std::shared_ptr<Inode>> Namespace::directory_locked(uint64_t inode, bool removed_too) {
  auto dir = find_locked(inode);
  if (!dir) return fail(ENOENT);
  if (!dir->is_directory()) return fail(ENOTDIR);
  // Removed, but still someone's working directory (IS_DEADDIR): nothing is
  // found or made in it. The kernel refuses it itself but across NFS clients.
  if (dir->nlink.load() == 0 && !removed_too) return fail(ENOENT);
  return dir;
}

std::shared_ptr<Inode> Namespace::new_inode(uint32_t mode, Owner owner, const Inode& parent) {
  // As xfs and ext4's Orlov allocator: a new directory goes to the next group,
  // a file to its directory's.
  const uint64_t group = S_ISDIR(mode) ? next_directory_group_++ % group_count_ : parent.group;
  uint32_t parent_permissions, parent_gid;
  {
    std::lock_guard lock(parent.mutex);
    parent_permissions = parent.permissions;
    parent_gid = parent.gid;
  }
  auto inode = std::make_shared<Inode>(next_inode_++, mode & S_IFMT, group);
  std::lock_guard lock(inode->mutex);  // not shared yet: for the analysis
  inode->permissions = mode & 07777;
  inode->uid = owner.uid;
  inode->gid = owner.gid;
  // BSD group semantics in a setgid directory (Linux's inode_init_owner): the
  // new entry takes the directory's group, and a new directory its setgid bit.
  // The kernel has already cleared S_ISGID from a file its caller may not give it.
  if (parent_permissions & S_ISGID) {
    inode->gid = parent_gid;
    if (S_ISDIR(mode)) inode->permissions |= S_ISGID;
  }
  inode->atime = inode->mtime = inode->ctime = clock_.now();
  if (inode->is_regular()) inode->file = hooks_.new_file(group);
  return inode;
}

Result<Attributes> Namespace::add_entry_locked(Inode& parent, const std::string& name,
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
  return child->attributes(profile_);
}

void Namespace::drop_link_locked(const std::shared_ptr<Inode>& child, Work& work) {
  uint32_t remaining;
  {
    // A file's last link and its last handle are decided under its lock, so
    // exactly one of unlink and release frees the storage.
    std::lock_guard lock(child->mutex);
    remaining = child->is_directory() ? 0 : child->nlink.load() - 1;
    child->nlink = remaining;
    child->ctime = clock_.now();
    if (remaining == 0) work.unlinked_inodes.push_back(child->number);
    if (remaining == 0 && child->is_regular()) hooks_.last_link(child, work);
  }
  if (remaining == 0 && child->references == 0) destroy_locked(child, work);
}

void Namespace::destroy_locked(const std::shared_ptr<Inode>& inode, Work& work) {
  if (inode->number == kRootInode) return;
  inodes_.erase(inode->number);
  work.destroyed_inodes.push_back(inode->number);
  // The Inode itself goes with its last shared_ptr.
  std::lock_guard lock(inode->mutex);
  hooks_.destroyed(inode, work);
}

Result<Attributes> Namespace::add(uint64_t parent, const std::string& name, uint32_t mode,
                                  Owner owner, uint64_t rdev, const std::string& symlink_target,
                                  bool open_handle, Work& work) {
  std::lock_guard lock(mutex_);
  auto dir = directory_locked(parent);
  if (!dir) return std::unexpected(dir.error());
  auto child = new_inode(mode, owner, **dir);
  {
    std::lock_guard child_lock(child->mutex);
    child->rdev = rdev;
    child->symlink_target = symlink_target;
    if (open_handle && child->is_regular()) child->open_handles = 1;
  }
  // A create's time is the new file's; a directory's or a symlink's is nobody's.
  if (!child->is_directory() && !S_ISLNK(child->mode)) work.file = child->number;
  auto attributes = add_entry_locked(**dir, name, std::move(child));
  if (attributes) ++work.metadata_updates;
  return attributes;
}

Result<Attributes> Namespace::add_unnamed(uint64_t parent, uint32_t mode, Owner owner,
                                          Work& work) {
  std::lock_guard lock(mutex_);
  auto dir = directory_locked(parent, /*removed_too=*/true);
  if (!dir) return std::unexpected(dir.error());
  if (inodes_.size() >= kMaxInodes) return fail(ENOSPC);
  auto child = new_inode(mode, owner, **dir);
  child->references = 1;
  child->unnamed = true;
  inodes_.emplace(child->number, child);
  work.file = child->number;
  ++work.metadata_updates;
  std::lock_guard child_lock(child->mutex);
  child->open_handles = 1;
  return child->attributes(profile_);
}

uint64_t Namespace::inode_count() {
  std::lock_guard lock(mutex_);
  return inodes_.size();
}

std::shared_ptr<Inode> Namespace::entry(uint64_t parent, const std::string& name) {
  std::lock_guard lock(mutex_);
  auto dir = directory_locked(parent);
  if (!dir) return nullptr;
  auto it = (*dir)->entries.find(name);
  return it == (*dir)->entries.end() ? nullptr : it->second;
}

Result<Attributes> Namespace::lookup(uint64_t parent, const std::string& name, bool reference) {
  std::lock_guard lock(mutex_);
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
  if (reference) ++child->references;
  std::lock_guard inode_lock(child->mutex);
  return child->attributes(profile_);
}

void Namespace::forget(uint64_t inode, uint64_t references, Work& work) {
  std::lock_guard lock(mutex_);
  auto node = find_locked(inode);
  if (!node || inode == kRootInode) return;
  node->references -= std::min(node->references, references);
  if (node->references == 0 && node->nlink == 0) destroy_locked(node, work);
}

Result<Attributes> Namespace::link(uint64_t inode, uint64_t new_parent, const std::string& new_name,
                                   Work& work) {
  std::lock_guard lock(mutex_);
  auto node = find_locked(inode);
  if (!node) return fail(ENOENT);
  if (node->is_directory()) return fail(EPERM);
  // linkat of an unlinked file: only an O_TMPFILE one never named (the kernel
  // refuses the others before asking).
  if (node->nlink == 0 && !node->unnamed) return fail(ENOENT);
  auto dir = directory_locked(new_parent);
  if (!dir) return std::unexpected(dir.error());
  if (new_name.size() > profile_.name_max) return fail(ENAMETOOLONG);
  if ((*dir)->entries.contains(new_name)) return fail(EEXIST);
  if (node->unnamed) {  // its first name: its path from now on
    node->unnamed = false;
    node->parent = (*dir)->number;
    node->name = new_name;
  }
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
  return node->attributes(profile_);
}

Result<void> Namespace::unlink(uint64_t parent, const std::string& name, Work& work) {
  std::lock_guard lock(mutex_);
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
  note_removal_locked(child, (*dir)->number, name);
  drop_link_locked(child, work);
  return {};
}

Result<void> Namespace::rmdir(uint64_t parent, const std::string& name, Work& work) {
  if (name == ".") return fail(EINVAL);
  if (name == "..") return fail(ENOTEMPTY);
  std::lock_guard lock(mutex_);
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
  note_removal_locked(child, (*dir)->number, name);
  drop_link_locked(child, work);
  return {};
}

Result<void> Namespace::rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                               const std::string& new_name, unsigned flags, Work& work) {
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return fail(EINVAL);
  if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE)) return fail(EINVAL);
  std::lock_guard lock(mutex_);
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
      assert_held(mutex_);  // the lambda runs under the caller's lock
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
    // xfs_cross_rename rewrites the ".." of a directory that changes parent,
    // and that stamps it; a plain rename's does not.
    if (profile_.exchange_touches_moved_directory && *from_dir != *to_dir) {
      if (source->is_directory()) touch(*source);
      if (target->is_directory()) touch(*target);
    }
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
    if (target->is_directory() && !target->entries.empty()) {
      return fail(profile_.rename_onto_nonempty == "EEXIST" ? EEXIST : ENOTEMPTY);
    }
    (*to_dir)->entries.erase(target_it);
    if (target->is_directory()) (*to_dir)->nlink.fetch_sub(1);
    ++work.unlinks;
    note_removal_locked(target, (*to_dir)->number, new_name);
    drop_link_locked(target, work);
  }
  (*from_dir)->entries.erase(name);
  (*to_dir)->entries.emplace(new_name, source);
  move_directory(source, **from_dir, **to_dir);
  journal_.renamed(source->number, (*to_dir)->number, new_name, (*from_dir)->number, name);
  source->parent = (*to_dir)->number;
  source->name = new_name;
  touch(**from_dir);
  if (*to_dir != *from_dir) touch(**to_dir);
  std::lock_guard source_lock(source->mutex);
  source->ctime = now;
  return {};
}

Result<std::vector<DirectoryEntry>> Namespace::read_directory(uint64_t inode) {
  std::lock_guard lock(mutex_);
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

std::string Namespace::path(uint64_t inode) {
  std::lock_guard lock(mutex_);
  return path_locked(inode);
}

std::string Namespace::path_locked(uint64_t inode) {
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

void Namespace::for_each_file(const std::function<void(const std::string&, const Inode&)>& visit) {
  // Paths of regular files, depth first; a file with several links is visited
  // once, under the first path found. Only the walk holds the table's lock:
  // each visit (a file's stats may count a million extents) holds the file's
  // alone, so other operations wait for the walk, not for the visits.
  std::vector<std::pair<std::string, std::shared_ptr<Inode>>> files;
  {
    std::lock_guard lock(mutex_);
    std::unordered_set<uint64_t> seen;
    std::function<void(const Inode&, const std::string&)> walk = [&](const Inode& dir,
                                                                     const std::string& prefix) {
      for (const auto& [name, child] : dir.entries) {
        std::string path = prefix + "/" + name;
        if (child->is_directory()) {
          walk(*child, path);
        } else if (child->is_regular() && (child->nlink <= 1 || seen.insert(child->number).second)) {
          files.emplace_back(std::move(path), child);
        }
      }
    };
    walk(*inodes_.at(kRootInode), "");
  }
  for (const auto& [path, file] : files) {
    std::lock_guard file_lock(file->mutex);
    visit(path, *file);
  }
}

}  // namespace mimicfs
