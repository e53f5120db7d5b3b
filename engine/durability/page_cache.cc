// SPDX-License-Identifier: Apache-2.0
#include "engine/durability/page_cache.h"

#include <limits>

namespace mimicfs {
namespace {

uint64_t round_down(uint64_t value, uint64_t unit) { return value / unit * unit; }
uint64_t round_up(uint64_t value, uint64_t unit) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  return value > max - (unit - 1) ? round_down(max, unit) : (value + unit - 1) / unit * unit;
}

}  // namespace

uint64_t FilePageCache::write(uint64_t offset, uint64_t length) {
  if (length == 0) return 0;
  const uint64_t start = round_down(offset, dirty_unit_);
  const uint64_t end = round_up(offset + length, dirty_unit_);
  const uint64_t first_page = offset / kPageBytes;
  cached_.add(first_page, (offset + length - 1) / kPageBytes + 1 - first_page);
  return dirty_.add(start, end - start);
}

uint64_t FilePageCache::written_through(uint64_t offset, uint64_t length) {
  if (length == 0) return 0;
  return dirty_.remove(offset, length);
}

std::vector<BlockRange> FilePageCache::take_dirty(uint64_t offset, uint64_t length) {
  if (length == 0) return {};
  // Writeback writes whole dirty units: a window that cuts one takes all of it.
  const uint64_t start = round_down(offset, dirty_unit_);
  std::vector<BlockRange> taken =
      dirty_.overlapping(start, round_up(offset + length, dirty_unit_) - start);
  for (const BlockRange& range : taken) dirty_.remove(range.start, range.length);
  return taken;
}

std::vector<BlockRange> FilePageCache::read(uint64_t offset, uint64_t length) {
  if (length == 0) return {};
  const uint64_t first_page = offset / kPageBytes;
  const uint64_t pages = (offset + length - 1) / kPageBytes + 1 - first_page;
  std::vector<BlockRange> missing = cached_.gaps(first_page, pages);
  cached_.add(first_page, pages);
  for (BlockRange& range : missing) {
    range.start *= kPageBytes;
    range.length *= kPageBytes;
  }
  return missing;
}

uint64_t FilePageCache::drop(uint64_t offset, uint64_t length) {
  if (length == 0) return 0;
  const uint64_t first_page = (offset + kPageBytes - 1) / kPageBytes;
  const uint64_t end_page = (offset + length) / kPageBytes;  // partial pages stay cached
  if (first_page < end_page) cached_.remove(first_page, end_page - first_page);
  return dirty_.remove(offset, length);
}

void FilePageCache::clear() {
  dirty_.clear();
  cached_.clear();
}

}  // namespace mimicfs
