// SPDX-License-Identifier: Apache-2.0
#include "engine/space/block_range_set.h"

#include <algorithm>

namespace mimicfs {

uint64_t BlockRangeSet::add(uint64_t start, uint64_t length) {
  if (length == 0) return 0;
  const uint64_t before = blocks_;
  uint64_t new_start = start;
  uint64_t new_end = start + length;
  // Absorb every range that overlaps or touches [start, end).
  auto it = ranges_.upper_bound(start);
  if (it != ranges_.begin() && std::prev(it)->first + std::prev(it)->second >= start) --it;
  while (it != ranges_.end() && it->first <= new_end) {
    new_start = std::min(new_start, it->first);
    new_end = std::max(new_end, it->first + it->second);
    blocks_ -= it->second;
    it = ranges_.erase(it);
  }
  ranges_.emplace(new_start, new_end - new_start);
  blocks_ += new_end - new_start;
  return blocks_ - before;
}

uint64_t BlockRangeSet::remove(uint64_t start, uint64_t length) {
  if (length == 0) return 0;
  const uint64_t end = start + length;
  uint64_t removed = 0;
  auto it = ranges_.upper_bound(start);
  if (it != ranges_.begin() && std::prev(it)->first + std::prev(it)->second > start) --it;
  while (it != ranges_.end() && it->first < end) {
    const uint64_t range_start = it->first;
    const uint64_t range_end = it->first + it->second;
    removed += std::min(range_end, end) - std::max(range_start, start);
    blocks_ -= range_end - range_start;
    // A part before `start` stays in place, shortened; else the range goes.
    // Only the iterators an insert or erase returns stay valid (a B-tree).
    if (range_start < start) {
      it->second = start - range_start;
      blocks_ += start - range_start;
      ++it;
    } else {
      it = ranges_.erase(it);
    }
    if (range_end > end) {
      it = std::next(ranges_.emplace_hint(it, end, range_end - end));
      blocks_ += range_end - end;
    }
  }
  return removed;
}

std::vector<BlockRange> BlockRangeSet::overlapping(uint64_t start, uint64_t length) const {
  std::vector<BlockRange> found;
  const uint64_t end = start + length;
  auto it = ranges_.upper_bound(start);
  if (it != ranges_.begin() && std::prev(it)->first + std::prev(it)->second > start) --it;
  for (; it != ranges_.end() && it->first < end; ++it) {
    const uint64_t s = std::max(it->first, start);
    const uint64_t e = std::min(it->first + it->second, end);
    found.push_back({s, e - s});
  }
  return found;
}

bool BlockRangeSet::overlaps(uint64_t start, uint64_t length) const {
  // overlapping()'s first range, if any.
  auto it = ranges_.upper_bound(start);
  if (it != ranges_.begin() && std::prev(it)->first + std::prev(it)->second > start) --it;
  return it != ranges_.end() && it->first < start + length;
}

std::vector<BlockRange> BlockRangeSet::gaps(uint64_t start, uint64_t length) const {
  std::vector<BlockRange> found;
  uint64_t cursor = start;
  for (const BlockRange& r : overlapping(start, length)) {
    if (r.start > cursor) found.push_back({cursor, r.start - cursor});
    cursor = r.start + r.length;
  }
  if (cursor < start + length) found.push_back({cursor, start + length - cursor});
  return found;
}

std::optional<BlockRange> BlockRangeSet::at_or_after(uint64_t block) const {
  auto it = ranges_.upper_bound(block);
  if (it != ranges_.begin() && std::prev(it)->first + std::prev(it)->second > block) --it;
  if (it == ranges_.end()) return std::nullopt;
  return BlockRange{it->first, it->second};
}

ImageJson BlockRangeSet::save() const {
  std::vector<uint64_t> numbers;
  numbers.reserve(ranges_.size() * 2);
  for (const auto& [start, length] : ranges_) numbers.insert(numbers.end(), {start, length});
  return pack_numbers(numbers);
}

void BlockRangeSet::load(const ImageJson& saved) {
  clear();
  const std::vector<uint64_t> numbers = unpack_numbers(saved, 2);
  for (size_t i = 0; i < numbers.size(); i += 2) add(numbers[i], numbers[i + 1]);
}

}  // namespace mimicfs
