// SPDX-License-Identifier: Apache-2.0
#include "engine/layers/cost_layer.h"

#include <algorithm>

namespace mimicfs {

CostLayer::CostLayer(FileSystem& target, LatencyMode latency)
    : Layer(target),
      costs_(target.profile()),
      clock_(target.profile().queue_depth, latency),
      writeback_interval_ns_(target.profile().writeback_interval_ns),
      commit_interval_ns_(target.profile().commit_interval_ns) {
  std::lock_guard lock(schedule_mutex_);
  schedule_background(0);
}

void CostLayer::leave(const Call&, Work& work, int error) {
  Cost cost{0, work.fault_latency_ns};
  // It waited from the clock, not from the caller's own time, which may be behind it.
  if (work.waited_for_deferred) cost.host_ns += wait_for_worker();  // holds no device slot
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
  return uptime_offset_ns_ + clock_.total_ns();
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

void CostLayer::schedule_background(uint64_t now) {
  auto next = [now](uint64_t interval) { return interval == 0 ? 0 : (now / interval + 1) * interval; };
  next_flush_ns_ = next(writeback_interval_ns_);
  next_commit_ns_ = next(commit_interval_ns_);
  publish_next_wake();
}

void CostLayer::publish_next_wake() {
  uint64_t wake = std::numeric_limits<uint64_t>::max();
  for (const uint64_t at : {next_flush_ns_, next_commit_ns_}) {
    if (at != 0) wake = std::min(wake, at - std::min(at, uptime_offset_ns_));
  }
  next_wake_ns_.store(wake, std::memory_order_relaxed);
}

void CostLayer::run_background(Work& work) {
  if (clock_.total_ns() < next_wake_ns_.load(std::memory_order_relaxed)) return;
  bool flush = false, commit = false;
  uint64_t at = 0;
  {
    std::lock_guard lock(schedule_mutex_);
    const uint64_t now = uptime_offset_ns_ + clock_.total_ns();
    flush = next_flush_ns_ != 0 && now >= next_flush_ns_;
    commit = next_commit_ns_ != 0 && now >= next_commit_ns_;
    if (!flush && !commit) return;
    // At the latest wake the clock passed: an operation that took several
    // intervals wakes the threads once.
    const uint64_t grain = writeback_interval_ns_ != 0 ? writeback_interval_ns_ : commit_interval_ns_;
    at = now / grain * grain;
    schedule_background(now);
  }
  Work background;
  const BackgroundReport report = target().background(at, flush, commit, background);
  {
    std::lock_guard lock(schedule_mutex_);
    if (flush) ++background_.flusher_runs;
    background_.files_written_back += report.files_written_back;
    background_.bytes_written_back += report.bytes_written_back;
    if (report.committed) ++background_.commits;
    background_.files_committed += report.files_committed;
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
    s.background = background_;
    // On the clock's scale: what is left until them.
    const uint64_t offset = uptime_offset_ns_;
    auto on_clock = [offset](uint64_t uptime) {
      return uptime == 0 ? 0 : uptime - std::min(uptime, offset);
    };
    s.background.next_flush_ns = on_clock(next_flush_ns_);
    s.background.next_commit_ns = on_clock(next_commit_ns_);
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
    std::multimap<uint64_t, uint64_t> rebased;
    for (const auto& [due, id] : due_) rebased.emplace(due - std::min(due, now), id);
    due_ = std::move(rebased);
    worker_free_ns_ -= std::min(worker_free_ns_, now);
    task_ns_ = 0;
    // The kernel's threads keep their schedule: uptime goes on.
    uptime_offset_ns_ += now;
    background_ = {};  // the clock was reset under the lock: run_background never
                       // sees the offset without it
    publish_next_wake();  // the same wakes, on the new clock
  }
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
    // Nothing is dirty in a loaded volume; its threads wake on from its time.
    uptime_offset_ns_ = 0;
    background_ = {};
    schedule_background(clock_.total_ns());
  }
  // A file that becomes dirty from now on counts its age from the loaded time.
  if (writeback_interval_ns_ != 0) {
    Work none;
    const uint64_t now = clock_.total_ns();
    target().background(now / writeback_interval_ns_ * writeback_interval_ns_, false, false, none);
  }
  std::lock_guard lock(files_mutex_);
  file_ns_.clear();
  for (const auto& file : saved.at("files")) {
    file_ns_[file.at(0).get<uint64_t>()] = file.at(1).get<uint64_t>();
  }
}

}  // namespace mimicfs
