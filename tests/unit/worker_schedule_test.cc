// SPDX-License-Identifier: Apache-2.0
#include "engine/time/worker_schedule.h"

#include <gtest/gtest.h>

#include "engine/profile/profile.h"

namespace mimicfs {
namespace {

// A reclaim of `extents` extents costs 100 ns each here.
struct WorkerScheduleTest : ::testing::Test {
  WorkerScheduleTest() { profile.unlink_extent_ns = 100; }
  static DeferredTask task(uint64_t id, uint64_t extents) {
    DeferredTask t;
    t.id = id;
    t.extents = extents;
    return t;
  }
  Profile profile;
  CostModel costs{profile};  // keeps a reference to it
  WorkerSchedule worker;
};

// One worker: a task starts when the one before it ends, or when it is
// queued if the worker was idle by then.
TEST_F(WorkerScheduleTest, TasksRunOneAfterAnother) {
  worker.add({task(1, 10), task(2, 5)}, 1'000, costs);
  EXPECT_EQ(worker.last_due_ns(), 2'500u);
  EXPECT_EQ(worker.wait(1'200), 1'300u);
  EXPECT_EQ(worker.take_due(1'999), std::nullopt);
  EXPECT_EQ(worker.take_due(2'000), 1u);
  EXPECT_EQ(worker.take_due(2'000), std::nullopt);
  worker.add({task(3, 1)}, 2'100, costs);  // behind task 2
  EXPECT_EQ(worker.last_due_ns(), 2'600u);
  worker.add({task(4, 1)}, 9'000, costs);  // the worker was idle
  EXPECT_EQ(worker.last_due_ns(), 9'100u);
  EXPECT_EQ(worker.task_ns(), 1'700u);
  EXPECT_EQ(worker.wait(10'000), 0u);
}

// A statistics reset starts the clock at 0: what is left of each task stays.
TEST_F(WorkerScheduleTest, ARebaseKeepsTheTimeLeft) {
  worker.add({task(1, 10), task(2, 10)}, 5'000, costs);
  worker.rebase(5'500);
  EXPECT_EQ(worker.task_ns(), 0u);
  EXPECT_EQ(worker.wait(0), 1'500u);
  EXPECT_EQ(worker.take_due(500), 1u);
  EXPECT_EQ(worker.take_due(1'499), std::nullopt);
  EXPECT_EQ(worker.take_due(1'500), 2u);
}

// A crash completes what was queued before it, not a task queued meanwhile,
// and with nothing left the worker is free at once.
TEST_F(WorkerScheduleTest, ACrashCompletesWhatWasQueuedBeforeIt) {
  worker.add({task(1, 10)}, 0, costs);
  const auto before = worker.pending();
  worker.add({task(2, 10)}, 0, costs);
  worker.completed(before, 100);
  EXPECT_EQ(worker.pending().size(), 1u);
  EXPECT_EQ(worker.wait(100), 1'900u) << "task 2 still runs";
  EXPECT_EQ(worker.take_due(2'000), 2u);
  WorkerSchedule idle;
  idle.add({task(1, 10)}, 0, costs);
  idle.completed(idle.pending(), 100);
  EXPECT_EQ(idle.wait(100), 0u);
}

// Tasks already due when the clock is reset are due at once on the new clock.
TEST_F(WorkerScheduleTest, ARebaseClampsWhatIsAlreadyDue) {
  worker.add({task(1, 10)}, 0, costs);
  worker.rebase(5'000);
  EXPECT_EQ(worker.wait(0), 0u);
  EXPECT_EQ(worker.take_due(0), 1u);
}

// Two tasks that end at once (one queued by a crash's recovery, say) are told
// apart by their ids.
TEST_F(WorkerScheduleTest, ACrashCompletesTasksByTheirIds) {
  worker.add({task(1, 10)}, 0, costs);
  const auto before = worker.pending();
  worker.complete_all(0);
  worker.add({task(2, 10)}, 0, costs);  // ends at 1000 too
  worker.completed(before, 0);
  EXPECT_EQ(worker.take_due(1'000), 2u);
}

// A volume image keeps the worker's end and the statistic; an image from
// before task_ns reads as 0.
TEST_F(WorkerScheduleTest, ItsImageRoundTrips) {
  worker.add({task(1, 10)}, 200, costs);
  worker.complete_all(200);  // an image is saved settled
  nlohmann::json saved;
  worker.save(saved);
  WorkerSchedule loaded;
  loaded.load(saved);
  EXPECT_EQ(loaded.task_ns(), 1'000u);
  EXPECT_EQ(loaded.wait(0), 200u);
  saved.erase("task_ns");
  loaded.load(saved);
  EXPECT_EQ(loaded.task_ns(), 0u);
  EXPECT_TRUE(loaded.pending().empty());
}

TEST_F(WorkerScheduleTest, SettleFreesTheWorker) {
  worker.add({task(1, 10), task(2, 10)}, 0, costs);
  worker.complete_all(300);
  EXPECT_TRUE(worker.pending().empty());
  EXPECT_EQ(worker.wait(300), 0u);
  worker.add({task(3, 1)}, 300, costs);
  EXPECT_EQ(worker.last_due_ns(), 400u);
}

}  // namespace
}  // namespace mimicfs
