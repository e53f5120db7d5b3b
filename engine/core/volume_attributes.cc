// SPDX-License-Identifier: Apache-2.0
// Volume's attributes: getattr and setattr, and the set-ID bits the kernel's
// rules clear (kill_suidgid_locked), with what an attribute change of a
// regular file writes back first on a profile whose attributes are synchronous.
#include "engine/core/volume.h"

#include <sys/stat.h>

namespace mimicfs {

Result<Attributes> Volume::serve(const ops::Getattr& request, Work&) {
  const uint64_t inode = request.inode;
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  return node->attributes(profile_);
}

Result<Attributes> Volume::serve(const ops::Setattr& request, Work& work) {
  const auto& [inode, changes] = request;
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  work.file = node->number;
  std::lock_guard lock(node->mutex);
  if (node->is_regular()) before_attribute_change(*node, work);
  auto attributes = do_setattr(*node, changes);
  if (!attributes) return attributes;
  ++work.metadata_updates;
  if (node->is_regular()) after_attribute_change(*node);
  return attributes;
}

void Volume::note_blocks_change(const Inode& node, uint64_t blocks_before, Work& work) {
  if (node.file->space().blocks() != blocks_before) work.changed_attributes.push_back(node.number);
}

void Volume::before_attribute_change(Inode& node, Work& work) {
  // As nfs_setattr and nfs42_proc_deallocate: the client writes back and commits
  // the file before it sends the change.
  if (attributes_synchronous_) node.file->sync(0, RegularFile::kMaxFileSize, work);
}

void Volume::after_attribute_change(Inode& node, uint64_t allocated_end) {
  // The server commits SETATTR, ALLOCATE and DEALLOCATE before it replies.
  if (attributes_synchronous_) node.file->commit_attributes(allocated_end);
  note_uncommitted_locked(node);
}

namespace {

// Whether `caller` owns `node` or may write it, by its mode: who the kernel's
// own privilege removal (file_remove_privs) comes from.
bool owns_or_may_write(const Inode& node, const Credentials& caller) REQUIRES(node.mutex) {
  if (caller.uid() == node.uid) return true;
  const uint32_t bits = caller.in_group(node.gid) ? node.permissions >> 3 : node.permissions;
  return (bits & S_IWOTH) != 0;
}

}  // namespace

bool Volume::kill_suidgid_locked(Inode& node, SetIdClearing why) {
  if (why == SetIdClearing::kNone || node.is_directory()) return false;
  if (why == SetIdClearing::kModification && !node.is_regular()) return false;
  // The kernel flags every write by a caller without CAP_FSETID, whatever the
  // file: most come here with nothing to clear, and ask the caller nothing.
  const auto capability = node.xattrs.find("security.capability");
  const bool has_capability = capability != node.xattrs.end();
  if ((node.permissions & (S_ISUID | S_ISGID)) == 0 && !has_capability) return false;
  const Credentials* caller = CallerScope::credentials();
  bool clear_set_id = true;
  if (why == SetIdClearing::kPrivilegeRemoval && caller != nullptr) {
    // A capable caller's removal takes only security.capability (the kernel
    // kills no bit for it). One from a caller that neither owns nor may write
    // the file is a chown(-1, -1), which ext4 refuses: nothing changes.
    clear_set_id = !caller->has_fsetid();
    if (clear_set_id && !owns_or_may_write(node, *caller)) return false;
  } else if (why == SetIdClearing::kPrivilegeRemoval) {
    clear_set_id = false;
  }
  // security.capability goes with any of them (ATTR_KILL_PRIV:
  // security_inode_killpriv).
  bool changed = false;
  if (has_capability) {
    node.xattrs.erase(capability);
    changed = true;
  }
  if (clear_set_id) {
    uint32_t kept = node.permissions & ~S_ISUID;
    // setattr_should_drop_sgid: with group execute it goes; without, unless
    // the caller is in the file's group or (not for a modification, whose
    // caller lacks it by the kernel's word) holds CAP_FSETID.
    if (kept & S_ISGID) {
      const bool may_keep_sgid =
          !(kept & S_IXGRP) &&
          (caller == nullptr || caller->in_group(node.gid) ||
           (why != SetIdClearing::kModification && caller->has_fsetid()));
      if (!may_keep_sgid) kept &= ~S_ISGID;
    }
    changed |= kept != node.permissions;
    node.permissions = kept;
  }
  if (changed) node.ctime = clock_.now();
  return changed;
}

Result<Attributes> Volume::do_setattr(Inode& node, const AttributeChanges& changes) {
  const timespec now = clock_.now();
  if (changes.size) {
    if (node.is_directory()) return fail(EISDIR);
    if (!node.is_regular()) return fail(EINVAL);
    if (*changes.size > RegularFile::kMaxFileSize) return fail(EFBIG);
    // xfs_setattr_size: truncate(2) (no time asked for) to 0 of an empty file
    // with no blocks returns before anything, set-ID bits included.
    const bool only_size = !changes.mode && !changes.uid && !changes.gid && !changes.atime &&
                           !changes.mtime && !changes.by_descriptor;
    if (profile_.truncate_empty_shortcut && only_size && *changes.size == 0 &&
        node.file->size() == 0 && node.file->space().blocks() == 0) {
      return node.attributes(profile_);
    }
  }
  kill_suidgid_locked(node, changes.kill_suidgid);
  if (changes.size) {
    // A size change touches the mtime, and so does any ftruncate; truncate(2)
    // to the same size only on ext4.
    if (*changes.size != node.file->size() || changes.by_descriptor ||
        profile_.truncate_same_size_updates_times) {
      node.mtime = now;
    }
    node.file->truncate(*changes.size);
  }
  if (changes.mode) node.permissions = *changes.mode & 07777;
  if (changes.uid) node.uid = *changes.uid;
  if (changes.gid) node.gid = *changes.gid;
  auto resolve = [&](timespec t) { return t.tv_nsec == UTIME_NOW ? now : t; };
  if (changes.atime && changes.atime->tv_nsec != UTIME_OMIT) node.atime = resolve(*changes.atime);
  if (changes.mtime && changes.mtime->tv_nsec != UTIME_OMIT) node.mtime = resolve(*changes.mtime);
  node.ctime = now;
  return node.attributes(profile_);
}

}  // namespace mimicfs
