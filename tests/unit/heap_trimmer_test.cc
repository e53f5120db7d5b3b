// SPDX-License-Identifier: Apache-2.0
// TrimSchedule (fusefs/heap_trimmer.h): when the heap trimmer may walk
// malloc's arenas. The trimmer itself runs a thread and calls glibc; its
// schedule is told the clocks, so it is tested with made-up readings.
#include "fusefs/heap_trimmer.h"

#include <gtest/gtest.h>

namespace mimicfs {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

// Drives a schedule one tick (a second of wall time) at a time, the process
// using `cpu_share` of a CPU in each; checks take no time.
struct Ticks {
  TrimSchedule schedule{0, 0};
  uint64_t cpu = 0;
  uint64_t wall = 0;

  bool tick(double cpu_share) {
    cpu += static_cast<uint64_t>(cpu_share * kSecond);
    wall += kSecond;
    if (!schedule.due(cpu, wall)) return false;
    schedule.checked(cpu, wall);
    return true;
  }
};

TEST(TrimSchedule, ChecksEveryTickWhileTheDaemonIsQuiet) {
  Ticks ticks;
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(ticks.tick(0.02)) << i;
  EXPECT_TRUE(ticks.tick(0.1));  // at the line
}

TEST(TrimSchedule, UnderALoadThatNeverEndsChecksEveryTenthTick) {
  Ticks ticks;
  for (int round = 0; round < 3; ++round) {
    for (unsigned i = 0; i < TrimSchedule::kMaxSkips; ++i) EXPECT_FALSE(ticks.tick(0.5)) << i;
    EXPECT_TRUE(ticks.tick(0.5)) << round;
  }
}

TEST(TrimSchedule, ChecksAtTheFirstQuietTickAfterALoad) {
  Ticks ticks;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(ticks.tick(1.5)) << i;
  EXPECT_TRUE(ticks.tick(0.01));
  // And the count of skips starts again: the next load is skipped 9 times too.
  for (unsigned i = 0; i < TrimSchedule::kMaxSkips; ++i) EXPECT_FALSE(ticks.tick(1.0)) << i;
  EXPECT_TRUE(ticks.tick(1.0));
}

TEST(TrimSchedule, MeasuresOnlySinceTheLastTick) {
  Ticks ticks;
  EXPECT_FALSE(ticks.tick(0.9));
  // The busy second before does not count against this quiet one.
  EXPECT_TRUE(ticks.tick(0.05));
}

TEST(TrimSchedule, TheShareIsOfTheWallTimeThatPassed) {
  TrimSchedule schedule(0, 0);
  // 0.15 s of CPU over 2 s is 7.5% of a CPU: quiet, though over a tenth of a second.
  EXPECT_TRUE(schedule.due(kSecond * 15 / 100, 2 * kSecond));
}

TEST(TrimSchedule, TheChecksOwnTimeIsNotLoad) {
  TrimSchedule schedule(0, 0);
  ASSERT_TRUE(schedule.due(kSecond / 100, kSecond));
  // The check itself took 0.3 s of CPU in 0.3 s; measuring starts after it.
  schedule.checked(kSecond * 31 / 100, kSecond * 13 / 10);
  EXPECT_TRUE(schedule.due(kSecond * 31 / 100 + kSecond / 20, kSecond * 23 / 10));
}

TEST(TrimSchedule, AnIdleDaemonIsLeftAlone) {
  Ticks ticks;
  EXPECT_TRUE(ticks.tick(0.02));
  // Nothing served: nothing can have been freed or faulted in since.
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(ticks.tick(0.0)) << i;
  // A little work: checked once its CPU time since the last check reaches kWorkCpuNs.
  const double half = 0.5 * TrimSchedule::kWorkCpuNs / kSecond;
  EXPECT_FALSE(ticks.tick(half));
  EXPECT_TRUE(ticks.tick(half * 1.01));
  EXPECT_FALSE(ticks.tick(0.0));
}

TEST(TrimSchedule, TheChecksOwnTimeIsNotWork) {
  TrimSchedule schedule(0, 0);
  ASSERT_TRUE(schedule.due(kSecond / 100, kSecond));
  schedule.checked(kSecond / 10, kSecond * 11 / 10);  // 90 ms of it the check's
  EXPECT_FALSE(schedule.due(kSecond / 10, kSecond * 21 / 10));
}

}  // namespace
}  // namespace mimicfs
