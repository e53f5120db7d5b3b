// SPDX-License-Identifier: Apache-2.0
#include "engine/nfs/record_locks.h"

#include <algorithm>
#include <chrono>

namespace mimicfs {
namespace {

bool overlap(const RecordLock& a, const RecordLock& b) {
  return a.start <= b.end && b.start <= a.end;
}

// posix_locks_conflict: another owner's lock over the same bytes, one of the
// two a write lock.
bool in_conflict(const RecordLock& held, const RecordLock& request) {
  return held.owner != request.owner && overlap(held, request) &&
         (held.type == LockType::kWrite || request.type == LockType::kWrite);
}

// How often a waiter looks at whether its session is ending.
constexpr std::chrono::milliseconds kStopCheck{100};

}  // namespace

std::optional<RecordLock> RecordLocks::conflict(uint64_t inode, const RecordLock& request) const {
  std::lock_guard lock(mutex_);
  auto it = locks_.find(inode);
  if (it == locks_.end()) return std::nullopt;
  for (const RecordLock& held : it->second) {
    if (in_conflict(held, request)) return held;
  }
  return std::nullopt;
}

bool RecordLocks::conflicts(uint64_t inode, const RecordLock& request) const {
  auto it = locks_.find(inode);
  if (it == locks_.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [&request](const RecordLock& held) { return in_conflict(held, request); });
}

Result<void> RecordLocks::set(uint64_t inode, const RecordLock& request, LockWait* wait) {
  std::unique_lock lock(mutex_);
  assert_held(mutex_);
  if (request.type != LockType::kUnlock && conflicts(inode, request)) {
    if (wait == nullptr) return fail(EAGAIN);
    wait->waited = true;
    if (waiters_.count.fetch_add(1) >= kMaxWaiters) {
      waiters_.count.fetch_sub(1);
      return fail(ENOLCK);
    }
    while (conflicts(inode, request)) {
      if (wait->interrupted.load()) {
        waiters_.count.fetch_sub(1);
        return fail(EINTR);
      }
      // Not EINTR, which the kernel would pass on as ERESTARTSYS with no
      // signal to turn it into EINTR.
      if (wait->ending && wait->ending()) {
        waiters_.count.fetch_sub(1);
        return fail(ENOLCK);
      }
      changed_.wait_for(lock, kStopCheck);
      if (wait->poll) {
        lock.unlock();
        wait->poll();
        lock.lock();
      }
    }
    waiters_.count.fetch_sub(1);
  }
  if (!apply(inode, request)) return fail(ENOLCK);
  changed_.notify_all();
  return {};
}

void RecordLocks::interrupt(LockWait& wait) {
  std::lock_guard lock(mutex_);
  wait.interrupted.store(true);
  changed_.notify_all();
}

void keep_outside(const RecordLock& lock, uint64_t start, uint64_t end,
                  std::vector<RecordLock>& out) {
  if (lock.start < start) {
    RecordLock before = lock;
    before.end = start - 1;
    out.push_back(before);
  }
  if (lock.end > end) {
    RecordLock after = lock;
    after.start = end + 1;
    out.push_back(after);
  }
}

bool RecordLocks::apply(uint64_t inode, const RecordLock& request) {
  std::vector<RecordLock>& held = locks_[inode];
  std::vector<RecordLock> next;
  next.reserve(held.size() + 2);
  // The owner's locks keep what lies outside the request's range.
  for (const RecordLock& lock : held) {
    if (lock.owner != request.owner || !overlap(lock, request)) {
      next.push_back(lock);
    } else {
      keep_outside(lock, request.start, request.end, next);
    }
  }
  if (request.type != LockType::kUnlock) {
    // One lock with those of its kind it adjoins (set through the same file,
    // so that its release gives back what it set).
    RecordLock merged = request;
    std::erase_if(next, [&merged](const RecordLock& lock) {
      const bool adjoins = lock.end + 1 == merged.start || merged.end + 1 == lock.start;
      if (lock.owner != merged.owner || lock.type != merged.type ||
          lock.handle != merged.handle || !adjoins) {
        return false;
      }
      merged.start = std::min(merged.start, lock.start);
      merged.end = std::max(merged.end, lock.end);
      return true;
    });
    next.push_back(merged);
  }
  const size_t after = count_ - held.size() + next.size();
  if (after > kMaxLocks && next.size() > held.size()) {
    if (held.empty()) locks_.erase(inode);
    return false;
  }
  count_ = after;
  if (next.empty()) {
    locks_.erase(inode);
  } else {
    held = std::move(next);
  }
  return true;
}

void RecordLocks::erase_if(uint64_t inode,
                           const std::function<bool(const RecordLock&)>& matches) {
  auto it = locks_.find(inode);
  if (it == locks_.end()) return;
  const size_t erased = std::erase_if(it->second, matches);
  if (erased == 0) return;
  count_ -= erased;
  if (it->second.empty()) locks_.erase(it);
  changed_.notify_all();
}

void RecordLocks::release_owner(uint64_t inode, const LockOwner& owner) {
  std::lock_guard lock(mutex_);
  erase_if(inode, [&owner](const RecordLock& held) { return held.owner == owner; });
}

void RecordLocks::release_handle(uint64_t inode, const void* client, uint64_t handle) {
  std::lock_guard lock(mutex_);
  erase_if(inode, [client, handle](const RecordLock& held) {
    return held.owner.client == client && held.handle == handle;
  });
}

void RecordLocks::release_client(const void* client) {
  std::lock_guard lock(mutex_);
  std::vector<uint64_t> inodes;
  for (const auto& [inode, held] : locks_) inodes.push_back(inode);
  for (uint64_t inode : inodes) {
    erase_if(inode, [client](const RecordLock& held) { return held.owner.client == client; });
  }
}

std::vector<std::pair<uint64_t, RecordLock>> RecordLocks::take_client(const void* client) {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<uint64_t, RecordLock>> taken;
  std::vector<uint64_t> inodes;
  for (const auto& [inode, held] : locks_) {
    for (const RecordLock& one : held) {
      if (one.owner.client == client) taken.emplace_back(inode, one);
    }
    inodes.push_back(inode);
  }
  for (uint64_t inode : inodes) {
    erase_if(inode, [client](const RecordLock& held) { return held.owner.client == client; });
  }
  return taken;
}

void RecordLocks::clear() {
  std::lock_guard lock(mutex_);
  locks_.clear();
  count_ = 0;
  changed_.notify_all();
}

size_t RecordLocks::count() const {
  std::lock_guard lock(mutex_);
  return count_;
}

}  // namespace mimicfs
