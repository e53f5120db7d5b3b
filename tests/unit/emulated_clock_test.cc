// SPDX-License-Identifier: Apache-2.0
#include "engine/time/emulated_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

namespace mimicfs {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr uint64_t kMillisecond = 1'000'000;
constexpr uint64_t kHour = uint64_t{3600} * 1'000'000'000;

LatencyMode parsed(std::string_view text) {
  auto mode = LatencyMode::parse(text);
  EXPECT_TRUE(mode.has_value()) << text << ": " << mode.error();
  return mode.value_or(LatencyMode{});
}

// The message of a latency mode that must not parse.
std::string parse_error(std::string_view text) {
  auto mode = LatencyMode::parse(text);
  EXPECT_FALSE(mode.has_value()) << text << " parsed";
  return mode ? std::string() : mode.error();
}

TEST(LatencyMode, DefaultIsVirtual) {
  const LatencyMode mode;
  EXPECT_FALSE(mode.real);
  EXPECT_EQ(mode.to_string(), "virtual");
}

TEST(LatencyMode, ParsesVirtualRealAndScaledReal) {
  EXPECT_FALSE(parsed("virtual").real);

  const LatencyMode real = parsed("real");
  EXPECT_TRUE(real.real);
  EXPECT_EQ(real.scale, 1.0);

  const LatencyMode half = parsed("real:0.5");
  EXPECT_TRUE(half.real);
  EXPECT_EQ(half.scale, 0.5);

  EXPECT_EQ(parsed("real:1000").scale, 1000.0);
  EXPECT_EQ(parsed("real:0.001").scale, 0.001);
}

TEST(LatencyMode, RejectsScalesOutsideTheRangeNamingTheText) {
  for (std::string_view text :
       {"real:0", "real:-1", "real:abc", "real:1001", "real:", "real:1x", "real:nan", "real:inf"}) {
    const std::string message = parse_error(text);
    EXPECT_NE(message.find(std::string(text)), std::string::npos) << message;
    EXPECT_NE(message.find("SCALE"), std::string::npos) << message;
  }
}

TEST(LatencyMode, RejectsUnknownModesNamingTheText) {
  for (std::string_view text : {"fast", "", "Virtual", "real0.5", "virtual:2"}) {
    const std::string message = parse_error(text);
    EXPECT_NE(message.find('"' + std::string(text) + '"'), std::string::npos) << message;
    EXPECT_NE(message.find("virtual, real or real:SCALE"), std::string::npos) << message;
  }
}

TEST(LatencyMode, ToStringRoundTrips) {
  for (std::string_view text :
       {"virtual", "real", "real:0.5", "real:2", "real:1000", "real:0.001", "real:0.1"}) {
    const LatencyMode mode = parsed(text);
    EXPECT_EQ(mode.to_string(), text);
    const LatencyMode again = parsed(mode.to_string());
    EXPECT_EQ(again.real, mode.real);
    EXPECT_EQ(again.scale, mode.scale);
  }
  EXPECT_EQ(parsed("real:1").to_string(), "real");
}

TEST(EmulatedClock, VirtualModeSumsWithoutSleeping) {
  EmulatedClock clock(1);
  // An hour of emulated time; if it slept, the test would time out.
  clock.charge(Cost{0, kHour});
  clock.charge(Cost{5, 7});
  EXPECT_EQ(clock.total_ns(), kHour + 12);
  EXPECT_FALSE(clock.mode().real);
}

TEST(EmulatedClock, TwoCallersOverlapOnTheirTimelines) {
  uint64_t real = 1'000'000'000;
  EmulatedClock clock(1, {}, [&real] { return real; });
  clock.charge(Cost{0, 100}, 1);
  clock.charge(Cost{0, 100}, 2);  // a new caller starts at the clock: 100..200
  clock.charge(Cost{0, 100}, 1);  // 100..200, beside it
  EXPECT_EQ(clock.total_ns(), 200u);
  EXPECT_EQ(clock.reset(), 200u);
  EXPECT_EQ(clock.total_ns(), 0u);
}

TEST(EmulatedClock, AFreeOperationKeepsACallerActive) {
  uint64_t real = 1'000'000'000;
  EmulatedClock clock(1, {}, [&real] { return real; });
  clock.charge(Cost{0, 100}, 1);
  clock.charge(Cost{0, 1000}, 2);  // 100..1100
  for (int i = 0; i < 3; ++i) {
    real += Timelines::kIdleNs / 2;
    clock.charge(Cost{}, 1);  // a getattr the page cache answers, say
  }
  clock.charge(Cost{0, 10}, 1);
  EXPECT_EQ(clock.total_ns(), 1100u) << "caller 1 went on from 100, beside caller 2";
}

TEST(EmulatedClock, RealModeSleepIsNotIdleness) {
  // The real clock jumps past kIdleNs during caller 1's first sleep.
  int calls = 0;
  uint64_t real = 1'000'000'000;
  EmulatedClock clock(1, LatencyMode{true, 0.001}, [&calls, &real] {
    return real + (++calls >= 2 ? 5 * Timelines::kIdleNs : 0);
  });
  clock.charge(Cost{0, 100}, 1);
  clock.charge(Cost{0, 1000}, 2);  // 100..1100
  clock.charge(Cost{0, 10}, 1);
  EXPECT_EQ(clock.total_ns(), 1100u) << "caller 1 went on from 100, beside caller 2";
  // Once its sleep is over, a caller away for longer than kIdleNs is idle.
  real += Timelines::kIdleNs + 1;
  clock.charge(Cost{0, 10}, 1);
  EXPECT_EQ(clock.total_ns(), 1110u);
}

TEST(EmulatedClock, ZeroCostChangesNothing) {
  EmulatedClock clock(1, LatencyMode{true, 1.0});
  clock.charge(Cost{});
  EXPECT_EQ(clock.total_ns(), 0u);
}

TEST(EmulatedClock, ResetZeroesTheTotal) {
  EmulatedClock clock(4);
  clock.charge(Cost{100, 200});
  ASSERT_EQ(clock.total_ns(), 300u);
  clock.reset();
  EXPECT_EQ(clock.total_ns(), 0u);
  clock.charge(Cost{1, 2});
  EXPECT_EQ(clock.total_ns(), 3u);
}

TEST(EmulatedClock, RealModeWaitsTheCost) {
  EmulatedClock clock(1, LatencyMode{true, 1.0});
  const auto start = steady_clock::now();
  clock.charge(Cost{0, 20 * kMillisecond});
  EXPECT_GE(steady_clock::now() - start, milliseconds(20));  // a lower bound only
  EXPECT_EQ(clock.total_ns(), 20 * kMillisecond);
}

TEST(EmulatedClock, RealModeWaitsHostTimeToo) {
  EmulatedClock clock(1, LatencyMode{true, 1.0});
  const auto start = steady_clock::now();
  clock.charge(Cost{10 * kMillisecond, 10 * kMillisecond});
  EXPECT_GE(steady_clock::now() - start, milliseconds(20));
}

TEST(EmulatedClock, RealModeScalesTheWaitButNotTheTotal) {
  EmulatedClock clock(1, LatencyMode{true, 0.5});
  const auto start = steady_clock::now();
  clock.charge(Cost{0, 40 * kMillisecond});
  EXPECT_GE(steady_clock::now() - start, milliseconds(20));
  EXPECT_EQ(clock.total_ns(), 40 * kMillisecond);  // emulated time, not wall time
}

TEST(EmulatedClock, QueueDepthOneSerializesDeviceTime) {
  EmulatedClock clock(1, LatencyMode{true, 1.0});
  const auto start = steady_clock::now();
  std::thread first([&] { clock.charge(Cost{0, 20 * kMillisecond}); });
  std::thread second([&] { clock.charge(Cost{0, 20 * kMillisecond}); });
  first.join();
  second.join();
  // One device slot: the second waits for the first.
  EXPECT_GE(steady_clock::now() - start, milliseconds(40));
  EXPECT_EQ(clock.total_ns(), 40 * kMillisecond);
}

TEST(EmulatedClock, QueueDepthZeroIsTreatedAsOne) {
  EmulatedClock clock(0, LatencyMode{true, 1.0});
  const auto start = steady_clock::now();
  std::thread first([&] { clock.charge(Cost{0, 10 * kMillisecond}); });
  std::thread second([&] { clock.charge(Cost{0, 10 * kMillisecond}); });
  first.join();
  second.join();
  EXPECT_GE(steady_clock::now() - start, milliseconds(20));
}

TEST(EmulatedClock, SetModeSwitchesBetweenVirtualAndReal) {
  EmulatedClock clock(1);
  clock.set_mode(LatencyMode{true, 0.25});
  EXPECT_TRUE(clock.mode().real);
  EXPECT_EQ(clock.mode().scale, 0.25);
  EXPECT_EQ(clock.mode().to_string(), "real:0.25");
  clock.set_mode(LatencyMode{});
  EXPECT_FALSE(clock.mode().real);
  clock.charge(Cost{0, kHour});  // virtual again: no sleep
  EXPECT_EQ(clock.total_ns(), kHour);
}

}  // namespace
}  // namespace mimicfs
