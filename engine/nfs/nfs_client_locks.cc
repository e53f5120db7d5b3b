// SPDX-License-Identifier: Apache-2.0
// NfsClientLayer's locks: fcntl, OFD and flock locks taken at the server
// (or kept here with client.local_lock), and those a server restart loses
// (nfs4_reclaim_locks, nfs4_lock_expired).
#include "engine/nfs/nfs_client_layer.h"

#include "engine/nfs/nfs_clients.h"

#include <algorithm>
#include <utility>

namespace mimicfs {

Result<std::optional<RecordLock>> NfsClientLayer::test_lock(uint64_t inode, RecordLock request,
                                                             Work& work) {
  if (stale_files_.load(std::memory_order_relaxed) > 0 && stale(inode)) {
    return fail(ESTALE);
  }
  if (!local_posix_) {
    // LOCKT: answered by the server, refused in its grace period (nfsd4_lockt).
    peers_.contact(*this);
    if (auto reached = peers_.reach_server(work, true); !reached) {
      return std::unexpected(reached.error());
    }
    peers_.settle();
  }
  request.owner.client = this;
  auto conflict = table(LockKind::kPosix).conflict(inode, request);
  if (conflict && conflict->owner.client != this) conflict->pid = 0;
  return conflict;
}

RecordLocks& NfsClientLayer::table(LockKind kind) {
  if (kind == LockKind::kFlock) return local_flock_ ? local_flock_locks_ : peers_.locks();
  return local_posix_ ? local_posix_locks_ : peers_.locks();
}

Result<void> NfsClientLayer::set_lock(uint64_t inode, RecordLock request, LockKind kind,
                                      LockWait* wait, Work& work) {
  if (stale_files_.load(std::memory_order_relaxed) > 0 && stale(inode)) {
    return fail(ESTALE);
  }
  // LOCK and LOCKU go to the server, unless client.local_lock keeps the kind.
  // A new LOCK waits out a restart's grace period (NFS4ERR_GRACE); a LOCKU
  // does not (nfsd4_locku).
  if (&table(kind) == &peers_.locks()) {
    peers_.contact(*this);
    const bool unlock = request.type == LockType::kUnlock;
    if (auto reached = peers_.reach_server(work, !unlock); !reached) return reached;
    peers_.settle();
    // A crashed client's lease or the grace may end while it waits.
    if (wait != nullptr) wait->poll = [this] { peers_.settle(); };
  }
  request.owner.client = this;
  if (request.type == LockType::kUnlock) unlock_lost(inode, request);
  // A crash while it waits ends the wait: the lock would be the old boot's,
  // which no close gives back (lock_requests.h).
  const uint64_t boot = crashes();
  if (wait != nullptr) {
    wait->ending = [this, boot, ending = std::move(wait->ending)] {
      return crashes() != boot || (ending && ending());
    };
  }
  auto result = table(kind).set(inode, request, wait);
  if (crashes() != boot) {
    if (result && request.type != LockType::kUnlock) {
      RecordLock undo = request;
      undo.type = LockType::kUnlock;
      (void)table(kind).set(inode, undo, nullptr);
    }
    return fail(EIO);
  }
  const bool refused = !result && result.error() == Errno{EAGAIN};
  if (wait != nullptr ? wait->waited : refused) {
    std::lock_guard lock(mutex_);
    ++lock_conflicts_;
  }
  if (result && request.type != LockType::kUnlock) revalidate(inode, work);
  return result;
}

int NfsClientLayer::lock_waiters() const { return peers_.locks().waiters(); }

// Whichever table it waits in.
void NfsClientLayer::interrupt_lock_wait(LockWait& wait) {
  for (RecordLocks* locks : {&peers_.locks(), &local_posix_locks_, &local_flock_locks_}) {
    locks->interrupt(wait);
  }
}

void NfsClientLayer::release_locks(uint64_t inode, uint64_t owner) {
  for (RecordLocks* locks : {&peers_.locks(), &local_posix_locks_, &local_flock_locks_}) {
    locks->release_owner(inode, LockOwner{this, owner});
  }
  peers_.pass_recovery();
  if (lost_locks_held_.load(std::memory_order_acquire) > 0) {
    forget_lost(inode, [owner](const RecordLock& lost) { return lost.owner.id == owner; });
  }
}

void NfsClientLayer::release_handle_locks(uint64_t inode, uint64_t handle) {
  for (RecordLocks* locks : {&peers_.locks(), &local_posix_locks_, &local_flock_locks_}) {
    locks->release_handle(inode, this, handle);
  }
  peers_.pass_recovery();
  if (lost_locks_held_.load(std::memory_order_acquire) > 0) {
    forget_lost(inode, [handle](const RecordLock& lost) { return lost.handle == handle; });
  }
}

void NfsClientLayer::locks_lost(const std::vector<std::pair<uint64_t, RecordLock>>& lost) {
  std::lock_guard lock(mutex_);
  for (const auto& [inode, held] : lost) lost_[inode].push_back(held);
  lost_locks_ += lost.size();
  lost_locks_held_.fetch_add(lost.size(), std::memory_order_release);
}

bool NfsClientLayer::lock_lost(uint64_t inode, uint64_t handle) {
  peers_.contact(*this);
  return lost_locks_held_.load(std::memory_order_acquire) > 0 && lost_through(inode, handle);
}

bool NfsClientLayer::lost_through(uint64_t inode, uint64_t handle) {
  std::lock_guard lock(mutex_);
  auto it = lost_.find(inode);
  return it != lost_.end() && std::ranges::any_of(it->second, [handle](const RecordLock& lost) {
           return lost.handle == handle;
         });
}

// What an unlock leaves of the owner's lost locks: the parts outside its
// range (the lock state goes once the owner holds nothing of the file).
void NfsClientLayer::unlock_lost(uint64_t inode, const RecordLock& unlock) {
  if (lost_locks_held_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(mutex_);
  auto it = lost_.find(inode);
  if (it == lost_.end()) return;
  std::vector<RecordLock> kept;
  for (const RecordLock& lost : it->second) {
    if (lost.owner.id != unlock.owner.id || lost.end < unlock.start || lost.start > unlock.end) {
      kept.push_back(lost);
    } else {
      keep_outside(lost, unlock.start, unlock.end, kept);
    }
  }
  const size_t before = it->second.size();
  const size_t after = kept.size();
  if (kept.empty()) {
    lost_.erase(it);
  } else {
    it->second = std::move(kept);
  }
  if (after > before) {
    lost_locks_held_.fetch_add(after - before, std::memory_order_release);
  } else {
    lost_locks_held_.fetch_sub(before - after, std::memory_order_release);
  }
}

void NfsClientLayer::forget_lost(uint64_t inode,
                                 const std::function<bool(const RecordLock&)>& matches) {
  std::lock_guard lock(mutex_);
  auto it = lost_.find(inode);
  if (it == lost_.end()) return;
  const size_t forgotten = std::erase_if(it->second, matches);
  if (it->second.empty()) lost_.erase(it);
  lost_locks_held_.fetch_sub(forgotten, std::memory_order_release);
}

}  // namespace mimicfs
