#include "backends/memory_data_store.h"

#include <algorithm>
#include <cstring>

namespace mimicfs {
namespace {

bool all_zero(const std::byte* data, size_t length) {
  // Word-at-a-time scan; pages are 4 KiB aligned in size, callers pass any span.
  size_t i = 0;
  for (; i + sizeof(uint64_t) <= length; i += sizeof(uint64_t)) {
    uint64_t word;
    std::memcpy(&word, data + i, sizeof(word));
    if (word != 0) return false;
  }
  for (; i < length; ++i) {
    if (data[i] != std::byte{0}) return false;
  }
  return true;
}

}  // namespace

void MemoryFileData::write(uint64_t offset, std::span<const std::byte> data) {
  size_t done = 0;
  auto hint = pages_.lower_bound(offset / kPageSize);
  while (done < data.size()) {
    const uint64_t position = offset + done;
    const uint64_t index = position / kPageSize;
    const uint64_t in_page = position % kPageSize;
    const size_t chunk = std::min<uint64_t>(kPageSize - in_page, data.size() - done);
    const std::byte* source = data.data() + done;
    done += chunk;

    while (hint != pages_.end() && hint->first < index) ++hint;
    const bool present = hint != pages_.end() && hint->first == index;
    if (!present) {
      if (all_zero(source, chunk)) continue;  // zeros over a missing page: nothing to keep
      auto page = std::make_unique<Page>();
      std::memset(page->data(), 0, kPageSize);
      std::memcpy(page->data() + in_page, source, chunk);
      hint = pages_.emplace_hint(hint, index, std::move(page));
      continue;
    }
    std::memcpy(hint->second->data() + in_page, source, chunk);
    if (all_zero(hint->second->data(), kPageSize)) hint = pages_.erase(hint);
  }
}

void MemoryFileData::read(uint64_t offset, std::span<std::byte> out) const {
  size_t done = 0;
  auto it = pages_.lower_bound(offset / kPageSize);
  while (done < out.size()) {
    const uint64_t position = offset + done;
    const uint64_t index = position / kPageSize;
    const uint64_t in_page = position % kPageSize;
    const size_t chunk = std::min<uint64_t>(kPageSize - in_page, out.size() - done);
    while (it != pages_.end() && it->first < index) ++it;
    if (it != pages_.end() && it->first == index) {
      std::memcpy(out.data() + done, it->second->data() + in_page, chunk);
    } else {
      std::memset(out.data() + done, 0, chunk);
    }
    done += chunk;
  }
}

void MemoryFileData::zero(uint64_t offset, uint64_t length) {
  if (length == 0) return;
  const uint64_t end = offset + length;
  const uint64_t first_full = (offset + kPageSize - 1) / kPageSize;
  const uint64_t end_full = end / kPageSize;  // exclusive
  // Whole pages go at once; partial pages at the edges are zeroed in place.
  if (first_full < end_full) {
    pages_.erase(pages_.lower_bound(first_full), pages_.lower_bound(end_full));
  }
  auto zero_partial = [this](uint64_t from, uint64_t to) {
    if (from >= to) return;
    auto it = pages_.find(from / kPageSize);
    if (it == pages_.end()) return;
    std::memset(it->second->data() + from % kPageSize, 0, to - from);
    if (all_zero(it->second->data(), kPageSize)) pages_.erase(it);
  };
  if (first_full > end_full) {  // the range lies inside one page
    zero_partial(offset, end);
    return;
  }
  zero_partial(offset, std::min(end, first_full * kPageSize));
  if (end_full * kPageSize >= offset) zero_partial(std::max(offset, end_full * kPageSize), end);
}

}  // namespace mimicfs
