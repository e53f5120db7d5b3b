// SPDX-License-Identifier: Apache-2.0
#include "engine/time/timelines.h"

#include <gtest/gtest.h>

namespace mimicfs {
namespace {

// A real clock the test moves by hand.
struct FakeRealClock {
  uint64_t ns = 1'000'000'000;
  Timelines::RealClock source() {
    return [this] { return ns; };
  }
};

Cost host(uint64_t ns) { return {ns, 0}; }
// Latency only: the device serves it beside other callers' requests.
Cost latency(uint64_t ns) { return {0, ns}; }
Cost transfer(uint64_t ns) { return {0, ns, ns, 0}; }
Cost commit(uint64_t ns) { return {0, ns, 0, ns}; }

// Caller 1 ends at 100; caller 2, new, then runs 100..1100: caller 1 is behind the clock.
void put_caller_one_behind(Timelines& lines) {
  lines.place(1, latency(100));
  lines.place(2, latency(1000));
}

TEST(Timelines, OneCallerSumsEveryCostToTheNanosecond) {
  FakeRealClock real;
  Timelines lines(real.source());
  const Cost mixed{3, 100, 40, 50};  // host 3, latency 10, transfer 40, commit 50
  uint64_t expected = 0;
  for (const Cost& cost : {mixed, host(7), transfer(11), commit(13), latency(17), mixed}) {
    expected += cost.total();
    EXPECT_EQ(lines.place(42, cost), expected);
    real.ns += 1000;
  }
  EXPECT_EQ(lines.now(), expected);
}

TEST(Timelines, CallerZeroStartsAfterEverything) {
  Timelines lines;
  EXPECT_EQ(lines.place(0, latency(100)), 100u);
  EXPECT_EQ(lines.place(0, host(5)), 105u);
  EXPECT_EQ(lines.callers(), 0u);
}

TEST(Timelines, TwoCallersOverlapWhereTheyShareNothing) {
  FakeRealClock real;
  Timelines lines(real.source());
  EXPECT_EQ(lines.place(1, latency(100)), 100u);
  // The second starts at the clock (a new caller), then both go on side by side.
  EXPECT_EQ(lines.place(2, latency(100)), 200u);
  EXPECT_EQ(lines.place(1, latency(100)), 200u);
  EXPECT_EQ(lines.place(2, host(50)), 250u);
  EXPECT_EQ(lines.place(1, host(50)), 250u);
  EXPECT_EQ(lines.now(), 250u);
  EXPECT_EQ(lines.callers(), 2u);
}

TEST(Timelines, TransfersTakeTheDeviceOneAtATime) {
  FakeRealClock real;
  Timelines lines(real.source());
  lines.place(1, host(10));
  lines.place(2, host(0));  // joins at 10
  EXPECT_EQ(lines.place(1, transfer(100)), 110u);
  // Caller 2 is at 10 but the device is busy until 110.
  EXPECT_EQ(lines.place(2, transfer(100)), 210u);
  // Latency before a transfer overlaps the other's transfer.
  EXPECT_EQ(lines.place(1, Cost{0, 150, 100, 0}), 310u);  // 110 + 50 latency, device free at 210
}

TEST(Timelines, ChangesMadeDuringACommitShareTheNext) {
  FakeRealClock real;
  Timelines lines(real.source());
  lines.place(1, host(100));
  lines.place(2, host(0));
  lines.place(3, host(0));  // all three at 100
  EXPECT_EQ(lines.place(1, commit(500)), 600u);  // commit 1: 100..600
  // Changes at 150 and 200, while commit 1 runs: both wait for commit 2 (600..1100).
  lines.place(2, host(50));
  lines.place(3, host(100));
  EXPECT_EQ(lines.place(2, commit(500)), 1100u);
  EXPECT_EQ(lines.place(3, commit(500)), 1100u);
  EXPECT_EQ(lines.now(), 1100u);
  // A change at 700 (during commit 2) takes commit 3: 1100..1600.
  lines.place(1, host(100));
  EXPECT_EQ(lines.place(1, commit(500)), 1600u);
}

TEST(Timelines, AChangeMadeBeforeACommitStartedWaitsForThatCommitOnly) {
  FakeRealClock real;
  Timelines lines(real.source());
  lines.place(1, host(300));                     // caller 1 at 300
  lines.place(2, host(0));                       // caller 2 joins at 300
  EXPECT_EQ(lines.place(2, host(200)), 500u);    // caller 2 at 500
  EXPECT_EQ(lines.place(2, commit(100)), 600u);  // commit 500..600
  // Caller 1's change was at 300, before that commit started: it is in it.
  EXPECT_EQ(lines.place(1, commit(100)), 600u);
}

TEST(Timelines, AnIdleCallerStartsAtTheClock) {
  FakeRealClock real;
  Timelines lines(real.source());
  put_caller_one_behind(lines);
  real.ns += Timelines::kIdleNs;   // caller 1 was away, but not longer than kIdleNs
  EXPECT_EQ(lines.place(1, latency(10)), 110u);
  real.ns += Timelines::kIdleNs + 1;  // now longer: it starts after everything done
  EXPECT_EQ(lines.place(1, latency(10)), 1110u);
}

TEST(Timelines, RealTimeSpentSleepingIsNotIdleness) {
  FakeRealClock real;
  Timelines lines(real.source());
  lines.place(1, latency(100), {.sleeps = true});
  lines.place(2, latency(1000));
  real.ns += 5 * Timelines::kIdleNs;  // the caller slept its cost in real latency mode
  lines.finished(1);
  EXPECT_EQ(lines.place(1, latency(10)), 110u);
  real.ns += Timelines::kIdleNs + 1;  // and then was away
  EXPECT_EQ(lines.place(1, latency(10)), 1110u);
}

TEST(Timelines, CallerZeroIsABarrier) {
  FakeRealClock real;
  Timelines lines(real.source());
  EXPECT_EQ(lines.place(1, latency(100)), 100u);
  EXPECT_EQ(lines.place(0, latency(50)), 150u);
  // One program and the kernel's own requests: still the sum.
  EXPECT_EQ(lines.place(1, latency(10)), 160u);
}

TEST(Timelines, AtClockHoldsACallerBehindTheClock) {
  FakeRealClock real;
  Timelines lines(real.source());
  put_caller_one_behind(lines);
  EXPECT_EQ(lines.place(1, host(10), {.at_clock = true}), 1110u);
}

TEST(Timelines, ASleepingCallerIsNeitherIdleNorSweptAway) {
  FakeRealClock real;
  Timelines lines(real.source());
  lines.place(1, latency(100), {.sleeps = true});
  lines.place(2, latency(1000));  // 100..1100
  real.ns += 5 * Timelines::kIdleNs;
  for (int i = 0; i < 5000; ++i) lines.place(3, host(0));  // sweeps
  EXPECT_EQ(lines.callers(), 2u) << "caller 2 idle, swept; caller 1 asleep, kept";
  lines.finished(1);
  EXPECT_EQ(lines.place(1, latency(10)), 110u);
}

TEST(Timelines, IdleCallersAreSweptAway) {
  FakeRealClock real;
  Timelines lines(real.source());
  for (uint32_t caller = 1; caller <= 100; ++caller) lines.place(caller, host(1));
  EXPECT_EQ(lines.callers(), 100u);
  real.ns += Timelines::kIdleNs + 1;
  for (int i = 0; i < 5000; ++i) lines.place(1000, host(1));
  EXPECT_EQ(lines.callers(), 1u);
}

TEST(Timelines, OnlyTheLatestCommitsCanBeJoined) {
  FakeRealClock real;
  Timelines lines(real.source());
  lines.place(1, host(0));
  lines.place(2, host(0));  // caller 2 stays at 0
  for (size_t i = 0; i < Timelines::kCommitsKept + 1; ++i) lines.place(1, commit(10));
  // Commit 0..10 carried caller 2's change at 0, but it is forgotten: the first
  // kept one (10..20) carries it.
  EXPECT_EQ(lines.place(2, commit(10)), 20u);
}

TEST(Timelines, RebaseMovesEveryTimeBackByTheClock) {
  FakeRealClock real;
  Timelines lines(real.source());
  lines.place(1, commit(100));          // commit 0..100
  lines.place(2, latency(300));         // caller 2: 100..400
  EXPECT_EQ(lines.rebase(), 400u);
  EXPECT_EQ(lines.now(), 0u);
  EXPECT_EQ(lines.place(2, host(5)), 5u);
  // Caller 1's timeline was at 100, 300 before the clock: it is at 0 now.
  EXPECT_EQ(lines.place(1, host(1)), 1u);
}

TEST(Timelines, ACommitAfterAResetJoinsNoneFromBefore) {
  FakeRealClock real;
  Timelines lines(real.source());
  lines.place(1, commit(100));
  lines.rebase();
  EXPECT_EQ(lines.place(1, commit(10)), 10u);
  EXPECT_EQ(lines.place(1, commit(10)), 20u);
  EXPECT_EQ(lines.place(0, commit(10)), 30u);
}

TEST(Timelines, RestartForgetsCallersAndResources) {
  FakeRealClock real;
  Timelines lines(real.source());
  lines.place(1, transfer(100));
  lines.restart_at(5000);
  EXPECT_EQ(lines.callers(), 0u);
  EXPECT_EQ(lines.place(1, transfer(10)), 5010u);
}

TEST(Timelines, SaturatesInsteadOfWrapping) {
  Timelines lines;
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(lines.place(0, Cost{0, max, max, 0}), max);
  EXPECT_EQ(lines.now(), max);
  EXPECT_EQ(lines.place(0, commit(10)), max);
}

}  // namespace
}  // namespace mimicfs
