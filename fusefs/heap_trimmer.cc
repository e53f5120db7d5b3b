#include "fusefs/heap_trimmer.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <ctime>

#include "backends/timelines.h"  // Timelines::steady_ns, the engine's real clock

namespace mimicfs {
namespace {

uint64_t process_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace

HeapTrimmer::HeapTrimmer() {
  // glibc raises the trim threshold each time it frees a large chunk (a
  // thread's request buffer), up to 64 MiB, and never gives back the top of a
  // thread's heap below it: set, it stays at glibc's default, 128 KiB.
  mallopt(M_TRIM_THRESHOLD, 128 << 10);
  // Setting it also fixes the mmap threshold (else raised the same way): above
  // the 1 MiB buffers of reads and copies, which are then reused from the
  // heaps instead of mapped and faulted in each time.
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  thread_ = std::thread([this] {
    TrimSchedule schedule(process_cpu_ns(), Timelines::steady_ns());
    std::unique_lock lock(mutex_);
    while (!stop_requested_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) {
      lock.unlock();
      if (schedule.due(process_cpu_ns(), Timelines::steady_ns())) {
        if (const uint64_t freed = trim_if_worth_it(); freed > 0) {
          spdlog::debug("gave {} MiB that malloc held free back to the system", freed >> 20);
        }
        schedule.checked(process_cpu_ns(), Timelines::steady_ns());
      }
      lock.lock();
    }
  });
}

HeapTrimmer::~HeapTrimmer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_requested_.notify_all();
  thread_.join();
}

uint64_t HeapTrimmer::trim_if_worth_it() {
  // fordblks: the free bytes in every arena's chunks (mmapped chunks are not
  // counted). Trimmed chunks stay free chunks, their pages given back: what
  // counts is how much more is free than after the last trim.
  static std::atomic<uint64_t> free_after_last_trim{0};
  const uint64_t free_now = mallinfo2().fordblks;
  const uint64_t trimmed = free_after_last_trim.load();
  if (free_now < trimmed) free_after_last_trim = free_now;  // reused since
  if (free_now < trimmed + kThresholdBytes) return 0;
  malloc_trim(0);
  free_after_last_trim = mallinfo2().fordblks;
  return free_now - trimmed;
}

}  // namespace mimicfs
