// SPDX-License-Identifier: Apache-2.0
// RecordLocks: the byte-range locks an NFS server holds for its clients
// (docs/nfs.md, "Locks"). POSIX record locks (fcntl F_SETLK, OFD locks) and,
// as the Linux client sends them with local_lock=none, flock() locks as
// whole-file POSIX locks (nfs_flock -> do_setlk). An owner is a client and
// the kernel's lock owner on that client: a process's files for fcntl locks,
// the open file for OFD and flock locks, so locks of two clients conflict
// whatever their owners' numbers.
//
// Semantics follow the kernel's posix_lock_inode: an owner's new lock replaces
// its own in that range (splitting what it covers in part), adjoining locks
// of one kind merge, and only another owner's lock conflicts (read with read
// never does). A blocking request waits until nothing conflicts; nothing
// detects a deadlock, as on NFS (the server's LOCK never waits, the client
// polls it: nfs4_retry_setlk), so two owners that wait on each other wait
// until a signal interrupts one.
//
// Thread-safety: one mutex; a wait holds the thread that serves the request,
// so at most kMaxWaiters wait at once in all the tables that share a
// LockWaiters (ENOLCK past them).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/base/thread_annotations.h"
#include "engine/fs/result.h"

namespace mimicfs {

enum class LockType { kRead, kWrite, kUnlock };

struct LockOwner {
  const void* client = nullptr;  // the NFS client (NfsClientLayer) that sent it
  uint64_t id = 0;               // the client kernel's lock owner
  friend bool operator==(const LockOwner&, const LockOwner&) = default;
};

struct RecordLock {
  // OFFSET_MAX: a lock "to the end of the file" (l_len 0) ends there.
  static constexpr uint64_t kToEnd = INT64_MAX;
  LockType type = LockType::kWrite;
  uint64_t start = 0;
  uint64_t end = kToEnd;  // inclusive
  LockOwner owner;
  uint64_t handle = 0;  // the open file it was set through (released with it)
  uint32_t pid = 0;     // the process that set it, as F_GETLK reports it
};

// One blocking request's wait: interrupted (RecordLocks::interrupt) it ends
// with EINTR; once `ending` is true (its session is going: a lock-free check)
// with ENOLCK. `waited` says afterwards whether the request found a conflict.
struct LockWait {
  std::atomic<bool> interrupted{false};
  std::function<bool()> ending;
  // Called now and then while it waits, without the table's lock: what
  // may end the conflict on its own (an NFS lease or grace period ending).
  std::function<void()> poll;
  bool waited = false;
};

// The requests waiting in any of the lock tables of one daemon: each holds a
// thread, so RecordLocks::kMaxWaiters in all.
struct LockWaiters {
  std::atomic<int> count{0};
};

// Appends to `out` what of `lock` lies outside [start, end]: none, one or
// two pieces (an unlock of the middle splits a lock).
void keep_outside(const RecordLock& lock, uint64_t start, uint64_t end,
                  std::vector<RecordLock>& out);

class RecordLocks {
 public:
  // Requests waiting at once, each holding a thread of the daemon.
  static constexpr int kMaxWaiters = 4;
  // Locks held at once, on every file: past this a new one gets ENOLCK.
  static constexpr size_t kMaxLocks = 1 << 20;

  // Waiters counted in `waiters`, shared with the daemon's other tables.
  explicit RecordLocks(LockWaiters& waiters) : waiters_(waiters) {}
  RecordLocks() : waiters_(own_waiters_) {}
  RecordLocks(const RecordLocks&) = delete;
  RecordLocks& operator=(const RecordLocks&) = delete;

  // The first lock of another owner that `request` (a read or write lock)
  // conflicts with on `inode`: what F_GETLK reports.
  std::optional<RecordLock> conflict(uint64_t inode, const RecordLock& request) const
      EXCLUDES(mutex_);
  // Takes `request`'s range for its owner, or gives it back (kUnlock).
  // EAGAIN when another owner's lock conflicts, unless `wait`: then it waits
  // until none does (EINTR once interrupted, ENOLCK once LockWait::ending,
  // past kMaxWaiters or past kMaxLocks).
  Result<void> set(uint64_t inode, const RecordLock& request, LockWait* wait) EXCLUDES(mutex_);
  // Ends `wait` with EINTR, now or as soon as it starts waiting.
  void interrupt(LockWait& wait) EXCLUDES(mutex_);

  // What a close gives back: every lock `owner` holds on `inode` (a FLUSH:
  // POSIX drops a process's locks at any close of the file), or every lock
  // set through the open file `handle` of `client` (its RELEASE: OFD and
  // flock locks).
  void release_owner(uint64_t inode, const LockOwner& owner) EXCLUDES(mutex_);
  void release_handle(uint64_t inode, const void* client, uint64_t handle) EXCLUDES(mutex_);
  // Every lock of `client` (its mount has gone).
  void release_client(const void* client) EXCLUDES(mutex_);
  // Takes every lock of `client` out of the table: the locks it failed to
  // reclaim after a server restart. With their files' inodes.
  std::vector<std::pair<uint64_t, RecordLock>> take_client(const void* client) EXCLUDES(mutex_);
  // The server restarted without reclaim: nothing is held.
  void clear() EXCLUDES(mutex_);

  size_t count() const EXCLUDES(mutex_);
  // Requests waiting now, in every table sharing this one's LockWaiters.
  int waiters() const { return waiters_.count.load(); }

 private:
  bool conflicts(uint64_t inode, const RecordLock& request) const REQUIRES(mutex_);
  // Applies `request` to its owner's locks of `inode`; false past kMaxLocks.
  bool apply(uint64_t inode, const RecordLock& request) REQUIRES(mutex_);
  void erase_if(uint64_t inode, const std::function<bool(const RecordLock&)>& matches)
      REQUIRES(mutex_);

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::unordered_map<uint64_t, std::vector<RecordLock>> locks_ GUARDED_BY(mutex_);
  size_t count_ GUARDED_BY(mutex_) = 0;
  LockWaiters own_waiters_;
  LockWaiters& waiters_;
};

}  // namespace mimicfs
