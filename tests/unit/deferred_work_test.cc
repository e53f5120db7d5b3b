// SPDX-License-Identifier: Apache-2.0
#include "engine/time/deferred_work.h"

#include <gtest/gtest.h>

#include "engine/time/cost_model.h"

#include <vector>

#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using namespace volume_fixture;

TEST(DeferredWork, ATaskRunsItsEffectOnceWhenCompleted) {
  DeferredWork deferred;
  std::vector<int> ran;
  const DeferredTask a =
      deferred.defer({0, DeferredTask::Kind::kReclaim, 16, 3, 4096}, [&] { ran.push_back(1); });
  const DeferredTask b =
      deferred.defer({0, DeferredTask::Kind::kReclaim, 17, 1, 512}, [&] { ran.push_back(2); });
  EXPECT_NE(a.id, b.id);
  EXPECT_EQ(a.file, 16u);
  EXPECT_EQ(deferred.stats().pending_tasks, 2u);
  EXPECT_EQ(deferred.stats().pending_free_bytes, 4608u);
  EXPECT_TRUE(deferred.complete(b.id));
  EXPECT_FALSE(deferred.complete(b.id));  // once
  EXPECT_EQ(ran, (std::vector<int>{2}));
  EXPECT_EQ(deferred.complete_all(), 1u);
  EXPECT_EQ(ran, (std::vector<int>{2, 1}));
  EXPECT_EQ(deferred.stats().pending_tasks, 0u);
  EXPECT_EQ(deferred.stats().completed_tasks, 2u);
}

// An effect may queue another task (a completion that frees what frees more).
TEST(DeferredWork, CompleteAllRunsTasksQueuedByEffects) {
  DeferredWork deferred;
  int ran = 0;
  deferred.defer({}, [&] {
    ++ran;
    deferred.defer({}, [&] { ++ran; });
  });
  EXPECT_EQ(deferred.complete_all(), 2u);
  EXPECT_EQ(ran, 2);
}

// xfs with background reclaim: the unlink of a file with 256 extents returns
// at the cost of an unlink; its blocks stay allocated, shown as deferred, until
// the emulated clock has gone past the background worker's time for them.
struct Reclaim {
  Reclaim() : fs(with("xfs", {"allocation.background_reclaim=true"})) {}
  // A synced file of `extents` extents (every other 4 KiB punched).
  uint64_t fragmented(const std::string& name, uint64_t extents) {
    const uint64_t f = fs.create_open(name);
    EXPECT_TRUE(fs.write(f, 0, pattern(2 * extents * 4096, 'r')).has_value());
    for (uint64_t i = 0; i < extents; ++i) {
      EXPECT_TRUE(fs.punch(f, (2 * i + 1) * 4096, 4096).has_value());
    }
    fs.fsync(f);
    fs.flush(f);
    fs.volume.release(f);
    return f;
  }
  // Operations that take a little emulated time each: buffered writes to another file.
  void pass_time(uint64_t ns) {
    const uint64_t until = fs.engine.cost().emulated_ns() + ns;
    if (busy == 0) busy = fs.create_open("busy");
    while (fs.engine.cost().emulated_ns() < until) {
      ASSERT_TRUE(fs.volume.write(busy, 0, as_bytes("x")).has_value());
    }
  }
  Fs fs;
  uint64_t busy = 0;
};

TEST(DeferredWork, BackgroundReclaimFreesTheSpaceWhenTheClockGetsThere) {
  Reclaim r;
  const Profile& p = r.fs.volume.profile();
  const uint64_t f = r.fragmented("t.ibd", 256);
  const uint64_t used = r.fs.used_bytes();
  const uint64_t file_bytes = r.fs.stats(f).allocated_bytes;
  ASSERT_EQ(r.fs.stats(f).extents, 256u);

  Work unlink;
  ASSERT_TRUE(r.fs.volume.unlink(kRoot, "t.ibd", unlink).has_value());
  r.fs.volume.forget(f, 1);
  EXPECT_EQ(unlink.emulated_ns, p.round_trip_ns + p.unlink_ns);  // not the extents
  ASSERT_EQ(unlink.deferred.size(), 1u);
  EXPECT_EQ(unlink.deferred[0].extents, 256u);
  EXPECT_EQ(r.fs.used_bytes(), used);  // not yet
  StatsSnapshot s = r.fs.volume.snapshot();
  EXPECT_EQ(s.deferred.pending_tasks, 1u);
  EXPECT_EQ(s.deferred.pending_free_bytes, file_bytes);
  // The task's time: its extent records and its MiB of blocks.
  const uint64_t reclaim_ns = CostModel(p).freeing(256, file_bytes).total();
  EXPECT_EQ(s.deferred.last_due_ns, s.clock.emulated_ns + reclaim_ns);

  r.pass_time(reclaim_ns / 2);
  EXPECT_EQ(r.fs.volume.snapshot().deferred.pending_tasks, 1u);
  r.pass_time(reclaim_ns);
  s = r.fs.volume.snapshot();
  EXPECT_EQ(s.deferred.pending_tasks, 0u);
  EXPECT_EQ(s.deferred.completed_tasks, 1u);
  EXPECT_LE(r.fs.used_bytes(), used - file_bytes + r.fs.stats(r.busy).allocated_bytes);
}

// One worker: a second unlink's task starts when the first one's ends (the
// first takes longer than the second unlink).
TEST(DeferredWork, BackgroundTasksRunOneAfterAnother) {
  Reclaim r;
  const CostModel costs(r.fs.volume.profile());
  const uint64_t a = r.fragmented("a", 1000);
  const uint64_t b = r.fragmented("b", 50);
  const uint64_t a_ns = costs.freeing(1000, r.fs.stats(a).allocated_bytes).total();
  const uint64_t b_ns = costs.freeing(50, r.fs.stats(b).allocated_bytes).total();
  Work first, second;
  ASSERT_TRUE(r.fs.volume.unlink(kRoot, "a", first).has_value());
  const uint64_t after_first = r.fs.engine.cost().emulated_ns();
  ASSERT_TRUE(r.fs.volume.unlink(kRoot, "b", second).has_value());
  ASSERT_EQ(first.deferred.size(), 1u);
  ASSERT_EQ(second.deferred.size(), 1u);
  EXPECT_EQ(first.deferred[0].extents, 1000u);
  EXPECT_EQ(second.deferred[0].extents, 50u);
  r.fs.volume.forget(a, 1);
  r.fs.volume.forget(b, 1);
  EXPECT_EQ(r.fs.volume.snapshot().deferred.last_due_ns, after_first + a_ns + b_ns);
}

// A full device: what a deleted file's task will free counts as free in statfs,
// and a write that needs it waits for the worker instead of failing (xfs
// flushes its inactivation queue on ENOSPC), charged the wait.
TEST(DeferredWork, AnAllocationThatFindsNoSpaceWaitsForTheReclaim) {
  for (const bool reclaim : {true, false}) {
    SCOPED_TRACE(reclaim);
    Fs fs(with("xfs", {reclaim ? "allocation.background_reclaim=true"
                               : "allocation.background_reclaim=false",
                       "device.capacity_bytes=1048576", "device.geometry=groups",
                       "device.allocation_group_bytes=0",
                       "device.group_metadata_bytes=0",
                       "allocation.speculative_preallocation=false"}));
    const uint64_t empty = fs.statfs_free();
    const uint64_t f = fs.create_open("big");
    ASSERT_TRUE(fs.write(f, 0, pattern(768 * kKiB, 'b')).has_value());
    fs.fsync(f);
    fs.flush(f);
    fs.volume.release(f);
    fs.remove("big", f);
    EXPECT_EQ(fs.statfs_free(), empty);
    EXPECT_EQ(fs.volume.snapshot().deferred.pending_tasks, reclaim ? 1u : 0u);
    const uint64_t g = fs.create_open("next");
    const uint64_t due = fs.volume.snapshot().deferred.last_due_ns;
    Work write;
    ASSERT_TRUE(fs.volume.write(g, 0, as_bytes(pattern(768 * kKiB, 'n')), 0, write).has_value());
    EXPECT_EQ(write.waited_for_deferred, reclaim);
    EXPECT_EQ(fs.volume.snapshot().deferred.pending_tasks, 0u);
    // The write waited until the worker was done: the clock is past the task's end.
    if (reclaim) {
      EXPECT_GE(fs.volume.snapshot().clock.emulated_ns, due);
    }
    // Without free space either way, a write fails as before.
    const uint64_t h = fs.create_open("more");
    EXPECT_EQ(fs.volume.write(h, 0, as_bytes(pattern(512 * kKiB, 'm')), 0).error().value,
              ENOSPC);
  }
}

TEST(DeferredWork, SettleAndCrashCompleteEveryTask) {
  for (const bool crash : {false, true}) {
    Reclaim r;
    const uint64_t before = r.fs.used_bytes();
    const uint64_t f = r.fragmented("t", 64);
    ASSERT_TRUE(r.fs.volume.unlink(kRoot, "t").has_value());
    // The unlink is durable (a crash does not put the file back), with no
    // emulated time passing: the task stays pending.
    r.fs.volume.sync_all();
    r.fs.volume.forget(f, 1);
    EXPECT_GT(r.fs.used_bytes(), before);
    if (crash) {
      r.fs.volume.crash();
    } else {
      EXPECT_EQ(r.fs.volume.complete_all_deferred(), 1u);
    }
    EXPECT_EQ(r.fs.used_bytes(), before) << crash;
    EXPECT_EQ(r.fs.volume.snapshot().deferred.pending_tasks, 0u);
    EXPECT_EQ(r.fs.volume.snapshot().deferred.last_due_ns, 0u);
  }
}

// Unlinked while open: the task is queued at the last close, not at the unlink.
TEST(DeferredWork, AFileUnlinkedWhileOpenIsReclaimedAfterItsLastClose) {
  Reclaim r;
  const uint64_t f = r.fs.create_open("open");
  ASSERT_TRUE(r.fs.write(f, 0, pattern(64 * kKiB, 'o')).has_value());
  Work unlink;
  ASSERT_TRUE(r.fs.volume.unlink(kRoot, "open", unlink).has_value());
  EXPECT_TRUE(unlink.deferred.empty());
  EXPECT_EQ(r.fs.read(f, 0, 4), pattern(4, 'o'));
  Work release;
  r.fs.volume.release(f, release);
  EXPECT_EQ(release.deferred.size(), 1u);
  r.fs.volume.forget(f, 1);
  r.fs.volume.complete_all_deferred();
  EXPECT_EQ(r.fs.used_bytes(), 0u);
}

// The page cache of a reclaimed file goes with its inode at once (as Linux's
// eviction), only its blocks wait: its dirty pages no longer count toward the
// host's dirty limit.
TEST(DeferredWork, AReclaimedFilesDirtyPagesGoAtOnce) {
  Fs fs(
      with("xfs", {"allocation.background_reclaim=true", "page_cache.dirty_limit_bytes=1048576"}));
  const uint64_t x = fs.create_open("x");
  ASSERT_TRUE(fs.write(x, 0, pattern(768 * kKiB, 'x')).has_value());
  for (uint64_t i = 0; i < 16; ++i) ASSERT_TRUE(fs.punch(x, i * 32 * kKiB, 4096).has_value());
  fs.volume.release(x);
  ASSERT_TRUE(fs.volume.unlink(kRoot, "x").has_value());
  fs.volume.forget(x, 1);
  ASSERT_EQ(fs.volume.snapshot().deferred.pending_tasks, 1u);
  const uint64_t y = fs.create_open("y");
  ASSERT_TRUE(fs.write(y, 0, pattern(512 * kKiB, 'y')).has_value());
  EXPECT_EQ(fs.stats(y).dirty_bytes, 512 * kKiB);  // under the limit: not written back
}

}  // namespace
}  // namespace mimicfs
