// SPDX-License-Identifier: Apache-2.0
#include "engine/time/kernel_threads.h"

#include <gtest/gtest.h>

#include <limits>

namespace mimicfs {
namespace {

constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();

// The flusher every 5 units, the commit every 30: each wakes at its own
// multiples, and a clock that passed several wakes runs them once, at the
// latest.
TEST(KernelThreads, WakeAtTheirIntervalsOnceHoweverFarTheClockMoved) {
  KernelThreads threads(5, 30);
  EXPECT_EQ(threads.next_wake_on_clock(), 5u);
  EXPECT_EQ(threads.wake(4), std::nullopt);
  auto wake = threads.wake(17);
  ASSERT_TRUE(wake);
  EXPECT_EQ(wake->at_ns, 15u);
  EXPECT_TRUE(wake->flush);
  EXPECT_FALSE(wake->commit);
  EXPECT_EQ(threads.next_wake_on_clock(), 20u);
  wake = threads.wake(31);
  ASSERT_TRUE(wake);
  EXPECT_EQ(wake->at_ns, 30u);
  EXPECT_TRUE(wake->flush && wake->commit);
  BackgroundReport report;
  report.files_written_back = 2;
  report.committed = true;
  threads.ran(*wake, report);
  const BackgroundStats stats = threads.stats();
  EXPECT_EQ(stats.flusher_runs, 1u);
  EXPECT_EQ(stats.commits, 1u);
  EXPECT_EQ(stats.files_written_back, 2u);
  EXPECT_EQ(stats.next_flush_ns, 35u);
  EXPECT_EQ(stats.next_commit_ns, 60u);
}

// A statistics reset sets the clock back to 0; the threads keep their
// schedule on uptime, so their next wakes come as soon after it as before.
TEST(KernelThreads, AResetOfTheClockKeepsTheirScheduleOnUptime) {
  KernelThreads threads(5, 0);
  ASSERT_TRUE(threads.wake(12));  // next at 15
  threads.clock_reset(12);
  EXPECT_EQ(threads.uptime_ns(1), 13u);
  EXPECT_EQ(threads.next_wake_on_clock(), 3u);
  EXPECT_EQ(threads.stats().flusher_runs, 0u);
  EXPECT_EQ(threads.wake(2), std::nullopt);
  auto wake = threads.wake(3);
  ASSERT_TRUE(wake);
  EXPECT_EQ(wake->at_ns, 15u) << "on uptime";
  EXPECT_FALSE(wake->commit) << "no periodic commit";
}

// A loaded volume: uptime is its clock again, the threads wake on from it.
TEST(KernelThreads, ARestartWakesOnFromTheLoadedClock) {
  KernelThreads threads(5, 30);
  threads.clock_reset(1'000);
  threads.restart(42);
  EXPECT_EQ(threads.uptime_ns(42), 42u);
  EXPECT_EQ(threads.next_wake_on_clock(), 45u);
  EXPECT_EQ(threads.stats().next_commit_ns, 60u);
}

TEST(KernelThreads, NoIntervalsNoWakes) {
  KernelThreads threads(0, 0);
  EXPECT_EQ(threads.next_wake_on_clock(), kNone);
  EXPECT_EQ(threads.wake(1'000'000), std::nullopt);
  EXPECT_EQ(threads.stats().next_flush_ns, 0u);
}

}  // namespace
}  // namespace mimicfs
