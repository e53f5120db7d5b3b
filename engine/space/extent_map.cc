// SPDX-License-Identifier: Apache-2.0
#include "engine/space/extent_map.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace mimicfs {
bool ExtentMap::mergeable(const Extent& a, const Extent& b) const {
  return a.logical_end() == b.logical && a.physical_end() == b.physical &&
         a.unwritten == b.unwritten &&
         (max_length(a.unwritten) == 0 || a.length + b.length <= max_length(a.unwritten));
}

namespace {

int64_t offset_of(const Extent& e) {
  return static_cast<int64_t>(e.physical) - static_cast<int64_t>(e.logical);
}

}  // namespace

void ExtentMap::count_pair(const Extent* before, const Extent* after, int sign) {
  if (after == nullptr) return;
  const bool fragment = before == nullptr || offset_of(*before) != offset_of(*after);
  const bool gap = before != nullptr && before->logical_end() < after->logical;
  if (sign > 0) {
    fragments_ += fragment ? 1 : 0;
    gaps_between_ += gap ? 1 : 0;
  } else {
    fragments_ -= fragment ? 1 : 0;
    gaps_between_ -= gap ? 1 : 0;
  }
}

void ExtentMap::count_extent(Map::const_iterator it, int sign) {
  const Extent& e = it->second;
  uint64_t& length_bucket = lengths_[std::bit_width(std::bit_ceil(e.length)) - 1];
  if (sign > 0) {
    mapped_blocks_ += e.length;
    unwritten_extents_ += e.unwritten ? 1 : 0;
    ++length_bucket;
  } else {
    mapped_blocks_ -= e.length;
    unwritten_extents_ -= e.unwritten ? 1 : 0;
    --length_bucket;
  }
}

ExtentMap::Map::iterator ExtentMap::insert(const Extent& extent, Map::const_iterator hint) {
  auto it = extents_.emplace_hint(hint, extent.logical, extent);
  const Extent* before = it == extents_.begin() ? nullptr : &std::prev(it)->second;
  auto next = std::next(it);
  const Extent* after = next == extents_.end() ? nullptr : &next->second;
  // `before` and `after` were neighbours; now the new extent stands between them.
  count_pair(before, after, -1);
  count_pair(before, &it->second, +1);
  count_pair(&it->second, after, +1);
  count_extent(it, +1);
  return it;
}

ExtentMap::Map::iterator ExtentMap::erase(Map::iterator it) {
  const Extent* before = it == extents_.begin() ? nullptr : &std::prev(it)->second;
  auto next = std::next(it);
  const Extent* after = next == extents_.end() ? nullptr : &next->second;
  count_pair(before, &it->second, -1);
  count_pair(&it->second, after, -1);
  count_pair(before, after, +1);
  count_extent(it, -1);
  return extents_.erase(it);
}

ExtentMap::Map::const_iterator ExtentMap::first_ending_after(uint64_t logical) const {
  auto it = extents_.upper_bound(logical);
  if (it != extents_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.logical_end() > logical) return prev;
  }
  return it;
}

ExtentMap::Map::iterator ExtentMap::first_ending_after(uint64_t logical) {
  auto it = extents_.upper_bound(logical);
  if (it != extents_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.logical_end() > logical) return prev;
  }
  return it;
}

void ExtentMap::merge_around(Map::iterator it) {
  if (it != extents_.begin()) {
    auto prev = std::prev(it);
    if (mergeable(prev->second, it->second)) {
      Extent merged = prev->second;
      merged.length += it->second.length;
      it = insert(merged, erase(erase(prev)));  // erase(prev) returns where `it` is now
    }
  }
  auto next = std::next(it);
  if (next != extents_.end() && mergeable(it->second, next->second)) {
    Extent merged = it->second;
    merged.length += next->second.length;
    insert(merged, erase(erase(it)));  // erase(it) returns where `next` is now
  }
}

void ExtentMap::map(uint64_t logical, uint64_t physical, uint64_t length, bool unwritten) {
  if (length == 0) return;
  auto it = first_ending_after(logical);
  if (it != extents_.end() && it->second.logical < logical + length) {
    throw std::logic_error(
        fmt::format("ExtentMap::map: blocks {}+{} are already mapped", logical, length));
  }
  // A run longer than the longest record is mapped as several records.
  const uint64_t max = max_length(unwritten);
  if (max != 0 && length > max) {
    for (uint64_t done = 0; done < length;) {
      const uint64_t piece = std::min(max, length - done);
      map(logical + done, physical + done, piece, unwritten);
      done += piece;
    }
    return;
  }
  // `it` is the first extent after the new one: insert right before it, no second search.
  merge_around(insert(Extent{logical, physical, length, unwritten}, it));
}

std::vector<BlockRange> ExtentMap::unmap(uint64_t logical, uint64_t length) {
  std::vector<BlockRange> released;
  if (length == 0) return released;
  const uint64_t end = logical + length;
  auto it = first_ending_after(logical);
  while (it != extents_.end() && it->second.logical < end) {
    Extent e = it->second;
    it = erase(it);
    const uint64_t cut_start = std::max(e.logical, logical);
    const uint64_t cut_end = std::min(e.logical_end(), end);
    if (e.logical < cut_start) {
      it = std::next(insert(Extent{e.logical, e.physical, cut_start - e.logical, e.unwritten}, it));
    }
    if (cut_end < e.logical_end()) {
      const uint64_t offset = cut_end - e.logical;
      it = std::next(insert(Extent{cut_end, e.physical + offset, e.length - offset, e.unwritten}, it));
    }
    released.push_back(BlockRange{e.physical + (cut_start - e.logical), cut_end - cut_start});
  }
  return released;
}

void ExtentMap::mark_written(uint64_t logical, uint64_t length) {
  for (const Extent& e : find(logical, length)) {
    if (!e.unwritten) continue;
    unmap(e.logical, e.length);
    map(e.logical, e.physical, e.length, /*unwritten=*/false);
  }
}

std::vector<Extent> ExtentMap::find(uint64_t logical, uint64_t length) const {
  std::vector<Extent> found;
  const uint64_t end = logical + length;
  for (auto it = first_ending_after(logical); it != extents_.end() && it->second.logical < end;
       ++it) {
    Extent e = it->second;
    if (e.logical < logical) {
      const uint64_t skip = logical - e.logical;
      e.logical += skip;
      e.physical += skip;
      e.length -= skip;
    }
    if (e.logical_end() > end) e.length = end - e.logical;
    found.push_back(e);
  }
  return found;
}

bool ExtentMap::has_written(uint64_t logical, uint64_t length) const {
  const uint64_t end = logical + length;
  for (auto it = first_ending_after(logical); it != extents_.end() && it->second.logical < end;
       ++it) {
    if (!it->second.unwritten) return true;
  }
  return false;
}

std::vector<BlockRange> ExtentMap::holes(uint64_t logical, uint64_t length) const {
  std::vector<BlockRange> gaps;
  uint64_t cursor = logical;
  const uint64_t end = logical + length;
  for (auto it = first_ending_after(logical); it != extents_.end() && it->second.logical < end;
       ++it) {
    if (it->second.logical > cursor) gaps.push_back({cursor, it->second.logical - cursor});
    cursor = std::max(cursor, it->second.logical_end());
  }
  if (cursor < end) gaps.push_back({cursor, end - cursor});
  return gaps;
}

std::optional<Extent> ExtentMap::nearest_before(uint64_t logical) const {
  auto it = extents_.upper_bound(logical);
  if (it == extents_.begin()) return std::nullopt;
  --it;
  // An extent containing `logical` is not "before" it; take the one before that.
  if (it->second.logical_end() > logical) {
    if (it == extents_.begin()) return std::nullopt;
    --it;
  }
  return it->second;
}

std::optional<Extent> ExtentMap::first_at_or_after(uint64_t logical) const {
  auto it = extents_.lower_bound(logical);
  if (it == extents_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint64_t> ExtentMap::next_data(uint64_t logical) const {
  for (auto it = first_ending_after(logical); it != extents_.end(); ++it) {
    if (!it->second.unwritten) return std::max(logical, it->second.logical);
  }
  return std::nullopt;
}

uint64_t ExtentMap::next_hole(uint64_t logical) const {
  uint64_t cursor = logical;
  for (auto it = first_ending_after(logical); it != extents_.end(); ++it) {
    if (it->second.logical > cursor || it->second.unwritten) return cursor;
    cursor = it->second.logical_end();
  }
  return cursor;
}

ExtentSummary ExtentMap::summarize() const {
  ExtentSummary s;
  s.extents = extents_.size();
  s.unwritten_extents = unwritten_extents_;
  s.mapped_blocks = mapped_blocks_;
  s.fragments = fragments_;
  for (size_t bits = 0; bits < lengths_.size(); ++bits) {
    if (lengths_[bits] != 0) s.length_histogram[uint64_t{1} << bits] = lengths_[bits];
  }
  return s;
}

uint64_t ExtentMap::count_holes(uint64_t end_block) const {
  if (end_block == 0) return 0;
  // The extents starting below the end, and the gaps between them: all the
  // gaps but those before extents at or past the end (few: preallocation).
  auto past = extents_.lower_bound(end_block);
  uint64_t gaps = gaps_between_;
  for (auto it = past; it != extents_.end() && it != extents_.begin(); ++it) {
    if (std::prev(it)->second.logical_end() < it->second.logical) --gaps;
  }
  if (past == extents_.begin()) return 1;  // no extent below the end: one hole
  const uint64_t leading = extents_.begin()->second.logical > 0 ? 1 : 0;
  const uint64_t trailing = std::prev(past)->second.logical_end() < end_block ? 1 : 0;
  return leading + gaps + trailing;
}

std::vector<Extent> ExtentMap::all() const {
  std::vector<Extent> out;
  out.reserve(extents_.size());
  for (const auto& [logical, e] : extents_) out.push_back(e);
  return out;
}

ImageJson ExtentMap::save() const {
  std::vector<uint64_t> numbers;
  numbers.reserve(extents_.size() * 4);
  for (const auto& [logical, e] : extents_) {
    numbers.insert(numbers.end(), {e.logical, e.physical, e.length, e.unwritten ? 1u : 0u});
  }
  return pack_numbers(numbers);
}

void ExtentMap::load(const ImageJson& saved) {
  if (!extents_.empty()) throw std::logic_error("ExtentMap::load: the map is not empty");
  const std::vector<uint64_t> numbers = unpack_numbers(saved, 4);
  uint64_t end = 0;
  for (size_t i = 0; i < numbers.size(); i += 4) {
    const Extent e{numbers[i], numbers[i + 1], numbers[i + 2], numbers[i + 3] != 0};
    if (e.length == 0 || e.logical < end || e.logical_end() < e.logical) {
      throw ImageError("an extent map's records overlap or are out of order");
    }
    end = e.logical_end();
    insert(e, extents_.end());
  }
}

}  // namespace mimicfs
