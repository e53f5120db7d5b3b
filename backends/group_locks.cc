#include "backends/group_locks.h"

namespace mimicfs {

uint64_t GroupLocks::stamp() {
  std::lock_guard lock(mutex_);
  return first_allocations_;
}

uint64_t GroupLocks::group_for_first_allocation(const void* file, uint64_t group,
                                                uint64_t created) {
  std::lock_guard lock(mutex_);
  const bool held = holder_ != nullptr && holder_ != file && held_group_ == group &&
                    created <= held_stamp_;
  return held ? (group + 1) % groups_ : group;
}

void GroupLocks::allocated(const void* file, uint64_t group, bool first) {
  std::lock_guard lock(mutex_);
  if (!first) {
    holder_ = nullptr;
    return;
  }
  holder_ = file;
  held_group_ = group;
  held_stamp_ = first_allocations_++;
}

void GroupLocks::released(const void* file) {
  std::lock_guard lock(mutex_);
  if (holder_ == file) holder_ = nullptr;
}

}  // namespace mimicfs
