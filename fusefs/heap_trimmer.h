// SPDX-License-Identifier: Apache-2.0
// HeapTrimmer: gives the memory malloc holds free back to the system, so that
// the daemon's RSS follows what the volume holds.
//
// File contents live in mappings of their own (MemoryDataStore) and go back
// when a file goes; its metadata does not: extent records and directory
// entries are small allocations that glibc keeps in its arenas when
// freed (only the top of a heap is ever trimmed by itself). A volume that held
// a million extents kept ~350 MiB after its files were deleted. The trim
// threshold is fixed (glibc raises it as it frees large chunks, and then keeps
// the top of each thread's heap), and once a second, if the daemon did any
// work since it last looked (its threads but the trimmer's used CPU time:
// nothing can have been freed or faulted in otherwise, and an idle daemon is
// left alone), the trimmer releases the pages of the free chunks inside the
// heaps (malloc_trim), empties the runs the saved pages freed and kept warm
// (page_run_memory.h). (The buffers of libfuse's workers stay theirs: their
// number is bounded, FuseSession::kMaxThreads.) It runs on a thread of its own and
// holds no engine lock. Its constructor also sets malloc's thresholds and its
// number of arenas (heap_trimmer.cc says why).
//
// malloc_trim walks every free chunk of every arena, each arena under its
// lock, so an allocating thread may wait that long: a walk took 4-9 ms
// (mallinfo2, which walks the same) during a random 4 KiB write load. So while
// the daemon is busy (TrimSchedule: it used more than a tenth of a CPU in the
// last second) the trimmer skips its tick, 9 seconds in a row at most: memory
// comes back within two seconds once a load ends, and within ten seconds under
// a load that never does.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

namespace mimicfs {

// When the trimmer looks: each tick (a second) it is told the CPU time of the
// daemon's work (its threads but the trimmer's) and the wall time, and says
// whether to check now. Not before the daemon did kWorkCpuNs of work since the
// last check (less than any request costs); a tick after which it used more
// than kBusyCpuShare of a CPU is skipped, kMaxSkips in a row at most. What is measured starts again after each check, so the check's own
// time is counted neither as load nor as work.
class TrimSchedule {
 public:
  static constexpr double kBusyCpuShare = 0.1;
  static constexpr unsigned kMaxSkips = 9;
  static constexpr uint64_t kWorkCpuNs = 10'000;

  TrimSchedule(uint64_t cpu_ns, uint64_t wall_ns)
      : cpu_ns_(cpu_ns), wall_ns_(wall_ns), checked_cpu_ns_(cpu_ns) {}

  // At a tick: whether to check now. After a true, call checked() once done.
  bool due(uint64_t cpu_ns, uint64_t wall_ns) {
    const auto used = static_cast<double>(since(cpu_ns, cpu_ns_));
    const auto passed = static_cast<double>(since(wall_ns, wall_ns_));
    measure_from(cpu_ns, wall_ns);
    // Nothing to give back.
    if (since(cpu_ns, checked_cpu_ns_) < kWorkCpuNs) return false;
    if (skipped_ < kMaxSkips && used > kBusyCpuShare * passed) {
      ++skipped_;
      return false;
    }
    return true;
  }
  // The check is done (at these clock readings): measuring starts again.
  void checked(uint64_t cpu_ns, uint64_t wall_ns) {
    skipped_ = 0;
    checked_cpu_ns_ = cpu_ns;
    measure_from(cpu_ns, wall_ns);
  }

 private:
  // A reading may come out a little below the one before (the daemon's CPU
  // time is the process's less the trimmer's, read one after the other).
  static uint64_t since(uint64_t now, uint64_t then) { return now > then ? now - then : 0; }
  void measure_from(uint64_t cpu_ns, uint64_t wall_ns) {
    cpu_ns_ = cpu_ns;
    wall_ns_ = wall_ns;
  }

  uint64_t cpu_ns_;
  uint64_t wall_ns_;
  uint64_t checked_cpu_ns_;
  unsigned skipped_ = 0;
};

class HeapTrimmer {
 public:
  // Starts the thread: call after fuse_daemonize (a thread does not survive its fork).
  HeapTrimmer();
  ~HeapTrimmer();  // stops and joins the thread
  HeapTrimmer(const HeapTrimmer&) = delete;
  HeapTrimmer& operator=(const HeapTrimmer&) = delete;

 private:
  // Gives back what malloc holds free and the saved pages' kept runs.
  static void give_back();
  std::mutex mutex_;
  std::condition_variable stop_requested_;
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace mimicfs
