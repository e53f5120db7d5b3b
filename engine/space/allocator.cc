// SPDX-License-Identifier: Apache-2.0
#include "engine/space/allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>

namespace mimicfs {

Allocator::Allocator(DeviceGeometry geometry, ExtentRules rules)
    : total_blocks_(geometry.total_blocks),
      group_blocks_(geometry.group_blocks == 0 || geometry.group_blocks > geometry.total_blocks
                        ? std::max<uint64_t>(geometry.total_blocks, 1)
                        : geometry.group_blocks),
      rules_(rules),
      group_starts_(std::move(geometry.group_starts)),
      metadata_(std::move(geometry.metadata)) {
  if (group_starts_.empty()) {
    for (uint64_t start = 0; start < std::max<uint64_t>(total_blocks_, 1); start += group_blocks_) {
      group_starts_.push_back(start);
    }
  } else if (group_starts_.front() != 0 ||
             !std::is_sorted(group_starts_.begin(), group_starts_.end(), std::less_equal<>()) ||
             group_starts_.back() >= std::max<uint64_t>(total_blocks_, 1)) {
    throw std::invalid_argument("Allocator: group starts are not increasing from block 0");
  }
  // Free space is what the metadata leaves: groups without any are one free
  // extent, as on the real device.
  uint64_t next = 0;
  for (const BlockRange& run : metadata_) {
    if (run.start < next || run.start + run.length > total_blocks_) {
      throw std::invalid_argument("Allocator: metadata runs overlap or lie past the device");
    }
    if (run.start > next) add_free(next, run.start - next);
    metadata_blocks_ += run.length;
    next = run.start + run.length;
  }
  if (next < total_blocks_) add_free(next, total_blocks_ - next);
}

uint64_t Allocator::group_of(uint64_t block) const {
  return std::upper_bound(group_starts_.begin(), group_starts_.end(), block) -
         group_starts_.begin() - 1;
}

uint64_t Allocator::group_end(uint64_t group) const {
  return group + 1 < group_starts_.size() ? group_starts_[group + 1] : total_blocks_;
}

Result<void> Allocator::reserve(uint64_t count) {
  std::lock_guard lock(mutex_);
  if (count > free_blocks_ - reserved_blocks_) return fail(ENOSPC);
  reserved_blocks_ += count;
  return {};
}

void Allocator::unreserve(uint64_t count) {
  std::lock_guard lock(mutex_);
  if (count > reserved_blocks_) {
    throw std::logic_error(fmt::format("Allocator::unreserve: {} blocks, but only {} reserved",
                                       count, reserved_blocks_));
  }
  reserved_blocks_ -= count;
}

void Allocator::add_free(uint64_t start, uint64_t length) {
  free_by_start_.emplace(start, length);
  free_by_length_.emplace(length, start);
  free_blocks_ += length;
}

Allocator::FreeByStart::iterator Allocator::remove_free(FreeByStart::iterator it) {
  free_by_length_.erase({it->second, it->first});
  free_blocks_ -= it->second;
  return free_by_start_.erase(it);
}

Result<std::vector<BlockRange>> Allocator::allocate(uint64_t goal, uint64_t count,
                                                    uint64_t reserved) {
  std::lock_guard lock(mutex_);
  std::vector<BlockRange> runs;
  if (reserved > count || reserved > reserved_blocks_) {
    throw std::logic_error(
        fmt::format("Allocator::allocate: {} of {} blocks from a reservation of {}", reserved,
                    count, reserved_blocks_));
  }
  if (count == 0) return runs;
  if (count - reserved > free_blocks_ - reserved_blocks_) return fail(ENOSPC);
  reserved_blocks_ -= reserved;
  uint64_t position = total_blocks_ == 0 ? 0 : goal % total_blocks_;
  const uint64_t group = group_of(position);
  if (rules_.cross_groups) position = whole_fit_near(position, count);
  uint64_t extent_left = 0;  // of the extent being placed, when extents stay in a group
  while (count > 0) {
    if (!rules_.cross_groups && extent_left == 0) {
      extent_left = rules_.max_blocks == 0 ? count : std::min(count, rules_.max_blocks);
      position = whole_fit_in_a_group(position, extent_left);
    }
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
    uint64_t taken = std::min(count, extent_end - take_from);
    if (!rules_.cross_groups) {
      taken = std::min({taken, extent_left, group_end(group_of(take_from)) - take_from});
      extent_left -= taken;
    }
    remove_free(it);
    if (extent_start < take_from) add_free(extent_start, take_from - extent_start);
    if (take_from + taken < extent_end) add_free(take_from + taken, extent_end - take_from - taken);

    const bool continues = !runs.empty() && runs.back().start + runs.back().length == take_from;
    if (continues && (rules_.cross_groups || group_start(group_of(take_from)) != take_from)) {
      runs.back().length += taken;
    } else {
      runs.push_back({take_from, taken});
    }
    count -= taken;
    position = take_from + taken;
  }
  group_cursors_[group] = position;
  return runs;
}

uint64_t Allocator::whole_fit_near(uint64_t position, uint64_t count) const {
  // As the filesystems' allocators look first for a free extent that holds the
  // whole request near the goal (xfs's by-size btree, btrfs's find_free_extent,
  // ext4's goal and best-fit passes): a free run too short for it at the goal
  // (a few blocks left before a group's inode chunk) is passed over for the
  // next one in the group that holds it all, among the next few.
  constexpr int kLookAhead = 8;
  auto it = free_by_start_.upper_bound(position);
  if (it != free_by_start_.begin() && std::prev(it)->first + std::prev(it)->second > position) {
    --it;
    if (it->first + it->second - position >= count) return position;
  }
  const uint64_t end = group_end(group_of(position));
  for (int looked = 0; it != free_by_start_.end() && looked < kLookAhead; ++it, ++looked) {
    if (it->first >= end) break;
    if (it->first < position) continue;
    if (it->second >= count) return it->first;
  }
  // The next runs are all too short (holes a deleted neighbour left): as xfs's
  // near search in the AG, the nearest run after the goal in its group that
  // holds the request, among the shortest long enough.
  std::optional<uint64_t> nearest;
  int candidates = 64;
  for (auto c = free_by_length_.lower_bound({count, 0});
       c != free_by_length_.end() && candidates > 0; ++c, --candidates) {
    if (c->second < position || c->second >= end) continue;
    if (!nearest || c->second < *nearest) nearest = c->second;
  }
  return nearest.value_or(position);
}

uint64_t Allocator::whole_fit_in_a_group(uint64_t position, uint64_t count) const {
  // btrfs's find_free_extent: the extent goes where one group's free space
  // holds all of it. First among the next runs from the goal on, wrapping past
  // the device's end (a new chunk when the current one's tail is too short);
  // when those are all too short, the nearest run after the goal that holds it
  // (btrfs goes on through the other block groups); split only when none does.
  constexpr int kLookAhead = 64;
  int budget = kLookAhead;
  // The first piece of [from, run_end) inside one group that holds `count`.
  auto piece = [&](uint64_t from, uint64_t run_end) -> std::optional<uint64_t> {
    for (; from < run_end && budget > 0; --budget) {
      const uint64_t piece_end = std::min(run_end, group_end(group_of(from)));
      if (piece_end - from >= count) return from;
      from = piece_end;
    }
    return std::nullopt;
  };
  auto it = free_by_start_.upper_bound(position);
  if (it != free_by_start_.begin() && std::prev(it)->first + std::prev(it)->second > position) {
    --it;
  }
  const auto first = it;
  bool wrapped = false;
  while (budget > 0) {
    if (it == free_by_start_.end()) {
      if (wrapped) break;
      it = free_by_start_.begin();
      wrapped = true;
    }
    if (wrapped && it == first) break;
    if (auto at = piece(std::max(it->first, wrapped ? it->first : position),
                        it->first + it->second)) {
      return *at;
    }
    ++it;
  }
  // The runs near the goal are all too short: of the shortest runs long enough,
  // the one nearest after the goal.
  std::optional<uint64_t> best;
  uint64_t best_distance = 0;
  int candidates = kLookAhead;
  for (auto c = free_by_length_.lower_bound({count, 0});
       c != free_by_length_.end() && candidates > 0; ++c, --candidates) {
    budget = kLookAhead;
    auto at = piece(c->second, c->second + c->first);
    if (!at) continue;
    const uint64_t distance = (*at + total_blocks_ - position) % total_blocks_;
    if (!best || distance < best_distance) {
      best = at;
      best_distance = distance;
    }
  }
  return best.value_or(position);
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
      next = remove_free(prev);
    }
  }
  if (next != free_by_start_.end() && next->first == range.start + range.length) {
    length += next->second;
    remove_free(next);
  }
  add_free(start, length);
}

Result<void> Allocator::claim(BlockRange range) {
  if (range.length == 0) return {};
  std::lock_guard lock(mutex_);
  auto it = free_by_start_.upper_bound(range.start);
  if (it == free_by_start_.begin()) return fail(EBUSY);
  --it;
  const uint64_t extent_start = it->first;
  const uint64_t extent_end = it->first + it->second;
  if (range.start + range.length > extent_end) return fail(EBUSY);
  if (range.length > free_blocks_ - reserved_blocks_) return fail(ENOSPC);
  remove_free(it);
  if (extent_start < range.start) add_free(extent_start, range.start - extent_start);
  if (range.start + range.length < extent_end) {
    add_free(range.start + range.length, extent_end - range.start - range.length);
  }
  return {};
}

uint64_t Allocator::cursor(uint64_t group) const {
  std::lock_guard lock(mutex_);
  auto it = group_cursors_.find(group);
  if (it != group_cursors_.end()) return it->second;
  // The group's first block past the metadata at its start.
  uint64_t block = group_starts_[std::min<uint64_t>(group, group_starts_.size() - 1)];
  auto run = std::upper_bound(metadata_.begin(), metadata_.end(), block,
                              [](uint64_t b, const BlockRange& r) { return b < r.start; });
  if (run != metadata_.begin()) {
    const BlockRange& before = *std::prev(run);
    if (before.start + before.length > block) block = before.start + before.length;
  }
  return std::min(block, total_blocks_ - 1);
}

uint64_t Allocator::free_blocks() const {
  std::lock_guard lock(mutex_);
  return free_blocks_;
}

FreeSpaceSummary Allocator::summary() const {
  std::lock_guard lock(mutex_);
  FreeSpaceSummary s;
  s.total_blocks = total_blocks_;
  s.metadata_blocks = metadata_blocks_;
  s.free_blocks = free_blocks_;
  s.reserved_blocks = reserved_blocks_;
  s.free_extents = free_by_start_.size();
  s.largest_free_extent = free_by_length_.empty() ? 0 : free_by_length_.rbegin()->first;
  return s;
}

ImageJson Allocator::save() const {
  std::lock_guard lock(mutex_);
  std::vector<uint64_t> free, cursors;
  free.reserve(free_by_start_.size() * 2);
  for (const auto& [start, length] : free_by_start_) free.insert(free.end(), {start, length});
  for (const auto& [group, block] : group_cursors_) cursors.insert(cursors.end(), {group, block});
  return ImageJson{{"total_blocks", total_blocks_},
                   {"free", pack_numbers(free)},
                   {"reserved_blocks", reserved_blocks_},
                   {"cursors", pack_numbers(cursors)}};
}

void Allocator::load(const ImageJson& saved) {
  if (saved.at("total_blocks").get<uint64_t>() != total_blocks_) {
    throw ImageError("the saved device has another size");
  }
  const std::vector<uint64_t> free = unpack_numbers(saved.at("free"), 2);
  const std::vector<uint64_t> cursors = unpack_numbers(saved.at("cursors"), 2);
  std::lock_guard lock(mutex_);
  free_by_start_.clear();
  free_by_length_.clear();
  free_blocks_ = 0;
  uint64_t end = 0;
  auto metadata = metadata_.begin();
  for (size_t i = 0; i < free.size(); i += 2) {
    if (free[i + 1] == 0 || free[i] < end || free[i] + free[i + 1] > total_blocks_) {
      throw ImageError("the saved free space overlaps or lies past the device");
    }
    end = free[i] + free[i + 1];
    while (metadata != metadata_.end() && metadata->start + metadata->length <= free[i]) {
      ++metadata;
    }
    if (metadata != metadata_.end() && metadata->start < end) {
      throw ImageError("the saved free space covers the filesystem's own structures");
    }
    add_free(free[i], free[i + 1]);
  }
  reserved_blocks_ = saved.at("reserved_blocks").get<uint64_t>();
  if (reserved_blocks_ > free_blocks_) throw ImageError("more blocks reserved than free");
  group_cursors_.clear();
  for (size_t i = 0; i < cursors.size(); i += 2) group_cursors_[cursors[i]] = cursors[i + 1];
}

std::vector<BlockRange> Allocator::free_ranges() const {
  std::lock_guard lock(mutex_);
  std::vector<BlockRange> ranges;
  ranges.reserve(free_by_start_.size());
  for (const auto& [start, length] : free_by_start_) ranges.push_back({start, length});
  return ranges;
}

}  // namespace mimicfs
