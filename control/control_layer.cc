// SPDX-License-Identifier: Apache-2.0
#include "control/control_layer.h"

#include <algorithm>
#include <cstring>

namespace mimicfs {
namespace {

bool owns(uint64_t inode) { return ControlFiles::owns(inode); }
bool reserved(uint64_t parent, std::string_view name) {
  return ControlFiles::reserved(parent, name);
}

}  // namespace

OperationReply ControlLayer::dispatch(const Operation& operation, Work& work) {
  return serve_operation(operation, [&](const auto& request) { return serve(request, work); });
}

Result<Attributes> ControlLayer::serve(const ops::Lookup& request, Work& work) {
  if (auto control = files_.lookup(request.parent, request.name)) return std::move(*control);
  if (owns(request.parent)) return fail(ENOENT);
  return pass(request, work);
}

Result<void> ControlLayer::serve(const ops::Forget& request, Work& work) {
  if (owns(request.inode)) return {};  // the volume never had it
  return pass(request, work);
}

Result<Attributes> ControlLayer::serve(const ops::Getattr& request, Work& work) {
  if (owns(request.inode)) return files_.getattr(request.inode);
  return pass(request, work);
}

Result<Attributes> ControlLayer::serve(const ops::Setattr& request, Work& work) {
  if (owns(request.inode)) return fail(EPERM);
  return pass(request, work);
}

// The name ".mimicfs" is taken in the root; nothing is made inside it.
Result<Attributes> ControlLayer::serve(const ops::Create& request, Work& work) {
  if (reserved(request.parent, request.name)) return fail(EEXIST);
  if (owns(request.parent)) return fail(EPERM);
  return pass(request, work);
}

// ext4 and xfs answer an O_TMPFILE in a directory that cannot hold one so.
Result<Attributes> ControlLayer::serve(const ops::Tmpfile& request, Work& work) {
  if (owns(request.parent)) return fail(EOPNOTSUPP);
  return pass(request, work);
}

Result<Attributes> ControlLayer::serve(const ops::Mkdir& request, Work& work) {
  if (reserved(request.parent, request.name)) return fail(EEXIST);
  if (owns(request.parent)) return fail(EPERM);
  return pass(request, work);
}

Result<Attributes> ControlLayer::serve(const ops::Symlink& request, Work& work) {
  if (reserved(request.parent, request.name)) return fail(EEXIST);
  if (owns(request.parent)) return fail(EPERM);
  return pass(request, work);
}

Result<std::string> ControlLayer::serve(const ops::Readlink& request, Work& work) {
  if (owns(request.inode)) return fail(EINVAL);
  return pass(request, work);
}

Result<Attributes> ControlLayer::serve(const ops::Link& request, Work& work) {
  if (reserved(request.new_parent, request.new_name)) return fail(EEXIST);
  if (owns(request.inode) || owns(request.new_parent)) return fail(EPERM);
  return pass(request, work);
}

Result<void> ControlLayer::serve(const ops::Unlink& request, Work& work) {
  if (reserved(request.parent, request.name)) return fail(EISDIR);
  if (owns(request.parent)) return fail(EPERM);
  return pass(request, work);
}

Result<void> ControlLayer::serve(const ops::Rmdir& request, Work& work) {
  if (reserved(request.parent, request.name) || owns(request.parent)) return fail(EPERM);
  return pass(request, work);
}

Result<void> ControlLayer::serve(const ops::Rename& request, Work& work) {
  if (reserved(request.parent, request.name) || reserved(request.new_parent, request.new_name) ||
      owns(request.parent) || owns(request.new_parent)) {
    return fail(EPERM);
  }
  return pass(request, work);
}

Result<std::vector<DirectoryEntry>> ControlLayer::serve(const ops::ReadDirectory& request,
                                                        Work& work) {
  if (owns(request.inode)) return files_.read_directory(request.inode);
  return pass(request, work);
}

Result<void> ControlLayer::serve(const ops::Open& request, Work& work) {
  if (!owns(request.inode)) return pass(request, work);
  auto contents = files_.open_contents(request.inode, request.flags);
  if (!contents) return std::unexpected(contents.error());
  std::lock_guard lock(mutex_);
  contents_[request.handle] = std::move(*contents);
  return {};
}

Result<void> ControlLayer::serve(const ops::Flush& request, Work& work) {
  if (owns(request.inode)) return {};
  return pass(request, work);
}

Result<void> ControlLayer::serve(const ops::Release& request, Work& work) {
  if (!owns(request.inode)) return pass(request, work);
  std::lock_guard lock(mutex_);
  contents_.erase(request.handle);
  return {};
}

Result<size_t> ControlLayer::serve(const ops::Read& request, Work& work) {
  if (!owns(request.inode)) return pass(request, work);
  std::lock_guard lock(mutex_);
  auto it = contents_.find(request.handle);
  if (it == contents_.end()) return fail(EBADF);
  const std::string& contents = it->second;
  const size_t start = std::min<uint64_t>(request.offset, contents.size());
  const size_t length = std::min(request.out.size(), contents.size() - start);
  std::memcpy(request.out.data(), contents.data() + start, length);
  return length;
}

// One command per write to ctl; the other control files are read-only.
Result<size_t> ControlLayer::serve(const ops::Write& request, Work& work) {
  if (request.inode == ControlFiles::kCtlInode) {
    const auto& data = request.data;
    auto done = files_.execute(std::string_view(reinterpret_cast<const char*>(data.data()),
                                                data.size()),
                               work);
    if (!done) return std::unexpected(done.error());
    return data.size();
  }
  if (owns(request.inode)) return fail(EBADF);
  return pass(request, work);
}

Result<size_t> ControlLayer::serve(const ops::CopyRange& request, Work& work) {
  if (owns(request.in) || owns(request.out)) return fail(EINVAL);
  return pass(request, work);
}

Result<void> ControlLayer::serve(const ops::Fallocate& request, Work& work) {
  if (owns(request.inode)) return fail(EOPNOTSUPP);
  return pass(request, work);
}

Result<void> ControlLayer::serve(const ops::Fsync& request, Work& work) {
  if (owns(request.inode)) return {};
  return pass(request, work);
}

Result<uint64_t> ControlLayer::serve(const ops::Seek& request, Work& work) {
  if (owns(request.inode)) return fail(EINVAL);
  return pass(request, work);
}

// user.mimicfs.* are read-only, and the control files have no xattrs.
Result<void> ControlLayer::serve(const ops::Setxattr& request, Work& work) {
  if (owns(request.inode)) return fail(ENOTSUP);
  if (answers_xattr(request.name)) return fail(EPERM);
  return pass(request, work);
}

Result<std::string> ControlLayer::serve(const ops::Getxattr& request, Work& work) {
  if (owns(request.inode)) return fail(ENODATA);
  if (auto value = files_.virtual_xattr(request.inode, request.name)) return std::move(*value);
  return pass(request, work);
}

Result<std::vector<std::string>> ControlLayer::serve(const ops::Listxattr& request, Work& work) {
  if (owns(request.inode)) return std::vector<std::string>{};
  return pass(request, work);
}

Result<void> ControlLayer::serve(const ops::Removexattr& request, Work& work) {
  if (owns(request.inode)) return fail(ENOTSUP);
  if (answers_xattr(request.name)) return fail(EPERM);
  return pass(request, work);
}

}  // namespace mimicfs
