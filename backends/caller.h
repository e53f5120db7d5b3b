// Caller: the program an operation runs for, as the emulated clock tells
// programs apart (timelines.h): operations of one caller follow each other,
// those of two callers may overlap.
//
// The FUSE adapter sets it for the thread that serves a request (the calling
// thread's id the kernel passes, FUSE's pid); every Work made on that thread
// carries it (work.h). 0, the default, is the volume's own work, a test's or a
// request the kernel makes on no program's behalf: it starts after everything
// done, and every caller's next operation starts after it (timelines.h).
#pragma once

#include <cstdint>

namespace mimicfs {

class CallerScope {
 public:
  // Operations on this thread run for `caller` until the scope ends.
  explicit CallerScope(uint32_t caller) : saved_(current_) { current_ = caller; }
  ~CallerScope() { current_ = saved_; }
  CallerScope(const CallerScope&) = delete;
  CallerScope& operator=(const CallerScope&) = delete;

  static uint32_t current() { return current_; }

 private:
  static inline thread_local uint32_t current_ = 0;
  const uint32_t saved_;
};

}  // namespace mimicfs
