// SPDX-License-Identifier: Apache-2.0
#include "engine/layers/layer.h"

#include <linux/falloc.h>

namespace mimicfs {

Result<void> Layer::enter(const Call&, Work&) { return {}; }
void Layer::leave(const Call&, Work&, int) {}

template <typename T, typename Forward>
Result<T> Layer::around(const Call& call, Work& work, Forward&& forward) {
  Result<T> result = [&]() -> Result<T> {
    if (auto entered = enter(call, work); !entered) return std::unexpected(entered.error());
    return forward();
  }();
  leave(call, work, result ? 0 : result.error().value);
  return result;
}

Result<Attributes> Layer::lookup(uint64_t parent, const std::string& name, Work& work) {
  return around<Attributes>({Op::kLookup, parent, name}, work,
                            [&] { return target_.lookup(parent, name, work); });
}

// Not an operation of the program's: the kernel dropping its cache.
void Layer::forget(uint64_t inode, uint64_t references, Work& work) {
  target_.forget(inode, references, work);
}

Result<Attributes> Layer::getattr(uint64_t inode, Work& work) {
  return around<Attributes>({Op::kGetattr, inode, {}}, work,
                            [&] { return target_.getattr(inode, work); });
}

Result<Attributes> Layer::setattr(uint64_t inode, const AttributeChanges& changes, Work& work) {
  const Op op = changes.size ? Op::kTruncate : Op::kSetattr;
  return around<Attributes>({op, inode, {}}, work,
                            [&] { return target_.setattr(inode, changes, work); });
}

Result<Attributes> Layer::create(uint64_t parent, const std::string& name, uint32_t mode,
                                 uint64_t rdev, Owner owner, bool open_handle, Work& work) {
  return around<Attributes>({Op::kCreate, parent, name}, work, [&] {
    return target_.create(parent, name, mode, rdev, owner, open_handle, work);
  });
}

Result<Attributes> Layer::tmpfile(uint64_t parent, uint32_t mode, Owner owner, Work& work) {
  return around<Attributes>({Op::kTmpfile, parent, {}}, work,
                            [&] { return target_.tmpfile(parent, mode, owner, work); });
}

Result<Attributes> Layer::mkdir(uint64_t parent, const std::string& name, uint32_t mode,
                                Owner owner, Work& work) {
  return around<Attributes>({Op::kMkdir, parent, name}, work,
                            [&] { return target_.mkdir(parent, name, mode, owner, work); });
}

Result<Attributes> Layer::symlink(uint64_t parent, const std::string& name,
                                  const std::string& link_target, Owner owner, Work& work) {
  return around<Attributes>({Op::kSymlink, parent, name}, work, [&] {
    return target_.symlink(parent, name, link_target, owner, work);
  });
}

Result<std::string> Layer::readlink(uint64_t inode, Work& work) {
  return around<std::string>({Op::kReadlink, inode, {}}, work,
                             [&] { return target_.readlink(inode, work); });
}

Result<Attributes> Layer::link(uint64_t inode, uint64_t new_parent, const std::string& new_name,
                               Work& work) {
  return around<Attributes>({Op::kLink, new_parent, new_name}, work,
                            [&] { return target_.link(inode, new_parent, new_name, work); });
}

Result<void> Layer::unlink(uint64_t parent, const std::string& name, Work& work) {
  return around<void>({Op::kUnlink, parent, name}, work,
                      [&] { return target_.unlink(parent, name, work); });
}

Result<void> Layer::rmdir(uint64_t parent, const std::string& name, Work& work) {
  return around<void>({Op::kRmdir, parent, name}, work,
                      [&] { return target_.rmdir(parent, name, work); });
}

Result<void> Layer::rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                           const std::string& new_name, unsigned flags, Work& work) {
  return around<void>({Op::kRename, parent, name}, work, [&] {
    return target_.rename(parent, name, new_parent, new_name, flags, work);
  });
}

Result<std::vector<DirectoryEntry>> Layer::read_directory(uint64_t inode, Work& work) {
  return around<std::vector<DirectoryEntry>>({Op::kReaddir, inode, {}}, work,
                                             [&] { return target_.read_directory(inode, work); });
}

Result<void> Layer::open(uint64_t inode, int flags, Work& work) {
  return around<void>({Op::kOpen, inode, {}}, work,
                      [&] { return target_.open(inode, flags, work); });
}

Result<void> Layer::flush(uint64_t inode, bool writer, Work& work) {
  return around<void>({Op::kFlush, inode, {}}, work,
                      [&] { return target_.flush(inode, writer, work); });
}

void Layer::release(uint64_t inode, Work& work) {
  // A release cannot fail: the handle is gone whatever a layer says.
  (void)around<void>({Op::kRelease, inode, {}}, work, [&]() -> Result<void> {
    target_.release(inode, work);
    return {};
  });
}

Result<size_t> Layer::read(uint64_t inode, uint64_t offset, std::span<std::byte> out, int flags,
                           Work& work) {
  return around<size_t>({Op::kRead, inode, {}}, work,
                        [&] { return target_.read(inode, offset, out, flags, work); });
}

Result<size_t> Layer::write(uint64_t inode, uint64_t offset, std::span<const std::byte> data,
                            int flags, Work& work) {
  return around<size_t>({Op::kWrite, inode, {}}, work,
                        [&] { return target_.write(inode, offset, data, flags, work); });
}

Result<size_t> Layer::copy_range(uint64_t in, uint64_t in_offset, uint64_t out, uint64_t out_offset,
                                 uint64_t length, int flags, Work& work) {
  // Faults and path rules see the destination, the file the copy changes.
  return around<size_t>({Op::kCopyFileRange, out, {}}, work, [&] {
    return target_.copy_range(in, in_offset, out, out_offset, length, flags, work);
  });
}

Result<void> Layer::fallocate(uint64_t inode, int mode, uint64_t offset, uint64_t length,
                              Work& work) {
  const Op op = (mode & FALLOC_FL_PUNCH_HOLE) ? Op::kPunch : Op::kFallocate;
  return around<void>({op, inode, {}}, work,
                      [&] { return target_.fallocate(inode, mode, offset, length, work); });
}

Result<void> Layer::fsync(uint64_t inode, bool datasync, Work& work) {
  return around<void>({datasync ? Op::kFdatasync : Op::kFsync, inode, {}}, work,
                      [&] { return target_.fsync(inode, datasync, work); });
}

Result<uint64_t> Layer::seek(uint64_t inode, uint64_t offset, int whence, Work& work) {
  return around<uint64_t>({Op::kLseek, inode, {}}, work,
                          [&] { return target_.seek(inode, offset, whence, work); });
}

Result<FilesystemStats> Layer::statfs(Work& work) {
  return around<FilesystemStats>({Op::kStatfs, kRootInode, {}}, work,
                                 [&] { return target_.statfs(work); });
}

Result<void> Layer::setxattr(uint64_t inode, const std::string& name, std::string_view value,
                             int flags, Work& work) {
  return around<void>({Op::kSetxattr, inode, {}}, work,
                      [&] { return target_.setxattr(inode, name, value, flags, work); });
}

Result<std::string> Layer::getxattr(uint64_t inode, const std::string& name, Work& work) {
  return around<std::string>({Op::kGetxattr, inode, {}}, work,
                             [&] { return target_.getxattr(inode, name, work); });
}

Result<std::vector<std::string>> Layer::listxattr(uint64_t inode, Work& work) {
  return around<std::vector<std::string>>({Op::kListxattr, inode, {}}, work,
                                          [&] { return target_.listxattr(inode, work); });
}

Result<void> Layer::removexattr(uint64_t inode, const std::string& name, Work& work) {
  return around<void>({Op::kRemovexattr, inode, {}}, work,
                      [&] { return target_.removexattr(inode, name, work); });
}

}  // namespace mimicfs
