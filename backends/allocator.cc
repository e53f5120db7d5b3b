#include "backends/allocator.h"

#include <fmt/format.h>

#include <stdexcept>

namespace mimicfs {

Allocator::Allocator(uint64_t total_blocks) : total_blocks_(total_blocks) {
  if (total_blocks > 0) add_free(0, total_blocks);
}

void Allocator::add_free(uint64_t start, uint64_t length) {
  free_by_start_.emplace(start, length);
  free_by_length_.emplace(length, start);
  free_blocks_ += length;
}

void Allocator::remove_free(std::map<uint64_t, uint64_t>::iterator it) {
  free_by_length_.erase({it->second, it->first});
  free_blocks_ -= it->second;
  free_by_start_.erase(it);
}

Result<std::vector<BlockRange>> Allocator::allocate(uint64_t goal, uint64_t count) {
  std::lock_guard lock(mutex_);
  std::vector<BlockRange> runs;
  if (count == 0) return runs;
  if (count > free_blocks_) return fail(ENOSPC);
  uint64_t position = total_blocks_ == 0 ? 0 : goal % total_blocks_;
  while (count > 0) {
    // The free extent containing `position`, else the first one after it, else wrap.
    auto it = free_by_start_.upper_bound(position);
    uint64_t take_from;
    if (it != free_by_start_.begin() && std::prev(it)->first + std::prev(it)->second > position) {
      --it;
      take_from = position;
    } else {
      if (it == free_by_start_.end()) it = free_by_start_.begin();
      take_from = it->first;
    }
    const uint64_t extent_start = it->first;
    const uint64_t extent_end = it->first + it->second;
    const uint64_t taken = std::min(count, extent_end - take_from);
    remove_free(it);
    if (extent_start < take_from) add_free(extent_start, take_from - extent_start);
    if (take_from + taken < extent_end) add_free(take_from + taken, extent_end - take_from - taken);

    if (!runs.empty() && runs.back().start + runs.back().length == take_from) {
      runs.back().length += taken;
    } else {
      runs.push_back({take_from, taken});
    }
    count -= taken;
    position = take_from + taken;
  }
  cursor_ = position;
  return runs;
}

void Allocator::release(BlockRange range) {
  if (range.length == 0) return;
  std::lock_guard lock(mutex_);
  uint64_t start = range.start;
  uint64_t length = range.length;
  auto next = free_by_start_.lower_bound(start);
  if (next != free_by_start_.end() && next->first < start + length) {
    throw std::logic_error(
        fmt::format("Allocator::release: blocks {}+{} are already free", start, length));
  }
  if (next != free_by_start_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second > start) {
      throw std::logic_error(
          fmt::format("Allocator::release: blocks {}+{} are already free", start, length));
    }
    if (prev->first + prev->second == start) {
      start = prev->first;
      length += prev->second;
      remove_free(prev);
    }
  }
  if (next != free_by_start_.end() && next->first == range.start + range.length) {
    length += next->second;
    remove_free(next);
  }
  add_free(start, length);
}

uint64_t Allocator::cursor() const {
  std::lock_guard lock(mutex_);
  return cursor_;
}

uint64_t Allocator::free_blocks() const {
  std::lock_guard lock(mutex_);
  return free_blocks_;
}

FreeSpaceSummary Allocator::summary() const {
  std::lock_guard lock(mutex_);
  FreeSpaceSummary s;
  s.total_blocks = total_blocks_;
  s.free_blocks = free_blocks_;
  s.free_extents = free_by_start_.size();
  s.largest_free_extent = free_by_length_.empty() ? 0 : free_by_length_.rbegin()->first;
  return s;
}

}  // namespace mimicfs
