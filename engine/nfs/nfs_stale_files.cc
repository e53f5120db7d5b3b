// SPDX-License-Identifier: Apache-2.0
// NfsClientLayer: the files another client removed. One open here goes
// stale (ESTALE, as a file handle the server no longer knows); one the kernel
// only knows by name is gone (ENOENT at its next lookup).
#include "engine/nfs/nfs_client_layer.h"

namespace mimicfs {

// The server removed a file or directory: its handle is stale here from now
// on (nfs_revalidate_inode's ESTALE marks the inode, NFS_INO_STALE). An open
// file keeps its own record (a write to it is lost, not refused); any other
// that this client's kernel has is kept until it forgets it, or a lookup
// finds it again (a power cut that undid the removal). Inode numbers are not
// reused.
void NfsClientLayer::removed_elsewhere(uint64_t inode) {
  std::lock_guard lock(mutex_);
  if (auto it = open_.find(inode); it != open_.end() && it->second.handles > 0) {
    if (it->second.stale) return;
    it->second.stale = true;
    stale_files_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (known_.contains(inode)) mark_gone(inode);
}

void NfsClientLayer::mark_gone(uint64_t inode) {
  gone_.insert(inode);
  gone_files_.store(gone_.size(), std::memory_order_relaxed);
}

void NfsClientLayer::looked_up(uint64_t inode) {
  std::lock_guard lock(mutex_);
  if (known_.size() >= kMaxKnown && !known_.contains(inode)) return;  // bounded: no ESTALE for it
  ++known_[inode];
  // The server has it under a name: not removed after all (a power cut undid it).
  if (gone_.erase(inode) > 0) gone_files_.store(gone_.size(), std::memory_order_relaxed);
}

bool NfsClientLayer::gone(uint64_t inode) {
  std::lock_guard lock(mutex_);
  if (!gone_.contains(inode)) return false;
  ++stale_requests_;
  return true;
}

// The kernel's lookups of it are over (FUSE's nlookup): it holds nothing of
// the inode any more.
Result<void> NfsClientLayer::serve(const ops::Forget& request, Work& work) {
  const auto& [inode, references] = request;
  {
    std::lock_guard lock(mutex_);
    if (auto it = known_.find(inode); it != known_.end()) {
      if (it->second > references) {
        it->second -= references;
      } else {
        known_.erase(it);
        attributes_.erase(inode);
        if (gone_.erase(inode) > 0) gone_files_.store(gone_.size(), std::memory_order_relaxed);
      }
    }
  }
  return pass(request, work);
}

bool NfsClientLayer::stale(uint64_t inode) {
  std::lock_guard lock(mutex_);
  auto it = open_.find(inode);
  if (it == open_.end() || !it->second.stale) return false;
  ++stale_requests_;
  return true;
}

}  // namespace mimicfs
