// SPDX-License-Identifier: Apache-2.0
// RecordLocks: the server's byte-range locks, as posix_lock_inode keeps them.
#include "engine/nfs/record_locks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace mimicfs {
namespace {

const int kClientA = 0;
const int kClientB = 1;

RecordLock request(LockType type, uint64_t start, uint64_t end, const void* client, uint64_t owner,
                   uint64_t handle = 1) {
  RecordLock lock;
  lock.type = type;
  lock.start = start;
  lock.end = end;
  lock.owner = LockOwner{client, owner};
  lock.handle = handle;
  lock.pid = static_cast<uint32_t>(owner);
  return lock;
}

bool granted(RecordLocks& locks, const RecordLock& lock) {
  return locks.set(7, lock, nullptr).has_value();
}

// Until `count` requests wait in `locks`' tables (at most 10 s).
void await_waiters(const RecordLocks& locks, int count) {
  for (int i = 0; i < 10'000 && locks.waiters() < count; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(locks.waiters(), count);
}

TEST(RecordLocks, OnlyAnotherOwnersOverlappingWriteConflicts) {
  RecordLocks locks;
  ASSERT_TRUE(granted(locks, request(LockType::kRead, 0, 99, &kClientA, 1)));
  EXPECT_TRUE(granted(locks, request(LockType::kRead, 50, 60, &kClientB, 1)))
      << "read with read, and owner 1 of another client is another owner";
  const auto refused = locks.set(7, request(LockType::kWrite, 99, 99, &kClientB, 2), nullptr);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), Errno{EAGAIN});
  EXPECT_TRUE(granted(locks, request(LockType::kWrite, 100, RecordLock::kToEnd, &kClientB, 2)));
  EXPECT_TRUE(locks.set(8, request(LockType::kWrite, 0, 0, &kClientB, 2), nullptr).has_value())
      << "another file";
  // An owner upgrades its own read lock unless another owner reads there.
  EXPECT_TRUE(granted(locks, request(LockType::kWrite, 0, 40, &kClientA, 1)));
  EXPECT_FALSE(granted(locks, request(LockType::kWrite, 41, 55, &kClientA, 1)));

  const auto seen = locks.conflict(7, request(LockType::kRead, 30, 30, &kClientB, 9));
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->type, LockType::kWrite);
  EXPECT_EQ(seen->start, 0u);
  EXPECT_EQ(seen->end, 40u);
  EXPECT_EQ(seen->pid, 1u);
  EXPECT_FALSE(locks.conflict(7, request(LockType::kRead, 45, 45, &kClientB, 9)).has_value());
}

TEST(RecordLocks, AnOwnersLocksSplitAndMerge) {
  RecordLocks locks;
  ASSERT_TRUE(granted(locks, request(LockType::kWrite, 0, 99, &kClientA, 1)));
  ASSERT_TRUE(granted(locks, request(LockType::kUnlock, 40, 59, &kClientA, 1)));
  EXPECT_EQ(locks.count(), 2u);
  EXPECT_TRUE(granted(locks, request(LockType::kWrite, 40, 59, &kClientB, 2)));
  ASSERT_TRUE(granted(locks, request(LockType::kUnlock, 40, 59, &kClientB, 2)));
  // The gap filled again: one lock.
  ASSERT_TRUE(granted(locks, request(LockType::kWrite, 40, 59, &kClientA, 1)));
  EXPECT_EQ(locks.count(), 1u);
  // A read lock in the middle turns that part into a read lock (a downgrade).
  ASSERT_TRUE(granted(locks, request(LockType::kRead, 10, 19, &kClientA, 1)));
  EXPECT_EQ(locks.count(), 3u);
  EXPECT_TRUE(granted(locks, request(LockType::kRead, 15, 15, &kClientB, 2)));
  EXPECT_FALSE(granted(locks, request(LockType::kRead, 20, 20, &kClientB, 2)));
}

TEST(RecordLocks, ClosesGiveBackWhatTheyOwn) {
  RecordLocks locks;
  ASSERT_TRUE(granted(locks, request(LockType::kWrite, 0, 9, &kClientA, 1, /*handle=*/10)));
  ASSERT_TRUE(granted(locks, request(LockType::kWrite, 20, 29, &kClientA, 2, /*handle=*/20)));
  ASSERT_TRUE(granted(locks, request(LockType::kWrite, 40, 49, &kClientB, 1, /*handle=*/10)));
  locks.release_owner(7, LockOwner{&kClientA, 1});
  EXPECT_TRUE(granted(locks, request(LockType::kWrite, 0, 9, &kClientB, 3)));
  EXPECT_FALSE(granted(locks, request(LockType::kWrite, 20, 20, &kClientB, 3)));
  locks.release_handle(7, &kClientA, 20);
  EXPECT_TRUE(granted(locks, request(LockType::kWrite, 20, 20, &kClientB, 3)));
  locks.release_handle(7, &kClientA, 10);
  EXPECT_FALSE(granted(locks, request(LockType::kWrite, 40, 40, &kClientA, 3)))
      << "the same handle number on another client is another file";
  locks.release_client(&kClientB);
  EXPECT_EQ(locks.count(), 0u);
}

TEST(RecordLocks, AWaitEndsWhenTheLockGoesOrWhenInterrupted) {
  RecordLocks locks;
  ASSERT_TRUE(granted(locks, request(LockType::kWrite, 0, 0, &kClientA, 1)));
  LockWait wait;
  std::atomic<bool> done{false};
  Result<void> result;
  std::thread waiter([&] {
    result = locks.set(7, request(LockType::kWrite, 0, 0, &kClientB, 2), &wait);
    done = true;
  });
  await_waiters(locks, 1);
  EXPECT_FALSE(done.load());
  ASSERT_TRUE(granted(locks, request(LockType::kUnlock, 0, 0, &kClientA, 1)));
  waiter.join();
  EXPECT_TRUE(result.has_value());
  EXPECT_TRUE(wait.waited);

  LockWait interrupted;
  std::thread second([&] {
    result = locks.set(7, request(LockType::kRead, 0, 0, &kClientA, 1), &interrupted);
  });
  await_waiters(locks, 1);
  locks.interrupt(interrupted);
  second.join();
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error(), Errno{EINTR});
  // An interruption before the wait began ends it as it starts.
  LockWait early;
  locks.interrupt(early);
  result = locks.set(7, request(LockType::kRead, 0, 0, &kClientA, 1), &early);
  EXPECT_EQ(result.error(), Errno{EINTR});
}

TEST(RecordLocks, WaitersAreBoundedAndEndWithTheirSession) {
  LockWaiters shared;
  RecordLocks locks(shared);
  RecordLocks other(shared);
  std::atomic<bool> ending{false};
  ASSERT_TRUE(granted(locks, request(LockType::kWrite, 0, 0, &kClientA, 1)));
  std::vector<LockWait> waits(RecordLocks::kMaxWaiters);
  std::vector<Result<void>> results(RecordLocks::kMaxWaiters);
  std::vector<std::thread> waiters;
  for (int i = 0; i < RecordLocks::kMaxWaiters; ++i) {
    waits[i].ending = [&ending] { return ending.load(); };
    waiters.emplace_back([&, i] {
      results[i] = locks.set(7, request(LockType::kWrite, 0, 0, &kClientB, 10 + i), &waits[i]);
    });
  }
  await_waiters(locks, RecordLocks::kMaxWaiters);
  // A wait in another table of the same daemon would hold one thread more.
  ASSERT_TRUE(other.set(7, request(LockType::kWrite, 0, 0, &kClientA, 1), nullptr));
  LockWait one_more;
  const auto refused = other.set(7, request(LockType::kWrite, 0, 0, &kClientB, 99), &one_more);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), Errno{ENOLCK});
  ending = true;
  for (auto& waiter : waiters) waiter.join();
  for (const auto& result : results) EXPECT_EQ(result.error(), Errno{ENOLCK});
  EXPECT_EQ(other.waiters(), 0);
}

}  // namespace
}  // namespace mimicfs
