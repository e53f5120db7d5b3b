// SPDX-License-Identifier: Apache-2.0
#include "engine/fs/file_system.h"

namespace mimicfs {

// Each overload gives the operation a Work of its own and drops it.

Result<Attributes> FileSystem::lookup(uint64_t parent, const std::string& name) {
  Work work;
  return lookup(parent, name, work);
}
void FileSystem::forget(uint64_t inode, uint64_t references) {
  Work work;
  forget(inode, references, work);
}
Result<Attributes> FileSystem::getattr(uint64_t inode) {
  Work work;
  return getattr(inode, work);
}
Result<Attributes> FileSystem::setattr(uint64_t inode, const AttributeChanges& changes) {
  Work work;
  return setattr(inode, changes, work);
}
Result<Attributes> FileSystem::create(uint64_t parent, const std::string& name, uint32_t mode,
                                      uint64_t rdev, Owner owner, bool open_handle) {
  Work work;
  return create(parent, name, mode, rdev, owner, open_handle, work);
}
Result<Attributes> FileSystem::tmpfile(uint64_t parent, uint32_t mode, Owner owner) {
  Work work;
  return tmpfile(parent, mode, owner, work);
}
Result<Attributes> FileSystem::mkdir(uint64_t parent, const std::string& name, uint32_t mode,
                                     Owner owner) {
  Work work;
  return mkdir(parent, name, mode, owner, work);
}
Result<Attributes> FileSystem::symlink(uint64_t parent, const std::string& name,
                                       const std::string& target, Owner owner) {
  Work work;
  return symlink(parent, name, target, owner, work);
}
Result<std::string> FileSystem::readlink(uint64_t inode) {
  Work work;
  return readlink(inode, work);
}
Result<Attributes> FileSystem::link(uint64_t inode, uint64_t new_parent,
                                    const std::string& new_name) {
  Work work;
  return link(inode, new_parent, new_name, work);
}
Result<void> FileSystem::unlink(uint64_t parent, const std::string& name) {
  Work work;
  return unlink(parent, name, work);
}
Result<void> FileSystem::rmdir(uint64_t parent, const std::string& name) {
  Work work;
  return rmdir(parent, name, work);
}
Result<void> FileSystem::rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                                const std::string& new_name, unsigned flags) {
  Work work;
  return rename(parent, name, new_parent, new_name, flags, work);
}
Result<std::vector<DirectoryEntry>> FileSystem::read_directory(uint64_t inode) {
  Work work;
  return read_directory(inode, work);
}
Result<void> FileSystem::open(uint64_t inode, int flags) {
  Work work;
  return open(inode, flags, work);
}
Result<void> FileSystem::flush(uint64_t inode, bool writer) {
  Work work;
  return flush(inode, writer, work);
}
void FileSystem::release(uint64_t inode) {
  Work work;
  release(inode, work);
}
Result<size_t> FileSystem::read(uint64_t inode, uint64_t offset, std::span<std::byte> out,
                                int flags) {
  Work work;
  return read(inode, offset, out, flags, work);
}
Result<size_t> FileSystem::write(uint64_t inode, uint64_t offset, std::span<const std::byte> data,
                                 int flags) {
  Work work;
  return write(inode, offset, data, flags, work);
}
Result<size_t> FileSystem::copy_range(uint64_t in, uint64_t in_offset, uint64_t out,
                                      uint64_t out_offset, uint64_t length, int flags) {
  Work work;
  return copy_range(in, in_offset, out, out_offset, length, flags, work);
}
Result<void> FileSystem::fallocate(uint64_t inode, int mode, uint64_t offset, uint64_t length) {
  Work work;
  return fallocate(inode, mode, offset, length, work);
}
Result<void> FileSystem::fsync(uint64_t inode, bool datasync) {
  Work work;
  return fsync(inode, datasync, work);
}
Result<uint64_t> FileSystem::seek(uint64_t inode, uint64_t offset, int whence) {
  Work work;
  return seek(inode, offset, whence, work);
}
Result<FilesystemStats> FileSystem::statfs() {
  Work work;
  return statfs(work);
}
Result<void> FileSystem::setxattr(uint64_t inode, const std::string& name, std::string_view value,
                                  int flags) {
  Work work;
  return setxattr(inode, name, value, flags, work);
}
Result<std::string> FileSystem::getxattr(uint64_t inode, const std::string& name) {
  Work work;
  return getxattr(inode, name, work);
}
Result<std::vector<std::string>> FileSystem::listxattr(uint64_t inode) {
  Work work;
  return listxattr(inode, work);
}
Result<void> FileSystem::removexattr(uint64_t inode, const std::string& name) {
  Work work;
  return removexattr(inode, name, work);
}
CrashReport FileSystem::crash() {
  Work work;
  return crash(work);
}

}  // namespace mimicfs
