// SPDX-License-Identifier: Apache-2.0
// Volume's durability: emulated writeback and journal commits over time, a
// sync of everything, and the power cut.
#include "engine/core/volume.h"

#include <spdlog/spdlog.h>

#include <map>
#include <random>

namespace mimicfs {

std::string Volume::path(uint64_t inode) { return namespace_.path(inode); }

uint64_t Volume::write_back_at_random(double fraction, uint64_t seed) {
  // Copy-on-write writes new data elsewhere and commits the switch: a crash
  // gives the old extent or the new one, never a page in part.
  if (profile_.copy_on_write) return 0;
  std::map<uint64_t, std::shared_ptr<Inode>> files;  // by number: the same draws every run
  {
    std::lock_guard lock(namespace_.mutex());
    for (const auto& [number, node] : namespace_.inodes()) {
      if (node->is_regular()) files.emplace(number, node);
    }
  }
  std::mt19937_64 random(seed);
  uint64_t bytes = 0;
  for (const auto& [number, node] : files) {
    std::lock_guard lock(node->mutex);
    bytes += node->file->persist_some(fraction, profile_.atomic_write_bytes, random);
  }
  return bytes;
}

std::vector<std::shared_ptr<Inode>> Volume::regular_files() {
  std::vector<std::shared_ptr<Inode>> files;
  std::lock_guard lock(namespace_.mutex());
  for (const auto& [number, node] : namespace_.inodes()) {
    if (node->is_regular()) files.push_back(node);
  }
  return files;
}

void Volume::sync_all(Work& work) {
  for (const std::shared_ptr<Inode>& node : regular_files()) {
    std::lock_guard lock(node->mutex);
    // A removed file a crash may still bring back keeps its last sync.
    if (node->nlink == 0 && node->pending_removals > 0) continue;
    const uint64_t blocks = node->file->space().blocks();
    node->file->sync(0, RegularFile::kMaxFileSize, work);
    note_blocks_change(*node, blocks, work);
  }
  namespace_.commit_all(work);
}

BackgroundReport Volume::background(uint64_t now_ns, bool flush, bool commit, Work& work) {
  BackgroundReport report;
  dirty_pages_.set_flusher_ns(now_ns);
  if (!flush && !commit) return report;
  const uint64_t bytes_before = work.device_writes.bytes;
  Namespace::Settled settled;
  bool namespace_committed = false;
  {
    // One point in time, as a journal commit is: no operation changes the
    // namespace or a file between the files' commit and the namespace's (the
    // crash's lock order: the namespace, then each file).
    std::lock_guard namespace_lock(namespace_.mutex());
    for (const auto& [number, node] : namespace_.inodes()) {
      if (!node->is_regular()) continue;
      std::lock_guard lock(node->mutex);
      // A removed file a crash may still bring back keeps its last sync (the
      // commit below settles its removal).
      if (node->nlink == 0 && node->pending_removals > 0) continue;
      const uint64_t blocks = node->file->space().blocks();
      if (flush && node->file->write_back_if_expired(now_ns, profile_.dirty_expire_ns, work)) {
        ++report.files_written_back;
        note_uncommitted_locked(*node);
      }
      if (commit && node->file->commit()) ++report.files_committed;
      note_blocks_change(*node, blocks, work);
    }
    report.bytes_written_back = work.device_writes.bytes - bytes_before;
    namespace_committed = commit && namespace_.commit_all_locked(settled);
  }
  namespace_.release_settled(settled, work);
  report.committed = report.files_committed > 0 || namespace_committed;
  return report;
}

CrashReport Volume::lose_unsynced(const std::vector<uint64_t>& files) {
  CrashReport report;
  // Under the namespace lock, as a power cut: never between its two passes.
  std::lock_guard lock(namespace_.mutex());
  for (const auto& [number, node] : namespace_.inodes()) {
    if (node->is_regular()) report.dropped_caches.push_back(number);
  }
  for (const uint64_t number : files) {
    const auto it = namespace_.inodes().find(number);
    if (it == namespace_.inodes().end() || !it->second->is_regular()) continue;
    const std::shared_ptr<Inode>& node = it->second;
    std::lock_guard node_lock(node->mutex);
    if (!node->file->power_cut()) continue;
    node->file->recover();
    report.restored_files.push_back(number);
  }
  spdlog::warn("client crash: {} files put back to their last sync", report.restored_files.size());
  return report;
}

CrashReport Volume::crash(Work& work) {
  CrashReport report;
  std::lock_guard lock(namespace_.mutex());
  // Log recovery finishes what background workers had not (xfs's unlinked
  // list); under the lock, so no operation queues a task meanwhile.
  deferred_.complete_all();
  if (GroupLocks* locks = space_.group_locks()) locks->end_hold();
  // Namespace changes since the last commit, newest first.
  report.removed_entries = namespace_.undo_uncommitted(work);
  // Files whose creation was undone: gone at once.
  for (const DeferredTask& task : work.deferred) deferred_.complete(task.id);
  work.deferred.clear();
  for (const auto& [number, node] : namespace_.inodes()) {
    if (!node->is_regular()) continue;
    std::lock_guard node_lock(node->mutex);
    report.dropped_caches.push_back(number);
    if (node->file->power_cut()) report.restored_files.push_back(number);
  }
  for (const uint64_t number : report.restored_files) {
    const std::shared_ptr<Inode>& node = namespace_.inodes().at(number);
    std::lock_guard node_lock(node->mutex);
    node->file->recover();
  }
  // Every file is durable as it is now: nothing is left for a commit to carry.
  for (const auto& [number, node] : namespace_.inodes()) {
    if (!node->is_regular()) continue;
    std::lock_guard node_lock(node->mutex);
    node->in_journal = false;
  }
  {
    std::lock_guard journal_lock(journal_mutex_);
    uncommitted_.clear();
  }
  crashes_.fetch_add(1);
  spdlog::warn("crash: {} files put back to their last sync, {} namespace entries put back",
               report.restored_files.size(), report.removed_entries.size());
  return report;
}

}  // namespace mimicfs
