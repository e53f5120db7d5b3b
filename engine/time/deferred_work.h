// SPDX-License-Identifier: Apache-2.0
// DeferredWork: work the core has promised and will finish later, as real
// filesystems do: xfs frees an unlinked file's extents in background inode
// inactivation workers (Linux 5.15 on), btrfs at transaction commit. An
// operation queues a task with the effect it will have (blocks freed) and
// reports it in its Work; the task completes, and its effect applies, when a
// layer above calls complete() (CostLayer: once the emulated clock has reached
// it), or at once on complete_all() (a crash: log recovery finishes it; `ctl
// settle`; an allocation that found no space: flush(), which also waits for the
// effects other threads are running). Until then the blocks stay allocated and
// the stats show the task (its bytes until its effect is done).
//
// Thread-safe: mutex_ is a leaf lock; an effect runs with no lock of this
// class held (it takes the inode's mutex and the allocator's).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "engine/base/thread_annotations.h"
#include "engine/fs/work.h"
#include "engine/stats/stats.h"

namespace mimicfs {

class DeferredWork {
 public:
  // Queues a task whose completion runs `effect`; fills in and returns its id.
  DeferredTask defer(DeferredTask task, std::function<void()> effect);
  // Completes pending task `id`: false if there is none (already completed).
  bool complete(uint64_t id);
  // Completes every pending task, oldest first; returns how many.
  size_t complete_all();
  // complete_all(), then waits until no effect is running on another thread:
  // afterwards every block a task was to free is free. Call with no lock held
  // that an effect takes (an inode's): xfs_inodegc_flush.
  void flush();
  // Tasks completed since the start (stats), and that count from a volume image.
  uint64_t completed() const EXCLUDES(mutex_);
  void set_completed(uint64_t count) EXCLUDES(mutex_);

  DeferredStats stats() const;

 private:
  struct Pending {
    DeferredTask task;
    std::function<void()> effect;
  };

  mutable std::mutex mutex_;
  std::map<uint64_t, Pending> pending_ GUARDED_BY(mutex_);  // by id
  uint64_t next_id_ GUARDED_BY(mutex_) = 1;
  uint64_t completed_ GUARDED_BY(mutex_) = 0;
  // Effects running now, and the bytes their tasks free (still in the stats).
  uint64_t running_ GUARDED_BY(mutex_) = 0;
  uint64_t running_bytes_ GUARDED_BY(mutex_) = 0;
  std::condition_variable finished_;
};

}  // namespace mimicfs
