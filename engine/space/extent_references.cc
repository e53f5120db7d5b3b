// SPDX-License-Identifier: Apache-2.0
#include "engine/space/extent_references.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace mimicfs {

void ExtentReferences::add(BlockRange allocated) {
  std::lock_guard lock(mutex_);
  for (uint64_t done = 0; done < allocated.length;) {
    const uint64_t length = max_extent_blocks_ == 0
                                ? allocated.length - done
                                : std::min(max_extent_blocks_, allocated.length - done);
    extents_.emplace(allocated.start + done, DataExtent{length, {}});
    done += length;
  }
}

std::vector<BlockRange> ExtentReferences::drop(BlockRange unreferenced) {
  std::lock_guard lock(mutex_);
  std::vector<BlockRange> freed;
  uint64_t position = unreferenced.start;
  const uint64_t end = unreferenced.start + unreferenced.length;
  while (position < end) {
    auto it = extents_.upper_bound(position);
    if (it == extents_.begin() || std::prev(it)->first + std::prev(it)->second.length <= position) {
      throw std::logic_error(
          fmt::format("ExtentReferences::drop: block {} is in no data extent", position));
    }
    --it;
    DataExtent& extent = it->second;
    const uint64_t overlap = std::min(end, it->first + extent.length) - position;
    if (extent.unreferenced.overlaps(position, overlap)) {
      throw std::logic_error(
          fmt::format("ExtentReferences::drop: blocks {}+{} of the extent at {} dropped twice",
                      position, overlap, it->first));
    }
    extent.unreferenced.add(position, overlap);
    unreferenced_blocks_ += overlap;
    if (extent.unreferenced.blocks() == extent.length) {
      unreferenced_blocks_ -= extent.length;
      freed.push_back({it->first, extent.length});
      extents_.erase(it);
    }
    position += overlap;
  }
  return freed;
}

std::vector<BlockRange> ExtentReferences::take_back(BlockRange range) {
  std::lock_guard lock(mutex_);
  std::vector<BlockRange> rest;
  auto keep_rest = [&](uint64_t start, uint64_t length) {
    if (length == 0) return;
    if (!rest.empty() && rest.back().start + rest.back().length == start) {
      rest.back().length += length;
    } else {
      rest.push_back({start, length});
    }
  };
  uint64_t position = range.start;
  const uint64_t end = range.start + range.length;
  while (position < end) {
    auto it = extents_.upper_bound(position);
    // The data extent containing `position`, else the next one (or none).
    if (it == extents_.begin() || std::prev(it)->first + std::prev(it)->second.length <= position) {
      const uint64_t next = it == extents_.end() ? end : std::min(end, it->first);
      keep_rest(position, next - position);
      position = next;
      continue;
    }
    --it;
    DataExtent& extent = it->second;
    const uint64_t overlap = std::min(end, it->first + extent.length) - position;
    uint64_t cursor = position;
    for (const BlockRange& free_part : extent.unreferenced.overlapping(position, overlap)) {
      keep_rest(cursor, free_part.start - cursor);  // referenced: another file's now
      extent.unreferenced.remove(free_part.start, free_part.length);
      unreferenced_blocks_ -= free_part.length;
      cursor = free_part.start + free_part.length;
    }
    keep_rest(cursor, position + overlap - cursor);
    position += overlap;
  }
  return rest;
}

uint64_t ExtentReferences::unreferenced_blocks() const {
  std::lock_guard lock(mutex_);
  return unreferenced_blocks_;
}

uint64_t ExtentReferences::data_extent_count() const {
  std::lock_guard lock(mutex_);
  return extents_.size();
}

ImageJson ExtentReferences::save() const {
  std::lock_guard lock(mutex_);
  // Per data extent: start, length, k, then k (start, length) runs no file refers to.
  std::vector<uint64_t> numbers;
  for (const auto& [start, extent] : extents_) {
    numbers.insert(numbers.end(), {start, extent.length, extent.unreferenced.ranges().size()});
    for (const auto& [from, length] : extent.unreferenced.ranges()) {
      numbers.insert(numbers.end(), {from, length});
    }
  }
  return pack_numbers(numbers);
}

void ExtentReferences::load(const ImageJson& saved) {
  const std::vector<uint64_t> numbers = unpack_numbers(saved);
  std::lock_guard lock(mutex_);
  extents_.clear();
  unreferenced_blocks_ = 0;
  for (size_t i = 0; i < numbers.size();) {
    if (numbers.size() - i < 3 || (numbers.size() - i - 3) / 2 < numbers[i + 2]) {
      throw ImageError("the saved copy-on-write extents are cut short");
    }
    const uint64_t start = numbers[i];
    if (extents_.contains(start)) throw ImageError("a copy-on-write extent is saved twice");
    DataExtent& extent = extents_[start];
    extent.length = numbers[i + 1];
    const uint64_t runs = numbers[i + 2];
    i += 3;
    for (uint64_t r = 0; r < runs; ++r, i += 2) {
      if (numbers[i] < start || numbers[i + 1] > extent.length ||
          numbers[i] - start > extent.length - numbers[i + 1]) {
        throw ImageError("a copy-on-write extent's unreferenced blocks lie outside it");
      }
      unreferenced_blocks_ += extent.unreferenced.add(numbers[i], numbers[i + 1]);
    }
  }
}

std::vector<BlockRange> ExtentReferences::data_extents() const {
  std::lock_guard lock(mutex_);
  std::vector<BlockRange> ranges;
  ranges.reserve(extents_.size());
  for (const auto& [start, extent] : extents_) ranges.push_back({start, extent.length});
  return ranges;
}

}  // namespace mimicfs
