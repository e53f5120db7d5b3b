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
// and holds no engine lock; malloc_trim holds each arena's lock while it
// walks it, so an allocation may wait that long (milliseconds, once a second
// at most, only after large frees).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace mimicfs {

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
