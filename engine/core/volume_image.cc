// SPDX-License-Identifier: Apache-2.0
// Volume's image: what a --data-dir volume saves at unmount, loads at the
// next mount, and checks before it trusts it.
#include "engine/core/volume.h"

#include <fmt/format.h>

namespace mimicfs {

ImageJson Volume::save_image() {
  Work work;
  // Handles still open (a lazy unmount, a signal) end here, as at eviction:
  // the last close's trim and reservation, and an unlinked file's storage.
  for (const std::shared_ptr<Inode>& node : regular_files()) {
    std::lock_guard lock(node->mutex);
    if (node->open_handles == 0) continue;
    node->open_handles = 0;
    node->file->close(work);
    if (node->nlink.load() == 0) free_storage_locked(node, work);
  }
  deferred_.complete_all();
  sync_all(work);
  deferred_.complete_all();  // what the sync settled may queue more
  ImageJson image{{"namespace", namespace_.save()},
                  {"device", space_.save()},
                  {"crashes", crashes_.load()},
                  {"deferred_completed", deferred_.completed()}};
  check_image(image);
  return image;
}

void Volume::load_image(const ImageJson& image) {
  space_.load(image.at("device"));
  namespace_.load(image.at("namespace"), [this](uint64_t group, const ImageJson& saved) {
    const std::string key = saved.at("contents").get<std::string>();
    std::unique_ptr<FileData> contents;
    if (key.empty()) {
      contents = store_->create_file();
    } else {
      auto reopened = store_->reopen_file(key);
      if (!reopened) throw ImageError(reopened.error());
      contents = std::move(*reopened);
    }
    auto file = std::make_unique<RegularFile>(profile_, space_, dirty_pages_, group,
                                              std::move(contents));
    file->load(saved);
    return file;
  });
  crashes_ = image.at("crashes").get<uint64_t>();
  deferred_.set_completed(image.at("deferred_completed").get<uint64_t>());
  check_image(image);
}

void Volume::check_image(const ImageJson& image) {
  // Every block of the device once: free, group metadata, or a file's (its
  // extents and reservation window; on btrfs the data extents, which the
  // files' extents lie in). Delayed blocks are the reservations.
  BlockRangeSet used;
  uint64_t used_blocks = 0, delayed_blocks = 0;
  auto use = [&](uint64_t start, uint64_t length) {
    const uint64_t total = space_.allocator().summary().total_blocks;
    if (length == 0 || start >= total || length > total - start) {
      throw ImageError("a block range lies past the end of the device");
    }
    if (used.add(start, length) != length) throw ImageError("two owners of one device block");
    used_blocks += length;
  };
  const bool cow = space_.copy_on_write();
  if (cow) {
    for (const BlockRange& extent : space_.data_extents()) use(extent.start, extent.length);
  }
  std::lock_guard table_lock(namespace_.mutex());
  for (const auto& [number, node] : namespace_.inodes()) {
    if (!node->is_regular()) continue;
    std::lock_guard lock(node->mutex);
    const FileSpace& space = node->file->space();
    delayed_blocks += space.delayed_blocks();
    for (const Extent& e : space.extents().all()) {
      if (!cow) {
        use(e.physical, e.length);
      } else if (used.overlapping(e.physical, e.length).size() != 1 ||
                 used.overlapping(e.physical, e.length).front().length != e.length) {
        throw ImageError("a file's extent lies outside the device's data extents");
      }
    }
    if (const BlockRange window = space.reservation_window(); window.length > 0) {
      use(window.start, window.length);
    }
  }
  const FreeSpaceSummary free = space_.allocator().summary();
  BlockRangeSet metadata;
  for (const BlockRange& range : space_.allocator().metadata_ranges()) {
    if (used.overlaps(range.start, range.length)) {
      throw ImageError("a file's block lies in a group's metadata");
    }
    metadata.add(range.start, range.length);
  }
  for (const BlockRange& range : space_.allocator().free_ranges()) {
    if (used.overlaps(range.start, range.length)) {
      throw ImageError("a block is both free and in use");
    }
    if (metadata.overlaps(range.start, range.length)) {
      throw ImageError("a group's metadata is free");
    }
  }
  if (used_blocks + free.free_blocks + free.metadata_blocks != free.total_blocks) {
    throw ImageError(fmt::format("the device's blocks do not add up: {} used, {} free, {} "
                                 "metadata, {} in all",
                                 used_blocks, free.free_blocks, free.metadata_blocks,
                                 free.total_blocks));
  }
  if (delayed_blocks != free.reserved_blocks) {
    throw ImageError("the delayed blocks are not the blocks reserved");
  }
  (void)image;
}

}  // namespace mimicfs
