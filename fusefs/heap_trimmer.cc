// SPDX-License-Identifier: Apache-2.0
#include "fusefs/heap_trimmer.h"

#include <malloc.h>
#include <sys/sysinfo.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <utility>

#include "engine/data/page_run_memory.h"
#include "engine/time/timelines.h"  // Timelines::steady_ns, the engine's real clock

namespace mimicfs {
namespace {

uint64_t cpu_ns(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
}

// The CPU time of the process's other threads: the daemon's work, the
// trimmer's own left out (call on the trimmer's thread).
uint64_t work_cpu_ns() {
  const uint64_t own = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
  const uint64_t all = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
  return all > own ? all - own : 0;
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
  // An arena per CPU, not glibc's eight per CPU: each arena a thread used
  // keeps its live chunks scattered over its pages and a top malloc_trim
  // cannot give back, ~400 KiB for each of libfuse's workers (up to 16, as
  // many as a slow moment once needed). The threads calling malloc at once are at most one
  // per CPU, and tcache serves most of their small allocations without an
  // arena's lock.
  mallopt(M_ARENA_MAX, std::max(2, get_nprocs()));
  thread_ = std::thread([this] {
    TrimSchedule schedule(work_cpu_ns(), Timelines::steady_ns());
    std::unique_lock lock(mutex_);
    while (!stop_requested_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) {
      lock.unlock();
      if (schedule.due(work_cpu_ns(), Timelines::steady_ns())) {
        give_back();
        schedule.checked(work_cpu_ns(), Timelines::steady_ns());
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

void HeapTrimmer::give_back() {
  malloc_trim(0);
  const uint64_t runs = PageRunMemory::instance().kept_bytes();
  PageRunMemory::instance().trim();
  spdlog::debug("gave back malloc's free pages and {} bytes of saved-page runs", runs);
}

}  // namespace mimicfs
