// SPDX-License-Identifier: Apache-2.0
// KernelThreads: when the kernel's own threads wake in emulated time. The
// flusher wakes every page_cache.writeback_interval_ns and writes back the
// files whose dirty data expired; the filesystem commits every
// durability.commit_interval_ns (ext4's commit=5, xfs's log worker, btrfs's
// commit=30). The operation whose work moves the clock past a wake runs them
// (FileSystem::background) after its own work, at no cost of its own.
//
// Their times run on the volume's uptime, which a statistics reset (the clock
// starting again at 0) does not restart.
//
// Not thread-safe: CostLayer guards it with the lock under which the clock is
// reset, and publishes next_wake_on_clock() for a check without it.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/stats/stats.h"

namespace mimicfs {

struct BackgroundReport;

class KernelThreads {
 public:
  // A zero interval: that thread never wakes.
  KernelThreads(uint64_t writeback_interval_ns, uint64_t commit_interval_ns);

  struct Wake {
    uint64_t at_ns = 0;  // uptime of the latest wake the clock passed
    bool flush = false;
    bool commit = false;
  };
  uint64_t uptime_ns(uint64_t clock_ns) const { return uptime_offset_ns_ + clock_ns; }
  // The threads the clock at `clock_ns` wakes (once however many intervals it
  // passed), and their next wakes scheduled; nullopt when none is due.
  std::optional<Wake> wake(uint64_t clock_ns);
  // What they did.
  void ran(const Wake& wake, const BackgroundReport& report);
  // The clock starts again at 0 from `clock_ns`: the wakes stay where they
  // were on uptime, the statistics start again.
  void clock_reset(uint64_t clock_ns);
  // A volume loaded with its clock at `clock_ns`: uptime is the clock again
  // and the threads wake on from there. Returns the flusher's last wake by
  // then, from which a file that becomes dirty counts its age (nullopt: no
  // flusher).
  std::optional<uint64_t> restart(uint64_t clock_ns);

  // The earlier next wake, on the clock's scale (max: none).
  uint64_t next_wake_on_clock() const;
  // stats.json's background, its next wakes on the clock's scale.
  BackgroundStats stats() const;

 private:
  // The next multiple of each interval after uptime `now`.
  void schedule(uint64_t now);
  uint64_t on_clock(uint64_t uptime) const;

  const uint64_t writeback_interval_ns_;
  const uint64_t commit_interval_ns_;
  uint64_t uptime_offset_ns_ = 0;  // emulated time before the last statistics reset
  uint64_t next_flush_ns_ = 0;     // uptime; 0: no flusher
  uint64_t next_commit_ns_ = 0;    // uptime; 0: no periodic commit
  BackgroundStats stats_;
};

}  // namespace mimicfs
