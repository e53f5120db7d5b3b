#include "backends/timelines.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace mimicfs {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t add(uint64_t a, uint64_t b) { return b > kMax - a ? kMax : a + b; }

// Commits kept to be joined: a caller lagging behind the others may join one
// that started after its change; older ones have ended before any caller's
// timeline can reach back to them in practice.
constexpr size_t kCommitsKept = 64;
// Every this many operations, callers idle past kIdleNs are forgotten.
constexpr uint64_t kSweepEvery = 4096;

}  // namespace

Timelines::Timelines(RealClock real_clock) : real_clock_(std::move(real_clock)) {}

uint64_t Timelines::steady_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

uint64_t Timelines::place(uint32_t caller, const Cost& cost, uint64_t real_ns_after) {
  const uint64_t real_now = caller == 0 ? 0 : real_clock_();
  std::lock_guard lock(mutex_);
  uint64_t t = now_ns_;
  Timeline* line = nullptr;
  if (caller != 0) {
    line = &lines_[caller];  // a new one has real_ns 0: idle
    if (line->real_ns != 0 && real_now - std::min(real_now, line->real_ns) <= kIdleNs) {
      t = line->emulated_ns;
    }
  }
  const uint64_t shared = add(cost.transfer_ns, cost.commit_ns);
  const uint64_t latency = cost.device_ns - std::min(cost.device_ns, shared);
  t = add(t, add(cost.host_ns, latency));
  if (cost.transfer_ns > 0) {
    t = add(std::max(t, transfers_end_ns_), cost.transfer_ns);
    transfers_end_ns_ = t;
  }
  if (cost.commit_ns > 0) t = commit(t, cost.commit_ns);
  now_ns_ = std::max(now_ns_, t);
  if (line != nullptr) *line = {t, add(real_now, real_ns_after)};
  if (++placed_ % kSweepEvery == 0) drop_idle(real_now);
  return t;
}

uint64_t Timelines::commit(uint64_t changed_ns, uint64_t commit_ns) {
  // The first commit that starts at or after the change carries it.
  for (const Commit& c : commits_) {
    if (c.start_ns >= changed_ns) return c.end_ns;
  }
  const uint64_t start = std::max(changed_ns, commits_.empty() ? 0 : commits_.back().end_ns);
  commits_.push_back({start, add(start, commit_ns)});
  if (commits_.size() > kCommitsKept) commits_.pop_front();
  return commits_.back().end_ns;
}

void Timelines::drop_idle(uint64_t real_now) {
  std::erase_if(lines_, [real_now](const auto& entry) {
    return real_now - std::min(real_now, entry.second.real_ns) > kIdleNs;
  });
}

uint64_t Timelines::now() const {
  std::lock_guard lock(mutex_);
  return now_ns_;
}

void Timelines::rebase() {
  std::lock_guard lock(mutex_);
  const uint64_t by = now_ns_;
  const auto back = [by](uint64_t& ns) { ns -= std::min(ns, by); };
  for (auto& [caller, line] : lines_) back(line.emulated_ns);
  back(transfers_end_ns_);
  for (Commit& c : commits_) {
    back(c.start_ns);
    back(c.end_ns);
  }
  now_ns_ = 0;
}

void Timelines::restart_at(uint64_t ns) {
  std::lock_guard lock(mutex_);
  now_ns_ = ns;
  lines_.clear();
  transfers_end_ns_ = ns;
  commits_.clear();
}

size_t Timelines::callers() const {
  std::lock_guard lock(mutex_);
  return lines_.size();
}

}  // namespace mimicfs
