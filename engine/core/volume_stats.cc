// SPDX-License-Identifier: Apache-2.0
// Volume's statistics: per file, per device, the snapshot stats.json shows,
// and the device's layout.
#include "engine/core/volume.h"

namespace mimicfs {

FileStats Volume::file_stats_locked(const Inode& node) const {
  FileStats f = node.file ? node.file->stats() : FileStats{};
  f.inode = node.number;
  return f;
}

Result<FileStats> Volume::file_stats(uint64_t inode) {
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  return file_stats_locked(*node);
}

Result<std::vector<Extent>> Volume::file_extents(uint64_t inode) {
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  std::lock_guard lock(node->mutex);
  if (!node->file) return std::vector<Extent>{};
  return node->file->space().extents().all();
}

DeviceStats Volume::device_stats() const { return space_.stats(profile_.capacity_bytes); }

StatsSnapshot Volume::snapshot() {
  StatsSnapshot s;
  s.profile = profile_.name;
  s.device = device_stats();
  s.deferred = deferred_.stats();
  for (const std::shared_ptr<Inode>& node : regular_files()) {
    std::lock_guard lock(node->mutex);
    if (node->open_handles == 0) continue;
    s.open.handles += node->open_handles;
    ++s.open.files;
    if (node->nlink.load() > 0) continue;
    ++s.open.unlinked_files;
    s.open.unlinked_bytes += node->file->space().blocks() * unit_;
  }
  namespace_.for_each_file([&](const std::string& path, const Inode& node) {
    assert_held(node.mutex);
    s.files.emplace(path, file_stats_locked(node));
  });
  return s;
}

DeviceLayout Volume::layout() {
  DeviceLayout l;
  l.profile = profile_.name;
  l.device = device_stats();
  l.allocation_group_bytes = space_.allocator().group_blocks() * unit_;
  l.group_metadata_bytes = profile_.group_metadata_bytes;
  l.metadata = space_.allocator().metadata_ranges();
  namespace_.for_each_file([&](const std::string& path, const Inode& node) {
    assert_held(node.mutex);
    l.files.emplace(path,
                    FileLayout{node.number, node.file->size(), node.file->space().extents().all()});
  });
  return l;
}

}  // namespace mimicfs
