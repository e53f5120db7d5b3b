#include "backends/durability.h"

#include <algorithm>

namespace mimicfs {

void FileDurability::before_change(uint64_t offset, uint64_t length, const PageReader& read) {
  // Only pages below the synced size hold durable data; the rest is undone by
  // restoring the size.
  const uint64_t end = std::min(offset + length, synced_size_);
  if (length == 0 || offset >= end) return;
  for (uint64_t page = offset / kPageBytes * kPageBytes; page < end; page += kPageBytes) {
    if (saved_.contains(page)) continue;
    std::optional<std::string> contents = read(page, std::min(kPageBytes, synced_size_ - page));
    if (contents) {
      // Bytes written since the last sync are not durable: they were written past
      // the synced size then (else the page would be saved already), where the
      // durable file reads zeros; an O_DSYNC write past them moved the size on.
      for (const BlockRange& written : unsynced_.overlapping(page, contents->size())) {
        std::fill_n(contents->begin() + (written.start - page), written.length, '\0');
      }
    }
    saved_.emplace(page, std::move(contents));
  }
}

void FileDurability::synced(uint64_t size) {
  synced_size_ = size;
  metadata_unsynced_ = false;
  unsynced_.clear();
  saved_.clear();
  zeroed_.clear();
}

void FileDurability::commit_zeroes() {
  for (const auto& [start, length] : zeroed_.ranges()) {
    for (auto it = saved_.lower_bound(start / kPageBytes * kPageBytes);
         it != saved_.end() && it->first < start + length; ++it) {
      if (!it->second) continue;  // a hole reads as zeros already
      std::string& contents = *it->second;
      const uint64_t from = std::max(start, it->first);
      const uint64_t to = std::min(start + length, it->first + contents.size());
      if (from < to) std::fill_n(contents.begin() + (from - it->first), to - from, '\0');
    }
  }
  zeroed_.clear();
}

void FileDurability::size_synced(uint64_t size) {
  // Saved contents past the new size are gone for good: a later sync that
  // extends the file must find zeros there, not what the page held before.
  for (auto it = saved_.lower_bound(size / kPageBytes * kPageBytes); it != saved_.end();) {
    if (it->first >= size) {
      it = saved_.erase(it);
      continue;
    }
    if (it->second && it->second->size() > size - it->first) it->second->resize(size - it->first);
    ++it;
  }
  synced_size_ = size;
  metadata_unsynced_ = false;
}

void FileDurability::range_synced(uint64_t offset, uint64_t length, uint64_t size,
                                  const PageReader& current) {
  if (length == 0) return;
  const uint64_t end = offset + length;
  unsynced_.remove(offset, length);
  zeroed_.remove(offset, length);  // durable as it is now, whatever zeroed it before
  // The range is durable as it is now: a saved page it covers whole is dropped,
  // one it covers in part takes the range's bytes.
  for (auto it = saved_.lower_bound(offset / kPageBytes * kPageBytes);
       it != saved_.end() && it->first < end;) {
    const uint64_t page = it->first;
    if (offset <= page && page + kPageBytes <= end) {
      it = saved_.erase(it);
      continue;
    }
    const uint64_t from = std::max(offset, page);
    const uint64_t to = std::min(end, page + kPageBytes);
    // A saved hole is the whole page of zeros (up to the synced size): restoring
    // only the head would leave the unsynced bytes after it.
    std::string contents =
        it->second.value_or(std::string(std::min(kPageBytes, synced_size_ - page), '\0'));
    if (contents.size() < to - page) contents.resize(to - page, '\0');
    const std::string now = current(from, to - from).value_or(std::string(to - from, '\0'));
    contents.replace(from - page, now.size(), now);
    it->second = std::move(contents);
    ++it;
  }
  // As O_DSYNC: the size is durable too when the write extended the file.
  synced_size_ = std::max(synced_size_, std::min(size, end));
}

}  // namespace mimicfs
