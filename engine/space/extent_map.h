// SPDX-License-Identifier: Apache-2.0
// ExtentMap: one file's logical blocks mapped to device blocks.
//
// Blocks are allocation units of the volume. A hole is the absence of a mapping.
// Invariant: two neighbouring extents that are contiguous both in the file and on
// the device, with the same written/unwritten state, are always merged, so the
// number of extents is exactly the FIEMAP record count. Every operation is
// O(log n + k) for n extents and k extents touched; millions of extents are
// normal (a 4 GiB file after glibc's NFS fallback has 1 M). What filefrag would
// say (fragments, holes, the length histogram) is kept up to date at each
// change, from an extent's neighbours, so a stats snapshot never walks the map.
//
// Not thread-safe: the owning inode's mutex guards it.
#pragma once

#include <absl/container/btree_map.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "engine/base/volume_image.h"

namespace mimicfs {

struct Extent {
  uint64_t logical = 0;    // first file block
  uint64_t physical = 0;   // first device block
  uint64_t length = 0;     // blocks
  bool unwritten = false;  // allocated but reads as zeros (fallocate)

  uint64_t logical_end() const { return logical + length; }
  uint64_t physical_end() const { return physical + length; }
  friend bool operator==(const Extent&, const Extent&) = default;
};

struct BlockRange {
  uint64_t start = 0;
  uint64_t length = 0;
  friend bool operator==(const BlockRange&, const BlockRange&) = default;
};

// What filefrag and FIEMAP would say of a file.
struct ExtentSummary {
  uint64_t extents = 0;  // FIEMAP records: a hole always ends one
  uint64_t fragments =
      0;  // filefrag's count: a new one only where the file-to-device offset changes
  uint64_t unwritten_extents = 0;
  uint64_t mapped_blocks = 0;
  // Extent lengths, each rounded up to a power of two of blocks -> extent count.
  std::map<uint64_t, uint64_t> length_histogram;
};

class ExtentMap {
 public:
  // `max_extent_blocks`: the longest extent record, `max_unwritten_blocks` the
  // longest unwritten one (ext4: 32768 and 32767); 0 for no limit.
  explicit ExtentMap(uint64_t max_extent_blocks = 0, uint64_t max_unwritten_blocks = 0)
      : max_extent_blocks_(max_extent_blocks),
        max_unwritten_blocks_(max_unwritten_blocks ? max_unwritten_blocks : max_extent_blocks) {}

  // Maps [logical, logical+length) to device blocks from `physical`. The file range
  // must be unmapped (a precondition; violating it throws std::logic_error).
  void map(uint64_t logical, uint64_t physical, uint64_t length, bool unwritten);

  // Removes every mapping inside [logical, logical+length), splitting extents that
  // straddle its edges. Returns the device blocks released, in file order.
  std::vector<BlockRange> unmap(uint64_t logical, uint64_t length);

  // Converts unwritten blocks inside the range to written; holes stay holes.
  void mark_written(uint64_t logical, uint64_t length);

  // The extents overlapping the range, clipped to it, in file order.
  std::vector<Extent> find(uint64_t logical, uint64_t length) const;
  // Whether find() would return a written extent, without the copy (asked for
  // each page a write is about to change; a length of 0 past an extent's start counts).
  bool has_written(uint64_t logical, uint64_t length) const;

  // The holes inside the range, in file order.
  std::vector<BlockRange> holes(uint64_t logical, uint64_t length) const;

  // The extent ending at or before `logical` that is nearest to it, if any.
  std::optional<Extent> nearest_before(uint64_t logical) const;
  // The first extent starting at or after `logical`, if any.
  std::optional<Extent> first_at_or_after(uint64_t logical) const;

  // First block >= `logical` holding written data (unwritten extents read as
  // holes, as SEEK_DATA on ext4 and xfs reports them), if any.
  std::optional<uint64_t> next_data(uint64_t logical) const;
  // First block >= `logical` that is not written data.
  uint64_t next_hole(uint64_t logical) const;

  uint64_t extent_count() const { return extents_.size(); }
  uint64_t mapped_blocks() const { return mapped_blocks_; }
  uint64_t unwritten_extent_count() const { return unwritten_extents_; }
  bool empty() const { return extents_.empty(); }

  // O(1): kept as the map changes.
  ExtentSummary summarize() const;
  // Number of holes between block 0 and `end_block` (a file's size in blocks):
  // O(log n + k) for k extents at or past `end_block`.
  uint64_t count_holes(uint64_t end_block) const;
  std::vector<Extent> all() const;

  // Its extents for a volume image, and back into an empty map, record for
  // record (never merged: the image holds the records as they were).
  ImageJson save() const;
  void load(const ImageJson& saved);

 private:
  // Keyed by Extent::logical. A B-tree (block_range_set.h says why): an insert
  // or erase invalidates every iterator and pointer into it but the one it
  // returns.
  using Map = absl::btree_map<uint64_t, Extent>;

  // Every change of the map goes through these two, which keep the counts.
  Map::iterator insert(const Extent& extent, Map::const_iterator hint);
  void insert(const Extent& extent) { insert(extent, extents_.lower_bound(extent.logical)); }
  Map::iterator erase(Map::iterator it);
  // What the extent at `it` adds to the counts beside its predecessor (none at
  // the start), with `sign` +1 or -1; and the same for the pair around a gap.
  void count_extent(Map::const_iterator it, int sign);
  void count_pair(const Extent* before, const Extent* after, int sign);
  // Merges the extent at `it` with mergeable neighbours.
  void merge_around(Map::iterator it);
  // The first extent whose range ends after `logical`.
  Map::const_iterator first_ending_after(uint64_t logical) const;
  Map::iterator first_ending_after(uint64_t logical);

  bool mergeable(const Extent& a, const Extent& b) const;

  uint64_t max_length(bool unwritten) const {
    return unwritten ? max_unwritten_blocks_ : max_extent_blocks_;
  }

  uint64_t max_extent_blocks_;
  uint64_t max_unwritten_blocks_;
  Map extents_;
  uint64_t mapped_blocks_ = 0;
  uint64_t unwritten_extents_ = 0;
  // Extents that start a fragment: the first, and each whose file-to-device
  // offset differs from its predecessor's.
  uint64_t fragments_ = 0;
  // Neighbouring extents with a gap in the file between them.
  uint64_t gaps_between_ = 0;
  // Extents by log2 of their length rounded up to a power of two.
  std::array<uint64_t, 65> lengths_{};
};

}  // namespace mimicfs
