#include "backends/cost_layer.h"

namespace mimicfs {

CostLayer::CostLayer(FileSystem& target, LatencyMode latency)
    : Layer(target), costs_(target.profile()), clock_(target.profile().queue_depth, latency) {}

void CostLayer::leave(const Call&, Work& work, int error) {
  Cost cost{0, work.fault_latency_ns};
  if (error == 0) cost += costs_.of(work);
  const uint64_t total = cost.total();
  work.emulated_ns = total;
  if (total > 0 && work.file != 0 && error == 0) {
    std::lock_guard lock(files_mutex_);
    file_ns_[work.file] += total;
  }
  forget_destroyed(work);              // after: an unlink charges the file it destroys
  if (total > 0) clock_.charge(cost);  // may wait: no lock is held here
}

void CostLayer::forget(uint64_t inode, uint64_t references, Work& work) {
  Layer::forget(inode, references, work);
  forget_destroyed(work);
}

CrashReport CostLayer::crash(Work& work) {
  CrashReport report = Layer::crash(work);
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
  clock_.reset();
  std::lock_guard lock(files_mutex_);
  file_ns_.clear();
}

}  // namespace mimicfs
