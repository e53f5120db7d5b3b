// SPDX-License-Identifier: Apache-2.0
// Timelines: where each caller's operations fall in emulated time, and the
// resources callers share.
//
// One caller's operations follow each other on its own timeline; two callers'
// overlap, as two programs do on the real filesystem, except where they meet
// a resource that serves one at a time:
//   - the device's transfers (Cost::transfer_ns): bandwidth is shared, so a
//     transfer starts when the previous one, any caller's, has ended. Request
//     latency (the rest of Cost::device_ns) overlaps, as requests do in the
//     device's queue;
//   - the journal's commits (Cost::commit_ns): one runs at a time. A commit
//     takes every change made before it starts, so a caller whose change comes
//     while one is running waits for the next, and every caller waiting for it
//     shares it (group commit: jbd2's running and committing transactions, the
//     xfs CIL push, a btrfs log commit). A caller whose change came before a
//     commit that has started since waits for that commit's end, and no more.
// Host time (system calls, page cache copies) overlaps freely.
//
// now() is the volume's emulated time: the latest end of any operation. With
// one caller every operation starts where the previous ended, and now() is the
// sum of the costs, to the nanosecond. Caller 0 (caller.h) is a barrier: its
// operation starts at now(), and every caller's next one starts after it ends.
// A caller seen for the first time, or one whose last operation ended more
// than kIdleNs ago in real time, starts at now() too: it was doing something
// the volume cannot see (thinking, waiting for another program), so it starts
// after everything already done, not in the emulated past. Which operations
// overlap therefore depends on how the host runs the callers, as on the real
// filesystem; a single caller's time does not.
//
// Simplifications: the device is one queue of transfers (a caller behind the
// others waits for the latest transfer, even if the device was idle at its own
// time); a caller that joins a commit pays its end, whatever commit time its own
// work would have cost; the last kCommitsKept commits can be joined.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "engine/base/thread_annotations.h"
#include "engine/time/cost_model.h"

namespace mimicfs {

// How Timelines::place places an operation.
struct TimelineOptions {
  // Starts no earlier than now(): it waited for something all callers share
  // (the background worker).
  bool at_clock = false;
  // Real latency mode sleeps it after place(): the caller is busy until
  // finished(), never idle meanwhile.
  bool sleeps = false;
};

class Timelines {
 public:
  // Real time in ns on a monotonic clock; passed in so tests can move it.
  using RealClock = std::function<uint64_t()>;
  static constexpr uint64_t kIdleNs = 10'000'000;  // 10 ms of real time
  static constexpr size_t kCommitsKept = 64;

  explicit Timelines(RealClock real_clock = steady_ns);

  // Places an operation of `caller` costing `cost`; returns its end in
  // emulated time.
  uint64_t place(uint32_t caller, const Cost& cost, TimelineOptions how = {}) EXCLUDES(mutex_);
  // The caller's operation placed with `sleeps` is over in real time now: the
  // time it spent sleeping or queued is not idleness.
  void finished(uint32_t caller) EXCLUDES(mutex_);
  // The latest end of any operation; no lock taken.
  uint64_t now() const { return now_ns_.load(std::memory_order_relaxed); }
  // Moves every time back by now(), which becomes 0 (statistics reset);
  // returns by how much.
  uint64_t rebase() EXCLUDES(mutex_);
  // `ns` of idle time pass: now() moves on, and every caller's next
  // operation starts after it (`ctl time advance`). Saturates.
  void advance(uint64_t ns) EXCLUDES(mutex_);
  // Starts over at `ns`, no caller known and no resource busy (a loaded image).
  void restart_at(uint64_t ns) EXCLUDES(mutex_);
  // Callers with a timeline (active within kIdleNs, until the next sweep).
  size_t callers() const EXCLUDES(mutex_);

  static uint64_t steady_ns();

 private:
  struct Timeline {
    uint64_t emulated_ns = 0;  // where its last operation ended
    uint64_t real_ns = 0;      // when, in real time
    bool sleeping = false;     // placed with `sleeps`, not finished yet
  };
  struct Commit {
    uint64_t start_ns = 0;
    uint64_t end_ns = 0;
  };
  // The end of a commit taking the changes made up to `changed_ns`.
  uint64_t commit(uint64_t changed_ns, uint64_t commit_ns) REQUIRES(mutex_);
  static bool idle(const Timeline& line, uint64_t real_now);
  void drop_idle(uint64_t real_now) REQUIRES(mutex_);
  void publish(uint64_t ns) REQUIRES(mutex_);

  const RealClock real_clock_;
  mutable std::mutex mutex_;
  // Written under mutex_ only, so a reset never loses to an older end.
  std::atomic<uint64_t> now_ns_{0};
  std::unordered_map<uint32_t, Timeline> lines_ GUARDED_BY(mutex_);
  uint64_t barrier_ns_ GUARDED_BY(mutex_) = 0;        // the last caller 0 operation's end
  uint64_t transfers_end_ns_ GUARDED_BY(mutex_) = 0;  // the device's last transfer ends
  uint64_t journal_free_ns_ GUARDED_BY(mutex_) = 0;   // the last commit ends
  std::deque<Commit> commits_ GUARDED_BY(mutex_);     // the latest commits, by start
  uint64_t placed_ GUARDED_BY(mutex_) = 0;            // callers' operations, to sweep idle ones
};

}  // namespace mimicfs
