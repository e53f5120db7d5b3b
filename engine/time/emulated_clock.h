// SPDX-License-Identifier: Apache-2.0
// EmulatedClock: where emulated operation costs add up, and, in real latency
// mode, where the calling thread waits them out.
//
// Virtual (the default): nothing sleeps. Each operation takes its place on its
// caller's timeline (timelines.h); the total is the latest end, which for a
// single caller is the sum of the costs: the same to the nanosecond every run.
// Real (`--latency real[:SCALE]`): each operation also sleeps its cost times
// SCALE; the device part holds one of the profile's queue_depth slots, so
// concurrent operations overlap as on the device and queue beyond its depth.
// Thread-safe. Not file timestamps: those come from WallClock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <expected>
#include <mutex>
#include <string>
#include <string_view>

#include "engine/base/thread_annotations.h"
#include "engine/time/cost_model.h"
#include "engine/time/timelines.h"

namespace mimicfs {

struct LatencyMode {
  bool real = false;
  double scale = 1.0;  // real mode: seconds slept per emulated second

  // "virtual", "real" or "real:SCALE" (0 < SCALE <= 1000).
  static std::expected<LatencyMode, std::string> parse(std::string_view text);
  std::string to_string() const;  // parses back to the same mode
};

class EmulatedClock {
 public:
  explicit EmulatedClock(uint64_t queue_depth, LatencyMode mode = {},
                         Timelines::RealClock real_clock = Timelines::steady_ns);

  // Places `cost` on `caller`'s timeline (caller.h; 0: after everything) and,
  // in real mode, waits it. `at_clock`: it starts no earlier than the total
  // (it waited for something every caller shares). Call without locks held.
  void charge(const Cost& cost, uint32_t caller = 0, bool at_clock = false);
  // The emulated time: the latest end of any operation. Lock-free.
  uint64_t total_ns() const { return timelines_.now(); }
  // Every timeline moves back by the total, which becomes 0; returns the total
  // it was.
  uint64_t reset();
  // `ns` of idle time pass (Timelines::advance).
  void advance(uint64_t ns) { timelines_.advance(ns); }
  // The total of an earlier mount (a volume image); no caller's timeline kept.
  void set_total(uint64_t ns);

  LatencyMode mode() const;
  void set_mode(LatencyMode mode);

 private:
  void wait(uint64_t ns, double scale) const;

  const uint64_t queue_depth_;
  Timelines timelines_;

  mutable std::mutex mutex_;
  std::condition_variable_any slot_freed_;
  LatencyMode mode_ GUARDED_BY(mutex_);
  uint64_t busy_slots_ GUARDED_BY(mutex_) = 0;
};

}  // namespace mimicfs
