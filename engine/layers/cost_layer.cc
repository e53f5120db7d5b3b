// SPDX-License-Identifier: Apache-2.0
#include "engine/layers/cost_layer.h"

#include <optional>
#include <variant>

namespace mimicfs {

CostLayer::CostLayer(FileSystem& target, LatencyMode latency)
    : Layer(target),
      costs_(target.profile()),
      clock_(target.profile().queue_depth, latency),
      threads_(target.profile().writeback_interval_ns, target.profile().commit_interval_ns) {
  std::lock_guard lock(schedule_mutex_);
  publish_next_wake();
}

void CostLayer::leave(const Call&, Work& work, int error) {
  Cost cost{0, work.fault_latency_ns};
  // It waited from the clock, not from the caller's own time, which may be behind it.
  if (work.waited_for_deferred) {
    // The core completed the tasks; the operation waited until the worker
    // would have finished them. Their schedule's entries complete nothing.
    std::lock_guard lock(schedule_mutex_);
    cost.host_ns += worker_.wait(clock_.total_ns());  // holds no device slot
  }
  if (error == 0) cost += costs_.of(work);
  const uint64_t total = cost.total();
  work.emulated_ns = total;
  if (total > 0 && work.file != 0 && error == 0) {
    std::lock_guard lock(files_mutex_);
    file_ns_[work.file] += total;
  }
  forget_destroyed(work);              // after: an unlink charges the file it destroys
  clock_.charge(cost, work.caller, work.waited_for_deferred);  // may wait: no lock held
  if (!work.deferred.empty()) schedule(work);
  complete_due();
  run_background(work);
}

uint64_t CostLayer::elapsed_ns() const {
  const LatencyMode mode = clock_.mode();
  if (!mode.real) return clock_.total_ns();
  return static_cast<uint64_t>(static_cast<double>(Timelines::steady_ns()) / mode.scale);
}

uint64_t CostLayer::uptime_ns() {
  if (clock_.mode().real) return elapsed_ns();
  std::lock_guard lock(schedule_mutex_);
  return threads_.uptime_ns(clock_.total_ns());
}

void CostLayer::charge_wait(const Work& work) {
  // From the clock: the wait ends when the server's state it waited for
  // comes, whatever the caller's own time.
  if (work.fault_latency_ns > 0) {
    clock_.charge(Cost{0, work.fault_latency_ns}, work.caller, /*at_clock=*/true);
  }
}

void CostLayer::advance(uint64_t ns, Work& work) {
  clock_.advance(ns);
  complete_due();
  run_background(work);
}

void CostLayer::publish_next_wake() {
  next_wake_ns_.store(threads_.next_wake_on_clock(), std::memory_order_relaxed);
}

void CostLayer::run_background(Work& work) {
  if (clock_.total_ns() < next_wake_ns_.load(std::memory_order_relaxed)) return;
  std::optional<KernelThreads::Wake> wake;
  {
    std::lock_guard lock(schedule_mutex_);
    wake = threads_.wake(clock_.total_ns());
    if (!wake) return;
    publish_next_wake();
  }
  Work background;
  const BackgroundReport report =
      target().background(wake->at_ns, wake->flush, wake->commit, background);
  {
    std::lock_guard lock(schedule_mutex_);
    threads_.ran(*wake, report);
  }
  // A removal the commit settled may queue its reclaim.
  if (!background.deferred.empty()) schedule(background);
  forget_destroyed(background);
  work.changed_attributes.insert(work.changed_attributes.end(),
                                 background.changed_attributes.begin(),
                                 background.changed_attributes.end());
}

void CostLayer::schedule(const Work& work) {
  std::lock_guard lock(schedule_mutex_);
  worker_.add(work.deferred, clock_.total_ns(), costs_);
}

void CostLayer::complete_due() {
  for (;;) {
    std::optional<uint64_t> id;
    {
      std::lock_guard lock(schedule_mutex_);
      id = worker_.take_due(clock_.total_ns());
    }
    if (!id) return;
    target().complete_deferred(*id);  // false: a crash or settle completed it
  }
}

size_t CostLayer::complete_all_deferred() {
  {
    std::lock_guard lock(schedule_mutex_);
    worker_.complete_all(clock_.total_ns());
  }
  return Layer::complete_all_deferred();
}

OperationReply CostLayer::dispatch(const Operation& operation, Work& work) {
  OperationReply reply = Layer::dispatch(operation, work);
  if (std::holds_alternative<ops::Forget>(operation)) forget_destroyed(work);
  return reply;
}

CrashReport CostLayer::crash(Work& work) {
  // The crash completes every task queued before it; one another thread queues
  // meanwhile stays scheduled.
  std::multimap<uint64_t, uint64_t> before;
  {
    std::lock_guard lock(schedule_mutex_);
    before = worker_.pending();
  }
  CrashReport report = Layer::crash(work);
  {
    std::lock_guard lock(schedule_mutex_);
    worker_.completed(before, clock_.total_ns());
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
    s.deferred.last_due_ns = worker_.last_due_ns();
    s.deferred.task_ns = worker_.task_ns();
    s.background = threads_.stats();
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
    // The clock starts again at 0; `now` is where it was, however an operation
    // on another thread moved it meanwhile.
    const uint64_t now = clock_.reset();
    worker_.rebase(now);
    // The kernel's threads keep their schedule: uptime goes on. The clock was
    // reset under the lock: run_background never sees the offset without it.
    threads_.clock_reset(now);
    publish_next_wake();  // the same wakes, on the new clock
  }
  std::lock_guard lock(files_mutex_);
  file_ns_.clear();
}

nlohmann::json CostLayer::save() {
  nlohmann::json saved{{"emulated_ns", clock_.total_ns()}};
  {
    std::lock_guard lock(schedule_mutex_);
    worker_.save(saved);
  }
  std::lock_guard lock(files_mutex_);
  nlohmann::json files = nlohmann::json::array();
  for (const auto& [inode, ns] : file_ns_) files.push_back({inode, ns});
  saved["files"] = std::move(files);
  return saved;
}

void CostLayer::load(const nlohmann::json& saved) {
  clock_.set_total(saved.at("emulated_ns").get<uint64_t>());
  std::optional<uint64_t> flusher_wake;
  {
    std::lock_guard lock(schedule_mutex_);
    worker_.load(saved);
    flusher_wake = threads_.restart(clock_.total_ns());
    publish_next_wake();
  }
  // A file that becomes dirty from now on counts its age from the loaded time.
  if (flusher_wake) {
    Work none;
    target().background(*flusher_wake, false, false, none);
  }
  std::lock_guard lock(files_mutex_);
  file_ns_.clear();
  for (const auto& file : saved.at("files")) {
    file_ns_[file.at(0).get<uint64_t>()] = file.at(1).get<uint64_t>();
  }
}

}  // namespace mimicfs
