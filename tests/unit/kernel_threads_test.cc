// SPDX-License-Identifier: Apache-2.0
#include "engine/time/kernel_threads.h"

#include <gtest/gtest.h>

#include <limits>

#include "engine/fs/file_system.h"

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
  const auto first = threads.wake(12);  // next at 15
  ASSERT_TRUE(first);
  threads.ran(*first, BackgroundReport{});
  ASSERT_EQ(threads.stats().flusher_runs, 1u);
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
  const auto wake = threads.wake(7);
  ASSERT_TRUE(wake);
  threads.ran(*wake, BackgroundReport{});
  threads.clock_reset(1'000);
  EXPECT_EQ(threads.restart(42), 40u) << "the flusher's last wake by then";
  EXPECT_EQ(threads.uptime_ns(42), 42u);
  EXPECT_EQ(threads.next_wake_on_clock(), 45u);
  EXPECT_EQ(threads.stats().next_commit_ns, 60u);
  EXPECT_EQ(threads.stats().flusher_runs, 0u);
  EXPECT_EQ(KernelThreads(0, 30).restart(42), std::nullopt) << "no flusher";
}

// A wake already passed when the clock is reset is due at once on the new
// clock: the next operation runs it.
TEST(KernelThreads, AWakeOverdueAtAResetIsDueAtOnce) {
  KernelThreads threads(5, 0);
  threads.clock_reset(7);  // the wake at 5 never ran
  EXPECT_EQ(threads.next_wake_on_clock(), 0u);
  EXPECT_EQ(threads.stats().next_flush_ns, 0u) << "on the clock's scale, clamped";
  const auto wake = threads.wake(0);
  ASSERT_TRUE(wake);
  EXPECT_EQ(wake->at_ns, 5u);
  EXPECT_EQ(threads.next_wake_on_clock(), 3u);
}

// Without a flusher the periodic commit keeps its own grain.
TEST(KernelThreads, ACommitAloneWakesOnItsInterval) {
  KernelThreads threads(0, 30);
  EXPECT_EQ(threads.wake(29), std::nullopt);
  const auto wake = threads.wake(95);
  ASSERT_TRUE(wake);
  EXPECT_EQ(wake->at_ns, 90u);
  EXPECT_FALSE(wake->flush);
  EXPECT_TRUE(wake->commit);
  EXPECT_EQ(threads.next_wake_on_clock(), 120u);
}

TEST(KernelThreads, NoIntervalsNoWakes) {
  KernelThreads threads(0, 0);
  EXPECT_EQ(threads.next_wake_on_clock(), kNone);
  EXPECT_EQ(threads.wake(1'000'000), std::nullopt);
  EXPECT_EQ(threads.stats().next_flush_ns, 0u);
}

}  // namespace
}  // namespace mimicfs
