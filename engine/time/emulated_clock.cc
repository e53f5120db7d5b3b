// SPDX-License-Identifier: Apache-2.0
#include "engine/time/emulated_clock.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <thread>

namespace mimicfs {

std::expected<LatencyMode, std::string> LatencyMode::parse(std::string_view text) {
  if (text == "virtual") return LatencyMode{};
  if (text == "real") return LatencyMode{true, 1.0};
  if (text.starts_with("real:")) {
    const std::string number(text.substr(5));
    char* end = nullptr;
    const double scale = std::strtod(number.c_str(), &end);
    if (!number.empty() && end == number.c_str() + number.size() && std::isfinite(scale) &&
        scale > 0 && scale <= 1000) {
      return LatencyMode{true, scale};
    }
    return std::unexpected(
        fmt::format("latency \"{}\": SCALE must be a number above 0 and at most 1000", text));
  }
  return std::unexpected(fmt::format("latency \"{}\": expected virtual, real or real:SCALE", text));
}

std::string LatencyMode::to_string() const {
  if (!real) return "virtual";
  return scale == 1.0 ? "real" : fmt::format("real:{}", scale);
}

EmulatedClock::EmulatedClock(uint64_t queue_depth, LatencyMode mode,
                             Timelines::RealClock real_clock)
    : queue_depth_(queue_depth == 0 ? 1 : queue_depth),
      timelines_(std::move(real_clock)),
      mode_(mode) {}

uint64_t EmulatedClock::reset() { return timelines_.rebase(); }

void EmulatedClock::set_total(uint64_t ns) { timelines_.restart_at(ns); }

LatencyMode EmulatedClock::mode() const {
  std::lock_guard lock(mutex_);
  return mode_;
}

void EmulatedClock::set_mode(LatencyMode mode) {
  std::lock_guard lock(mutex_);
  mode_ = mode;
}

void EmulatedClock::wait(uint64_t ns, double scale) const {
  const auto scaled = static_cast<int64_t>(std::llround(static_cast<double>(ns) * scale));
  if (scaled > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(scaled));
}

void EmulatedClock::charge(const Cost& cost, uint32_t caller, bool at_clock) {
  // A caller's free operation still shows it is not idle; a free one of no
  // caller's changes nothing.
  if (cost.total() == 0 && caller == 0) return;
  const LatencyMode mode = this->mode();
  const bool sleeps = mode.real && cost.total() > 0;
  timelines_.place(caller, cost, {.at_clock = at_clock, .sleeps = sleeps});
  if (!sleeps) return;
  struct Finished {
    Timelines& timelines;
    uint32_t caller;
    ~Finished() { timelines.finished(caller); }
  } finished{timelines_, caller};
  wait(cost.host_ns, mode.scale);
  if (cost.device_ns == 0) return;
  {
    // lock_guard (which the analysis knows) and a condition_variable_any that
    // unlocks and relocks the mutex itself while it waits.
    std::lock_guard lock(mutex_);
    slot_freed_.wait(mutex_, [&] {
      assert_held(mutex_);  // the predicate runs under the lock
      return busy_slots_ < queue_depth_;
    });
    ++busy_slots_;
  }
  wait(cost.device_ns, mode.scale);
  {
    std::lock_guard lock(mutex_);
    --busy_slots_;
  }
  slot_freed_.notify_one();
}

}  // namespace mimicfs
