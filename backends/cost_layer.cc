#include "backends/cost_layer.h"

#include <algorithm>

namespace mimicfs {

CostLayer::CostLayer(FileSystem& target, LatencyMode latency)
    : Layer(target), costs_(target.profile()), clock_(target.profile().queue_depth, latency) {}

void CostLayer::leave(const Call&, Work& work, int error) {
  Cost cost{0, work.fault_latency_ns};
  if (work.waited_for_deferred) cost.host_ns += wait_for_worker();  // waits, holds no device slot
  if (error == 0) cost += costs_.of(work);
  const uint64_t total = cost.total();
  work.emulated_ns = total;
  if (total > 0 && work.file != 0 && error == 0) {
    std::lock_guard lock(files_mutex_);
    file_ns_[work.file] += total;
  }
  forget_destroyed(work);              // after: an unlink charges the file it destroys
  if (total > 0) clock_.charge(cost);  // may wait: no lock is held here
  if (!work.deferred.empty()) schedule(work);
  complete_due();
}

void CostLayer::schedule(const Work& work) {
  std::lock_guard lock(schedule_mutex_);
  for (const DeferredTask& task : work.deferred) {
    const uint64_t start = std::max(worker_free_ns_, clock_.total_ns());
    const uint64_t task_ns = costs_.of(task).total();
    worker_free_ns_ = start + task_ns;
    task_ns_ += task_ns;
    due_.emplace(worker_free_ns_, task.id);
  }
}

uint64_t CostLayer::wait_for_worker() {
  // The core completed the tasks; the operation waited until the worker would
  // have finished them. Their schedule entries complete nothing when reached.
  std::lock_guard lock(schedule_mutex_);
  const uint64_t now = clock_.total_ns();
  return worker_free_ns_ > now ? worker_free_ns_ - now : 0;
}

void CostLayer::complete_due() {
  for (;;) {
    uint64_t id;
    {
      std::lock_guard lock(schedule_mutex_);
      if (due_.empty() || due_.begin()->first > clock_.total_ns()) return;
      id = due_.begin()->second;
      due_.erase(due_.begin());
    }
    target().complete_deferred(id);  // false: a crash or settle completed it
  }
}

size_t CostLayer::complete_all_deferred() {
  {
    std::lock_guard lock(schedule_mutex_);
    due_.clear();
    worker_free_ns_ = clock_.total_ns();
  }
  return Layer::complete_all_deferred();
}

void CostLayer::forget(uint64_t inode, uint64_t references, Work& work) {
  Layer::forget(inode, references, work);
  forget_destroyed(work);
}

CrashReport CostLayer::crash(Work& work) {
  // The crash completes every task queued before it; one another thread queues
  // meanwhile stays scheduled.
  std::multimap<uint64_t, uint64_t> before;
  {
    std::lock_guard lock(schedule_mutex_);
    before = due_;
  }
  CrashReport report = Layer::crash(work);
  {
    std::lock_guard lock(schedule_mutex_);
    for (const auto& [due, id] : before) {
      auto [first, last] = due_.equal_range(due);
      for (auto it = first; it != last; ++it) {
        if (it->second == id) {
          due_.erase(it);
          break;
        }
      }
    }
    // Log recovery finished what the worker had left: it is free from now on.
    if (due_.empty()) worker_free_ns_ = std::min(worker_free_ns_, clock_.total_ns());
  }
  forget_destroyed(work);
  return report;
}

void CostLayer::forget_destroyed(const Work& work) {
  if (work.destroyed_inodes.empty()) return;
  std::lock_guard lock(files_mutex_);
  for (const uint64_t inode : work.destroyed_inodes) file_ns_.erase(inode);
}

uint64_t CostLayer::file_ns(uint64_t inode) {
  std::lock_guard lock(files_mutex_);
  auto it = file_ns_.find(inode);
  return it == file_ns_.end() ? 0 : it->second;
}

size_t CostLayer::tracked_files() {
  std::lock_guard lock(files_mutex_);
  return file_ns_.size();
}

StatsSnapshot CostLayer::snapshot() {
  StatsSnapshot s = Layer::snapshot();
  s.clock.mode = clock_.mode().to_string();
  s.clock.emulated_ns = clock_.total_ns();
  {
    std::lock_guard lock(schedule_mutex_);
    s.deferred.last_due_ns = due_.empty() ? 0 : due_.rbegin()->first;
    s.deferred.task_ns = task_ns_;
  }
  for (auto& [path, file] : s.files) file.emulated_ns = file_ns(file.inode);
  return s;
}

Result<FileStats> CostLayer::file_stats(uint64_t inode) {
  auto stats = Layer::file_stats(inode);
  if (stats) stats->emulated_ns = file_ns(inode);
  return stats;
}

void CostLayer::reset_statistics() {
  Layer::reset_statistics();
  {
    // Pending tasks keep the time they have left.
    std::lock_guard lock(schedule_mutex_);
    const uint64_t now = clock_.total_ns();
    std::multimap<uint64_t, uint64_t> rebased;
    for (const auto& [due, id] : due_) rebased.emplace(due - std::min(due, now), id);
    due_ = std::move(rebased);
    worker_free_ns_ -= std::min(worker_free_ns_, now);
    task_ns_ = 0;
  }
  clock_.reset();
  std::lock_guard lock(files_mutex_);
  file_ns_.clear();
}

nlohmann::json CostLayer::save() {
  nlohmann::json saved{{"emulated_ns", clock_.total_ns()}};
  {
    std::lock_guard lock(schedule_mutex_);
    saved["worker_free_ns"] = worker_free_ns_;
    saved["task_ns"] = task_ns_;
  }
  std::lock_guard lock(files_mutex_);
  nlohmann::json files = nlohmann::json::array();
  for (const auto& [inode, ns] : file_ns_) files.push_back({inode, ns});
  saved["files"] = std::move(files);
  return saved;
}

void CostLayer::load(const nlohmann::json& saved) {
  clock_.set_total(saved.at("emulated_ns").get<uint64_t>());
  {
    std::lock_guard lock(schedule_mutex_);
    due_.clear();
    worker_free_ns_ = saved.at("worker_free_ns").get<uint64_t>();
    task_ns_ = saved.value("task_ns", uint64_t{0});  // a statistic, newer than the format
  }
  std::lock_guard lock(files_mutex_);
  file_ns_.clear();
  for (const auto& file : saved.at("files")) {
    file_ns_[file.at(0).get<uint64_t>()] = file.at(1).get<uint64_t>();
  }
}

}  // namespace mimicfs
