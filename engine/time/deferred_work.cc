// SPDX-License-Identifier: Apache-2.0
#include "engine/time/deferred_work.h"

namespace mimicfs {

DeferredTask DeferredWork::defer(DeferredTask task, std::function<void()> effect) {
  std::lock_guard lock(mutex_);
  task.id = next_id_++;
  pending_.emplace(task.id, Pending{task, std::move(effect)});
  return task;
}

bool DeferredWork::complete(uint64_t id) {
  std::function<void()> effect;
  uint64_t bytes = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return false;
    effect = std::move(it->second.effect);
    bytes = it->second.task.bytes;
    pending_.erase(it);
    ++completed_;
    ++running_;
    running_bytes_ += bytes;
  }
  struct Finished {
    DeferredWork& work;
    uint64_t bytes;
    ~Finished() {
      {
        std::lock_guard lock(work.mutex_);
        --work.running_;
        work.running_bytes_ -= bytes;
      }
      work.finished_.notify_all();
    }
  } finished{*this, bytes};
  effect();
  return true;
}

void DeferredWork::flush() {
  complete_all();
  std::unique_lock lock(mutex_);  // for the condition variable: the analysis
  assert_held(mutex_);            // sees lock_guard's only
  while (running_ != 0) finished_.wait(lock);
}

size_t DeferredWork::complete_all() {
  size_t done = 0;
  for (;;) {
    uint64_t id;
    {
      std::lock_guard lock(mutex_);
      if (pending_.empty()) return done;
      id = pending_.begin()->first;
    }
    if (complete(id)) ++done;
  }
}

DeferredStats DeferredWork::stats() const {
  std::lock_guard lock(mutex_);
  DeferredStats s;
  s.pending_tasks = pending_.size();
  s.completed_tasks = completed_;
  s.pending_free_bytes = running_bytes_;
  for (const auto& [id, pending] : pending_) s.pending_free_bytes += pending.task.bytes;
  return s;
}

uint64_t DeferredWork::completed() const {
  std::lock_guard lock(mutex_);
  return completed_;
}

void DeferredWork::set_completed(uint64_t count) {
  std::lock_guard lock(mutex_);
  completed_ = count;
}

}  // namespace mimicfs
