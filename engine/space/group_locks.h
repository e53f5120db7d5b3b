// SPDX-License-Identifier: Apache-2.0
// GroupLocks: xfs's trylock pass over the allocation groups' free-space headers
// (the AGF), as the allocations of writers that start together meet it.
//
// An xfs data allocation (xfs_alloc_vextent_start_ag) first tries each group's
// AGF buffer with a trylock, from the goal's group on, and passes over a group
// whose AGF another transaction holds. Writers that start at the same moment
// meet there at their first allocation: one takes the goal's group, the next
// moves to the following group, and each file then grows near its own last
// block. Measured on a fresh 4 GiB xfs (4 groups), two O_SYNC writers of 128 MiB
// began in groups 0 and 1, one extent each; four began in groups 0, 1, 2 and
// 0, or in all four (docs/profiles.md, "Fidelity"). Their later allocations
// rarely meet: waiting on the log puts the writers out of step.
//
// The engine sees allocations one after another, so "at the same moment" is
// read from their order: a file's first allocation finds its group's AGF held
// when the volume's previous data allocation was another file's first, in that
// group, that file has not been closed since, and this file already existed
// then (both writers had their files before either allocated). The file then
// starts in the next group, its group from then on. Any other allocation ends
// the hold. A file created after another's first allocation follows it in the
// same group, as a writer that starts later does.
//
// Thread-safety: a leaf lock. Files are told apart by their FileSpace's
// address, which is compared, never followed.
#pragma once

#include <cstdint>
#include <mutex>

#include "engine/base/thread_annotations.h"

namespace mimicfs {

class GroupLocks {
 public:
  explicit GroupLocks(uint64_t groups) : groups_(groups == 0 ? 1 : groups) {}

  // When a file comes to exist: how many first allocations the volume has seen.
  uint64_t stamp() EXCLUDES(mutex_);
  // The first allocation of `file`, a file of `group` whose stamp() at its
  // creation was `created`: the group it goes to, recorded as held by it at
  // once (under one lock: two writers' first allocations cannot both miss the
  // other's). The allocation that follows cannot fail: its blocks are reserved.
  uint64_t first_allocation(const void* file, uint64_t group, uint64_t created) EXCLUDES(mutex_);
  // Any other allocation, or a power cut (no allocation is in progress after
  // one): nobody holds a group.
  void end_hold() EXCLUDES(mutex_);
  // `file` was closed or freed: it holds no group.
  void released(const void* file) EXCLUDES(mutex_);

 private:
  const uint64_t groups_;
  std::mutex mutex_;
  const void* holder_ GUARDED_BY(mutex_) = nullptr;  // whose first allocation holds a group
  uint64_t held_group_ GUARDED_BY(mutex_) = 0;
  uint64_t held_stamp_ GUARDED_BY(mutex_) = 0;  // first allocations before the holder's
  uint64_t first_allocations_ GUARDED_BY(mutex_) = 0;
};

}  // namespace mimicfs
