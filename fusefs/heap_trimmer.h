// HeapTrimmer: gives the memory malloc holds free back to the system, so that
// the daemon's RSS follows what the volume holds.
//
// File contents live in mappings of their own (MemoryDataStore) and go back
// when a file goes; its metadata does not: extent records, saved pages and
// directory entries are small allocations that glibc keeps in its arenas when
// freed (only the top of a heap is ever trimmed by itself). A volume that held
// a million extents kept ~350 MiB after its files were deleted. The trim
// threshold is fixed (glibc raises it as it frees large chunks, and then keeps
// the top of each thread's heap), and once a second the trimmer asks how much
// malloc holds free (mallinfo2) and, past a threshold, releases the pages of
// free chunks inside the heaps (malloc_trim). It runs on a thread of its own
// and holds no engine lock.
//
// Both calls walk every free chunk of every arena, each arena under its lock,
// so an allocating thread may wait that long: mallinfo2 took 4-9 ms a call
// during a random 4 KiB write load. So while the daemon is busy (TrimSchedule:
// it used more than a tenth of a CPU in the last second) the trimmer skips its
// check, 9 seconds in a row at most: memory comes back within two seconds once
// a load ends, and within ten seconds under a load that never does.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace mimicfs {

// When the trimmer looks: each tick (a second) it is told the process's CPU
// time and the wall time, and says whether to check now. A tick after which
// the process used more than kBusyCpuShare of a CPU is skipped, kMaxSkips in a
// row at most; what is measured starts again after each check, so the check's
// own time is not counted as load.
class TrimSchedule {
 public:
  static constexpr double kBusyCpuShare = 0.1;
  static constexpr unsigned kMaxSkips = 9;

  TrimSchedule(uint64_t cpu_ns, uint64_t wall_ns) : cpu_ns_(cpu_ns), wall_ns_(wall_ns) {}

  // At a tick: whether to check now. After a true, call checked() once done.
  bool due(uint64_t cpu_ns, uint64_t wall_ns) {
    const double used = static_cast<double>(cpu_ns - cpu_ns_);
    const double passed = static_cast<double>(wall_ns - wall_ns_);
    if (skipped_ < kMaxSkips && used > kBusyCpuShare * passed) {
      ++skipped_;
      measure_from(cpu_ns, wall_ns);
      return false;
    }
    return true;
  }
  // The check is done (at these clock readings): measuring starts again.
  void checked(uint64_t cpu_ns, uint64_t wall_ns) {
    skipped_ = 0;
    measure_from(cpu_ns, wall_ns);
  }

 private:
  void measure_from(uint64_t cpu_ns, uint64_t wall_ns) {
    cpu_ns_ = cpu_ns;
    wall_ns_ = wall_ns;
  }

  uint64_t cpu_ns_;
  uint64_t wall_ns_;
  unsigned skipped_ = 0;
};

class HeapTrimmer {
 public:
  static constexpr uint64_t kThresholdBytes = 16 << 20;

  // Starts the thread: call after fuse_daemonize (a thread does not survive its fork).
  HeapTrimmer();
  ~HeapTrimmer();  // stops and joins the thread
  HeapTrimmer(const HeapTrimmer&) = delete;
  HeapTrimmer& operator=(const HeapTrimmer&) = delete;

  // Releases what malloc holds free when that grew by the threshold since the
  // last trim; returns by how much (0: nothing done).
  static uint64_t trim_if_worth_it();

 private:
  std::mutex mutex_;
  std::condition_variable stop_requested_;
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace mimicfs
