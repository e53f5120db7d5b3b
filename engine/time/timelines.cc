// SPDX-License-Identifier: Apache-2.0
#include "engine/time/timelines.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace mimicfs {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t add(uint64_t a, uint64_t b) { return b > kMax - a ? kMax : a + b; }

// Every this many operations of callers, those idle past kIdleNs are forgotten.
constexpr uint64_t kSweepEvery = 4096;

}  // namespace

Timelines::Timelines(RealClock real_clock) : real_clock_(std::move(real_clock)) {}

uint64_t Timelines::steady_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

bool Timelines::idle(const Timeline& line, uint64_t real_now) {
  return !line.sleeping && real_now - std::min(real_now, line.real_ns) > kIdleNs;
}

uint64_t Timelines::place(uint32_t caller, const Cost& cost, TimelineOptions how) {
  const uint64_t real_now = caller == 0 ? 0 : real_clock_();
  std::lock_guard lock(mutex_);
  const uint64_t now = now_ns_.load(std::memory_order_relaxed);
  uint64_t t = now;
  Timeline* line = nullptr;
  if (caller != 0) {
    line = &lines_[caller];  // a new one has real_ns 0: idle
    if (line->real_ns != 0 && !idle(*line, real_now)) {
      t = std::max(line->emulated_ns, barrier_ns_);
    }
  }
  if (how.at_clock) t = now;
  const uint64_t shared = add(cost.transfer_ns, cost.commit_ns);
  const uint64_t latency = cost.device_ns - std::min(cost.device_ns, shared);
  t = add(t, add(cost.host_ns, latency));
  if (cost.transfer_ns > 0) {
    t = add(std::max(t, transfers_end_ns_), cost.transfer_ns);
    transfers_end_ns_ = t;
  }
  if (cost.commit_ns > 0) t = commit(t, cost.commit_ns);
  if (line != nullptr) {
    *line = {t, real_now, how.sleeps};
    if (++placed_ % kSweepEvery == 0) drop_idle(real_now);
  } else {
    barrier_ns_ = t;
  }
  publish(std::max(now, t));
  return t;
}

void Timelines::publish(uint64_t ns) { now_ns_.store(ns, std::memory_order_relaxed); }

void Timelines::finished(uint32_t caller) {
  if (caller == 0) return;
  const uint64_t real_now = real_clock_();
  std::lock_guard lock(mutex_);
  auto it = lines_.find(caller);
  if (it != lines_.end()) {
    it->second.real_ns = real_now;
    it->second.sleeping = false;
  }
}

uint64_t Timelines::commit(uint64_t changed_ns, uint64_t commit_ns) {
  // The first commit that starts at or after the change carries it.
  for (const Commit& c : commits_) {
    if (c.start_ns >= changed_ns) return c.end_ns;
  }
  const uint64_t start = std::max(changed_ns, journal_free_ns_);
  journal_free_ns_ = add(start, commit_ns);
  commits_.push_back({start, journal_free_ns_});
  if (commits_.size() > kCommitsKept) commits_.pop_front();
  return journal_free_ns_;
}

void Timelines::drop_idle(uint64_t real_now) {
  std::erase_if(lines_, [real_now](const auto& entry) { return idle(entry.second, real_now); });
}

uint64_t Timelines::rebase() {
  std::lock_guard lock(mutex_);
  const uint64_t by = now_ns_.load(std::memory_order_relaxed);
  const auto back = [by](uint64_t& ns) { ns -= std::min(ns, by); };
  for (auto& [caller, line] : lines_) back(line.emulated_ns);
  back(barrier_ns_);
  back(transfers_end_ns_);
  // A commit that started before the reset carries no change made after it.
  back(journal_free_ns_);
  commits_.clear();
  publish(0);
  return by;
}

void Timelines::advance(uint64_t ns) {
  std::lock_guard lock(mutex_);
  const uint64_t now = add(now_ns_.load(std::memory_order_relaxed), ns);
  barrier_ns_ = std::max(barrier_ns_, now);
  publish(now);
}

void Timelines::restart_at(uint64_t ns) {
  std::lock_guard lock(mutex_);
  lines_.clear();
  barrier_ns_ = transfers_end_ns_ = journal_free_ns_ = ns;
  commits_.clear();
  publish(ns);
}

size_t Timelines::callers() const {
  std::lock_guard lock(mutex_);
  return lines_.size();
}

}  // namespace mimicfs
