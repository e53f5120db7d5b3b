// SPDX-License-Identifier: Apache-2.0
// Volume's extended attributes: the namespaces Linux's filesystems serve,
// their limits, and who may list what.
#include "engine/core/volume.h"

#include <sys/xattr.h>


namespace mimicfs {

namespace {

// Linux's limits for an xattr; the emulated backends share them.
constexpr size_t kMaxXattrValue = 65536;
constexpr size_t kMaxXattrName = 255;

// The namespaces Linux's ext4, xfs and btrfs serve; any other prefix gets
// EOPNOTSUPP from the kernel's xattr handlers (FUSE passes every name through,
// so the volume answers it). POSIX ACLs (system.posix_acl_*, forwarded by the
// kernel since 6.2) get EOPNOTSUPP too, as on ext4 mounted noacl.
bool known_namespace(std::string_view name) {
  return name.starts_with("user.") || name.starts_with("trusted.") || name.starts_with("security.");
}

}  // namespace

Result<void> Volume::serve(const ops::Setxattr& request, Work&) {
  const auto& [inode, name, value, flags] = request;
  if (name.empty() || name.size() > kMaxXattrName) return fail(ERANGE);
  if (!known_namespace(name)) return fail(EOPNOTSUPP);
  if (value.size() > kMaxXattrValue) return fail(E2BIG);
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  const bool exists = node->xattrs.contains(name);
  if ((flags & XATTR_CREATE) && exists) return fail(EEXIST);
  if ((flags & XATTR_REPLACE) && !exists) return fail(ENODATA);
  node->xattrs[name] = std::string(value);
  node->ctime = clock_.now();
  return {};
}

Result<std::string> Volume::serve(const ops::Getxattr& request, Work&) {
  const auto& [inode, name] = request;
  if (!known_namespace(name)) return fail(EOPNOTSUPP);
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  auto it = node->xattrs.find(name);
  if (it == node->xattrs.end()) return fail(ENODATA);
  return it->second;
}

Result<std::vector<std::string>> Volume::serve(const ops::Listxattr& request, Work&) {
  const uint64_t inode = request.inode;
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  // trusted.* names are listed to CAP_SYS_ADMIN alone (the trusted handler's
  // list(), xfs_xattr_put_listent, simple_xattr_list), but by btrfs to
  // anyone (btrfs_listxattr lists every name it finds).
  const Credentials* caller = CallerScope::credentials();
  const bool hide_trusted = !profile_.trusted_xattrs_listed_to_all && caller != nullptr &&
                            !caller->has_sys_admin();
  std::lock_guard lock(node->mutex);
  std::vector<std::string> names;
  for (const auto& [name, value] : node->xattrs) {
    if (!(hide_trusted && name.starts_with("trusted."))) names.push_back(name);
  }
  return names;
}

Result<void> Volume::serve(const ops::Removexattr& request, Work&) {
  const auto& [inode, name] = request;
  if (!known_namespace(name)) return fail(EOPNOTSUPP);
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  if (node->xattrs.erase(name) == 0) return fail(ENODATA);
  node->ctime = clock_.now();
  return {};
}

}  // namespace mimicfs
