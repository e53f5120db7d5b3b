// SPDX-License-Identifier: Apache-2.0
// Namespace: the saved image's inodes and directories (a data directory's volume), and
// the checks a loaded tree must pass before it is served.
#include "engine/namespace/namespace.h"

#include <sys/stat.h>

#include <algorithm>
#include <unordered_map>

namespace mimicfs {

namespace {

ImageJson save_time(const timespec& t) { return {t.tv_sec, t.tv_nsec}; }

timespec load_time(const ImageJson& saved) {
  return timespec{saved.at(0).get<time_t>(), saved.at(1).get<long>()};
}

}  // namespace

ImageJson Namespace::save() {
  std::lock_guard table_lock(mutex_);
  if (!removed_.empty()) throw ImageError("removals not committed yet");
  ImageJson inodes = ImageJson::array();
  for (const auto& [number, inode] : inodes_) {
    if (number != kRootInode && inode->nlink == 0) continue;
    std::lock_guard lock(inode->mutex);
    ImageJson saved{{"number", number},
                    {"mode", inode->mode | inode->permissions},
                    {"group", inode->group},
                    {"uid", inode->uid},
                    {"gid", inode->gid},
                    {"rdev", inode->rdev},
                    {"atime", save_time(inode->atime)},
                    {"mtime", save_time(inode->mtime)},
                    {"ctime", save_time(inode->ctime)},
                    {"nlink", inode->nlink.load()},
                    {"parent", inode->parent},
                    {"name", pack_bytes(inode->name)}};
    ImageJson xattrs = ImageJson::array();
    for (const auto& [name, value] : inode->xattrs) {
      xattrs.push_back({pack_bytes(name), pack_bytes(value)});
    }
    saved["xattrs"] = std::move(xattrs);
    if (S_ISLNK(inode->mode)) saved["symlink"] = pack_bytes(inode->symlink_target);
    if (inode->is_directory()) {
      ImageJson entries = ImageJson::array();
      for (const auto& [name, child] : inode->entries) {
        entries.push_back({pack_bytes(name), child->number});
      }
      saved["entries"] = std::move(entries);
    }
    if (inode->file) saved["file"] = inode->file->save();
    inodes.push_back(std::move(saved));
  }
  return ImageJson{{"next_inode", next_inode_},
                   {"next_directory_group", next_directory_group_},
                   {"inodes", std::move(inodes)}};
}

void Namespace::load(const ImageJson& saved, const FileLoader& load_file) {
  std::lock_guard table_lock(mutex_);
  if (inodes_.size() != 1) throw std::logic_error("Namespace::load: the namespace is not new");
  const uint64_t next_inode = saved.at("next_inode").get<uint64_t>();
  if (next_inode < FileSystem::kFirstFileInode || next_inode > kMaxInodes) {
    throw ImageError("the next inode number is out of range");
  }
  std::unordered_map<uint64_t, std::shared_ptr<Inode>> loaded;
  for (const ImageJson& s : saved.at("inodes")) {
    const uint64_t number = s.at("number").get<uint64_t>();
    const uint32_t mode = s.at("mode").get<uint32_t>();
    const uint64_t group = s.at("group").get<uint64_t>();
    if ((number != kRootInode && (number < FileSystem::kFirstFileInode || number >= next_inode)) ||
        loaded.contains(number) || group >= std::max<uint64_t>(group_count_, 1)) {
      throw ImageError("an inode's number or group is out of range, or repeated");
    }
    const uint32_t type = mode & S_IFMT;
    if (type != S_IFREG && type != S_IFDIR && type != S_IFLNK && type != S_IFCHR &&
        type != S_IFBLK && type != S_IFIFO && type != S_IFSOCK) {
      throw ImageError("an inode has no valid type");
    }
    if ((number == kRootInode) != (type == S_IFDIR && number == kRootInode)) {
      throw ImageError("the root is not a directory");
    }
    auto inode = std::make_shared<Inode>(number, type, group);
    std::lock_guard lock(inode->mutex);  // not shared yet: for the analysis
    inode->permissions = mode & 07777;
    inode->uid = s.at("uid").get<uint32_t>();
    inode->gid = s.at("gid").get<uint32_t>();
    inode->rdev = s.at("rdev").get<uint64_t>();
    inode->atime = load_time(s.at("atime"));
    inode->mtime = load_time(s.at("mtime"));
    inode->ctime = load_time(s.at("ctime"));
    inode->nlink = s.at("nlink").get<uint32_t>();
    inode->parent = s.at("parent").get<uint64_t>();
    inode->name = unpack_bytes(s.at("name"));
    for (const ImageJson& xattr : s.at("xattrs")) {
      inode->xattrs.emplace(unpack_bytes(xattr.at(0)), unpack_bytes(xattr.at(1)));
    }
    if (type == S_IFLNK) inode->symlink_target = unpack_bytes(s.at("symlink"));
    if (type == S_IFREG) inode->file = load_file(group, s.at("file"));
    if (number == kRootInode) inode->references = 1;  // the mount itself
    loaded.emplace(number, std::move(inode));
  }
  if (!loaded.contains(kRootInode)) throw ImageError("the root directory is missing");
  try {
    for (const ImageJson& s : saved.at("inodes")) {
      if (!s.contains("entries")) continue;
      Inode& directory = *loaded.at(s.at("number").get<uint64_t>());
      if (!directory.is_directory()) throw ImageError("entries in an inode that is no directory");
      for (const ImageJson& entry : s.at("entries")) {
        auto child = loaded.find(entry.at(1).get<uint64_t>());
        if (child == loaded.end()) throw ImageError("an entry names an inode that is missing");
        directory.entries.emplace(unpack_bytes(entry.at(0)), child->second);
      }
    }
    check_tree(loaded);
  } catch (...) {
    // A bad image's entries may make a cycle of owners: broken, so they go.
    for (auto& [number, inode] : loaded) inode->entries.clear();
    throw;
  }
  next_inode_ = next_inode;
  next_directory_group_ = saved.at("next_directory_group").get<uint64_t>();
  inodes_ = std::move(loaded);
}

void Namespace::check_tree(const std::unordered_map<uint64_t, std::shared_ptr<Inode>>& loaded) const {
  // From the root, each directory is reached once, through an entry in its
  // parent; every inode is reached; links are what the entries make them.
  std::unordered_map<uint64_t, uint32_t> links;  // inode -> entries naming it
  std::unordered_map<uint64_t, uint32_t> subdirectories;
  std::vector<const Inode*> pending = {loaded.at(kRootInode).get()};
  std::unordered_map<uint64_t, bool> reached = {{kRootInode, true}};
  std::unordered_map<uint64_t, bool> parent_holds_it = {{kRootInode, true}};
  while (!pending.empty()) {
    const Inode* directory = pending.back();
    pending.pop_back();
    for (const auto& [name, child] : directory->entries) {
      if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
          name.size() > profile_.name_max) {
        throw ImageError("a directory entry has a name no directory can hold");
      }
      if (child->number == kRootInode) throw ImageError("an entry names the root");
      ++links[child->number];
      if (child->parent == directory->number) parent_holds_it[child->number] = true;
      if (child->is_directory()) {
        if (reached.contains(child->number)) {
          throw ImageError("a directory is reached twice (a cycle, or two parents)");
        }
        if (child->parent != directory->number) {
          throw ImageError("a directory's parent is not the directory holding it");
        }
        ++subdirectories[directory->number];
        pending.push_back(child.get());
      }
      reached[child->number] = true;
    }
  }
  for (const auto& [number, inode] : loaded) {
    if (!reached.contains(number)) throw ImageError("an inode no entry reaches");
    const uint32_t expected =
        inode->is_directory() ? 2 + subdirectories[number] : links[number];
    if (inode->nlink.load() != expected) {
      throw ImageError("an inode's link count is not its entries'");
    }
    if (!parent_holds_it.contains(number)) throw ImageError("an inode's parent holds no entry of it");
  }
}

}  // namespace mimicfs
