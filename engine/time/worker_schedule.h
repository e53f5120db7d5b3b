// SPDX-License-Identifier: Apache-2.0
// WorkerSchedule: when the volume's one background worker finishes each task
// the core deferred (DeferredWork: xfs's inode inactivation) in emulated time.
// The tasks run one after another, each from when it was queued or the one
// before it ended, whichever is later; a task completes when the clock reaches
// its end.
//
// Not thread-safe: CostLayer guards it with the lock under which the clock is
// reset, so that a reset and the tasks' times move together.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/fs/work.h"
#include "engine/time/cost_model.h"

namespace mimicfs {

class WorkerSchedule {
 public:
  // Queues `tasks` with the clock at `now`, each taking what `costs` prices it.
  void add(const std::vector<DeferredTask>& tasks, uint64_t now, const CostModel& costs);
  // How long an operation at `now` waits until the worker has done all it has.
  uint64_t wait(uint64_t now) const;
  // The first task whose end `now` has reached, taken off the schedule.
  std::optional<uint64_t> take_due(uint64_t now);
  // The core completed every task at `now` (`ctl settle`): the worker is free.
  void complete_all(uint64_t now);
  // The tasks scheduled now (end -> id).
  std::multimap<uint64_t, uint64_t> pending() const { return due_; }
  // A crash at `now` completed `tasks` (pending() before it); those queued
  // meanwhile stay. With none left, log recovery has freed the worker.
  void completed(const std::multimap<uint64_t, uint64_t>& tasks, uint64_t now);
  // The clock starts again at 0 from `now`: the tasks keep the time they have left.
  void rebase(uint64_t now);

  // stats.json's deferred.last_due_ns: when the last task ends (0: none).
  uint64_t last_due_ns() const { return due_.empty() ? 0 : due_.rbegin()->first; }
  // deferred.task_ns: the worker's time for every task queued since the last reset.
  uint64_t task_ns() const { return task_ns_; }

  // For a volume image, with no task pending (the volume settled first).
  void save(nlohmann::json& saved) const;
  void load(const nlohmann::json& saved);

 private:
  std::multimap<uint64_t, uint64_t> due_;  // emulated ns -> task id
  uint64_t free_ns_ = 0;                   // when the worker has done all it has
  uint64_t task_ns_ = 0;
};

}  // namespace mimicfs
