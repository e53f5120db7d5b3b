// SPDX-License-Identifier: Apache-2.0
#include "engine/time/kernel_threads.h"

#include "engine/fs/file_system.h"

#include <algorithm>
#include <limits>

namespace mimicfs {

KernelThreads::KernelThreads(uint64_t writeback_interval_ns, uint64_t commit_interval_ns)
    : writeback_interval_ns_(writeback_interval_ns), commit_interval_ns_(commit_interval_ns) {
  schedule(0);
}

void KernelThreads::schedule(uint64_t now) {
  auto next = [now](uint64_t interval) {
    return interval == 0 ? 0 : (now / interval + 1) * interval;
  };
  next_flush_ns_ = next(writeback_interval_ns_);
  next_commit_ns_ = next(commit_interval_ns_);
}

std::optional<KernelThreads::Wake> KernelThreads::wake(uint64_t clock_ns) {
  const uint64_t now = uptime_ns(clock_ns);
  Wake wake;
  wake.flush = next_flush_ns_ != 0 && now >= next_flush_ns_;
  wake.commit = next_commit_ns_ != 0 && now >= next_commit_ns_;
  if (!wake.flush && !wake.commit) return std::nullopt;
  // At the latest wake the clock passed: an operation that took several
  // intervals wakes the threads once.
  const uint64_t grain = writeback_interval_ns_ != 0 ? writeback_interval_ns_ : commit_interval_ns_;
  wake.at_ns = now / grain * grain;
  schedule(now);
  return wake;
}

void KernelThreads::ran(const Wake& wake, const BackgroundReport& report) {
  if (wake.flush) ++stats_.flusher_runs;
  stats_.files_written_back += report.files_written_back;
  stats_.bytes_written_back += report.bytes_written_back;
  if (report.committed) ++stats_.commits;
  stats_.files_committed += report.files_committed;
}

void KernelThreads::clock_reset(uint64_t clock_ns) {
  uptime_offset_ns_ += clock_ns;
  stats_ = {};
}

std::optional<uint64_t> KernelThreads::restart(uint64_t clock_ns) {
  // Nothing is dirty in a loaded volume; its threads wake on from its time.
  uptime_offset_ns_ = 0;
  stats_ = {};
  schedule(clock_ns);
  if (writeback_interval_ns_ == 0) return std::nullopt;
  return clock_ns / writeback_interval_ns_ * writeback_interval_ns_;
}

uint64_t KernelThreads::on_clock(uint64_t uptime) const {
  return uptime == 0 ? 0 : uptime - std::min(uptime, uptime_offset_ns_);
}

uint64_t KernelThreads::next_wake_on_clock() const {
  uint64_t wake = std::numeric_limits<uint64_t>::max();
  for (const uint64_t at : {next_flush_ns_, next_commit_ns_}) {
    if (at != 0) wake = std::min(wake, on_clock(at));
  }
  return wake;
}

BackgroundStats KernelThreads::stats() const {
  BackgroundStats stats = stats_;
  stats.next_flush_ns = on_clock(next_flush_ns_);
  stats.next_commit_ns = on_clock(next_commit_ns_);
  return stats;
}

}  // namespace mimicfs
