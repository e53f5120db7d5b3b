// SPDX-License-Identifier: Apache-2.0
#include "engine/space/group_locks.h"

namespace mimicfs {

uint64_t GroupLocks::stamp() {
  std::lock_guard lock(mutex_);
  return first_allocations_;
}

uint64_t GroupLocks::first_allocation(const void* file, uint64_t group, uint64_t created) {
  std::lock_guard lock(mutex_);
  const bool held = holder_ != nullptr && holder_ != file && held_group_ == group &&
                    created <= held_stamp_;
  const uint64_t chosen = held ? (group + 1) % groups_ : group;
  holder_ = file;
  held_group_ = chosen;
  held_stamp_ = first_allocations_++;
  return chosen;
}

void GroupLocks::end_hold() {
  std::lock_guard lock(mutex_);
  holder_ = nullptr;
}

void GroupLocks::released(const void* file) {
  std::lock_guard lock(mutex_);
  if (holder_ == file) holder_ = nullptr;
}

}  // namespace mimicfs
