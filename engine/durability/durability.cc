// SPDX-License-Identifier: Apache-2.0
#include "engine/durability/durability.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>

#include "engine/data/page_run_memory.h"

namespace mimicfs {

namespace {

constexpr uint64_t page_of(uint64_t offset) {
  return offset / FileDurability::kPageBytes * FileDurability::kPageBytes;
}

}  // namespace

void FileDurability::before_change(uint64_t offset, uint64_t length, const FileView& file) {
  // Only pages below the synced size hold durable data; the rest is undone by
  // restoring the size.
  const uint64_t end = std::min(offset + length, synced_size_);
  if (length == 0 || offset >= end) return;
  // Each run of pages not saved yet is saved at once.
  auto next_saved = saved_.lower_bound(page_of(offset));
  uint64_t page = page_of(offset);
  while (page < end) {
    if (next_saved != saved_.end() && next_saved->first == page) {
      ++next_saved;
      page += kPageBytes;
      continue;
    }
    const uint64_t unsaved_end = std::min(
        page_of(end - 1) + kPageBytes, next_saved == saved_.end() ? UINT64_MAX : next_saved->first);
    save(page, unsaved_end - page, file);
    page = unsaved_end;
  }
}

void FileDurability::save(uint64_t start, uint64_t length, const FileView& file) {
  // Runs of data pages are copied in one read each.
  uint64_t run = start;
  for (uint64_t page = start; page < start + length; page += kPageBytes) {
    if (!file.has_data(page, std::min(kPageBytes, synced_size_ - page))) {
      if (page > run) save_data(run, page - run, file);
      saved_.emplace(page, nullptr);
      run = page + kPageBytes;
    } else if (page + kPageBytes - run == kRunBytes) {
      save_data(run, kRunBytes, file);
      run = page + kPageBytes;
    }
  }
  if (run < start + length) save_data(run, start + length - run, file);
}

void FileDurability::save_data(uint64_t start, uint64_t length, const FileView& file) {
  const uint64_t synced = std::min(start + length, synced_size_) - start;
  PageRunMemory& memory = PageRunMemory::instance();
  std::shared_ptr<std::byte[]> block;
  // All synced, unchanged since, and in memory: copied from there in one pass
  // (the run's missing pages are filled from the file's own pages).
  const std::byte* const in_memory =
      synced == length && !unsynced_.overlaps(start, length)
          ? file.in_memory(start, length)
          : nullptr;
  if (in_memory != nullptr) {
    block = memory.hold(std::span(in_memory, length));
  } else {
    block = memory.hold(length, [&](std::span<std::byte> run) {
      file.read(start, run.first(synced));
      std::memset(run.data() + synced, 0, length - synced);  // past the synced size
      // Bytes written since the last sync are not durable: they were written
      // past the synced size then (else the page would be saved already),
      // where the durable file reads zeros; an O_DSYNC write past them moved
      // the size on.
      for (const BlockRange& written : unsynced_.overlapping(start, synced)) {
        std::memset(run.data() + (written.start - start), 0, written.length);
      }
    });
  }
  keep_saved(start, length, block);
}

void FileDurability::keep_saved(uint64_t start, uint64_t length,
                                const std::shared_ptr<std::byte[]>& block) {
  // Each page shares the block (std::shared_ptr's aliasing constructor).
  auto hint = saved_.lower_bound(start);
  for (uint64_t at = 0; at < length; at += kPageBytes) {
    hint = std::next(
        saved_.emplace_hint(hint, start + at, std::shared_ptr<std::byte>(block, block.get() + at)));
  }
}

namespace {

// Bytes of the pieces handed over and saved (counted in saved_memory_bytes).
std::atomic<uint64_t> handed_over_bytes{0};

// A piece handed over, counted while saved.
struct HandedOver {
  HandedOver(std::shared_ptr<std::byte[]> memory, uint64_t length)
      : pages(std::move(memory)), bytes(length) {
    handed_over_bytes += bytes;
  }
  ~HandedOver() { handed_over_bytes -= bytes; }
  HandedOver(const HandedOver&) = delete;
  HandedOver& operator=(const HandedOver&) = delete;
  std::shared_ptr<std::byte[]> pages;
  uint64_t bytes;
};

}  // namespace

void FileDurability::save_handed_over(uint64_t offset, uint64_t length, const FileView& file,
                                      FileData& contents) {
  const uint64_t piece = contents.hand_over_bytes();
  if (piece == 0 || piece % kPageBytes != 0) return;
  const uint64_t end = std::min(offset + length, synced_size_ / piece * piece);
  uint64_t handed = 0;
  for (uint64_t at = (offset + piece - 1) / piece * piece; at + piece <= end; at += piece) {
    // Not saved yet, unchanged since the sync, every page data (a hole is saved as one).
    const auto saved = saved_.lower_bound(at);
    if (saved != saved_.end() && saved->first < at + piece) continue;
    if (unsynced_.overlaps(at, piece)) continue;
    bool data = true;
    for (uint64_t page = at; data && page < at + piece; page += kPageBytes) {
      data = file.has_data(page, kPageBytes);
    }
    if (!data) continue;
    std::shared_ptr<std::byte[]> pages = contents.hand_over(at, piece);
    if (pages == nullptr) continue;
    std::byte* const memory = pages.get();
    const auto held = std::make_shared<HandedOver>(std::move(pages), piece);
    keep_saved(at, piece, std::shared_ptr<std::byte[]>(held, memory));
    handed += piece;
  }
  // The pieces take the place of as many runs kept for the next saves: the
  // memory the saved pages take stays what a copy into those runs would take.
  if (handed > 0) PageRunMemory::instance().trim(handed);
}

uint64_t FileDurability::saved_memory_bytes() {
  return PageRunMemory::instance().held_bytes() + handed_over_bytes;
}

std::vector<uint64_t> FileDurability::saved_page_offsets() const {
  std::vector<uint64_t> offsets;
  offsets.reserve(saved_.size());
  for (const auto& [page, contents] : saved_) offsets.push_back(page);
  return offsets;
}

std::optional<std::string> FileDurability::saved_page(uint64_t page) const {
  auto it = saved_.find(page);
  if (it == saved_.end() || it->second == nullptr) return std::nullopt;
  const uint64_t length = page < synced_size_ ? std::min(kPageBytes, synced_size_ - page) : 0;
  return std::string(reinterpret_cast<const char*>(it->second.get()), length);
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
    for (auto it = saved_.lower_bound(page_of(start));
         it != saved_.end() && it->first < start + length; ++it) {
      if (it->second == nullptr) continue;  // a hole reads as zeros already
      const uint64_t from = std::max(start, it->first);
      const uint64_t to = std::min(start + length, it->first + kPageBytes);
      std::memset(it->second.get() + (from - it->first), 0, to - from);
    }
  }
  zeroed_.clear();
}

void FileDurability::size_synced(uint64_t size) {
  // Saved contents past the new size are gone for good: a later sync that
  // extends the file must find zeros there, not what the page held before.
  // (Their memory goes back at the next sync.)
  auto it = saved_.lower_bound(page_of(size));
  if (it != saved_.end() && it->first < size) {
    if (it->second != nullptr) {
      std::memset(it->second.get() + (size - it->first), 0, it->first + kPageBytes - size);
    }
    ++it;
  }
  saved_.erase(it, saved_.end());
  synced_size_ = size;
  metadata_unsynced_ = false;
}

void FileDurability::range_synced(uint64_t offset, uint64_t length, uint64_t size,
                                  const FileView& current) {
  if (length == 0) return;
  const uint64_t end = offset + length;
  unsynced_.remove(offset, length);
  zeroed_.remove(offset, length);  // durable as it is now, whatever zeroed it before
  // The range is durable as it is now: a saved page it covers whole is
  // forgotten, one it covers in part takes the range's bytes.
  for (auto it = saved_.lower_bound(page_of(offset)); it != saved_.end() && it->first < end;) {
    const uint64_t page = it->first;
    if (offset <= page && page + kPageBytes <= end) {
      it = saved_.erase(it);
      continue;
    }
    const uint64_t from = std::max(offset, page);
    const uint64_t to = std::min(end, page + kPageBytes);
    std::array<std::byte, kPageBytes> now;  // read first: a failed read changes nothing
    current.read(from, std::span(now).first(to - from));
    if (it->second == nullptr) {
      // A saved hole is the whole page of zeros (up to the synced size):
      // restoring only the head would leave the unsynced bytes after it.
      static constexpr std::array<std::byte, kPageBytes> kZeros{};
      const std::shared_ptr<std::byte[]> block = PageRunMemory::instance().hold(kZeros);
      it->second = std::shared_ptr<std::byte>(block, block.get());
    }
    std::memcpy(it->second.get() + (from - page), now.data(), to - from);
    ++it;
  }
  // As O_DSYNC: the size is durable too when the write extended the file.
  synced_size_ = std::max(synced_size_, std::min(size, end));
}

}  // namespace mimicfs
