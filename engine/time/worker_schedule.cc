// SPDX-License-Identifier: Apache-2.0
#include "engine/time/worker_schedule.h"

#include <algorithm>
#include <utility>

namespace mimicfs {

void WorkerSchedule::add(const std::vector<DeferredTask>& tasks, uint64_t now,
                         const CostModel& costs) {
  for (const DeferredTask& task : tasks) {
    const uint64_t start = std::max(free_ns_, now);
    const uint64_t ns = costs.of(task).total();
    free_ns_ = start + ns;
    task_ns_ += ns;
    due_.emplace(free_ns_, task.id);
  }
}

uint64_t WorkerSchedule::wait(uint64_t now) const { return free_ns_ > now ? free_ns_ - now : 0; }

std::optional<uint64_t> WorkerSchedule::take_due(uint64_t now) {
  if (due_.empty() || due_.begin()->first > now) return std::nullopt;
  const uint64_t id = due_.begin()->second;
  due_.erase(due_.begin());
  return id;
}

void WorkerSchedule::complete_all(uint64_t now) {
  due_.clear();
  free_ns_ = now;
}

void WorkerSchedule::completed(const std::multimap<uint64_t, uint64_t>& tasks, uint64_t now) {
  for (const auto& [due, id] : tasks) {
    auto [first, last] = due_.equal_range(due);
    for (auto it = first; it != last; ++it) {
      if (it->second == id) {
        due_.erase(it);
        break;
      }
    }
  }
  if (due_.empty()) free_ns_ = std::min(free_ns_, now);
}

void WorkerSchedule::rebase(uint64_t now) {
  std::multimap<uint64_t, uint64_t> rebased;
  for (const auto& [due, id] : due_) rebased.emplace(due - std::min(due, now), id);
  due_ = std::move(rebased);
  free_ns_ -= std::min(free_ns_, now);
  task_ns_ = 0;
}

void WorkerSchedule::save(nlohmann::json& saved) const {
  saved["worker_free_ns"] = free_ns_;
  saved["task_ns"] = task_ns_;
}

void WorkerSchedule::load(const nlohmann::json& saved) {
  due_.clear();
  free_ns_ = saved.at("worker_free_ns").get<uint64_t>();
  task_ns_ = saved.value("task_ns", uint64_t{0});  // a statistic, newer than the format
}

}  // namespace mimicfs
