#include "backends/deferred_work.h"

namespace mimicfs {

DeferredTask DeferredWork::defer(DeferredTask task, std::function<void()> effect) {
  std::lock_guard lock(mutex_);
  task.id = next_id_++;
  pending_.emplace(task.id, Pending{task, std::move(effect)});
  return task;
}

bool DeferredWork::complete(uint64_t id) {
  std::function<void()> effect;
  {
    std::lock_guard lock(mutex_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return false;
    effect = std::move(it->second.effect);
    pending_.erase(it);
    ++completed_;
  }
  effect();
  return true;
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
