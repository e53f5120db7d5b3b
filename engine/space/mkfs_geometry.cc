// SPDX-License-Identifier: Apache-2.0
#include "engine/space/mkfs_geometry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "engine/profile/profile.h"

namespace mimicfs {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kTiB = uint64_t{1} << 40;

uint64_t div_ceil(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Metadata runs as they are added, then sorted and merged.
class MetadataRuns {
 public:
  void add(uint64_t start, uint64_t length) {
    if (length > 0) runs_.push_back({start, length});
  }
  std::vector<BlockRange> take() {
    std::sort(runs_.begin(), runs_.end(),
              [](const BlockRange& a, const BlockRange& b) { return a.start < b.start; });
    std::vector<BlockRange> merged;
    for (const BlockRange& run : runs_) {
      if (!merged.empty() && merged.back().start + merged.back().length >= run.start) {
        const uint64_t end = std::max(merged.back().start + merged.back().length,
                                      run.start + run.length);
        merged.back().length = end - merged.back().start;
      } else {
        merged.push_back(run);
      }
    }
    return merged;
  }

 private:
  std::vector<BlockRange> runs_;
};

// xfs_btree_calc_size: the blocks a btree of `records` needs at its fullest,
// with `leaf_min` records per leaf and `node_min` pointers per node.
uint64_t btree_blocks(uint64_t records, uint64_t leaf_min, uint64_t node_min) {
  uint64_t blocks = 0;
  uint64_t per_block = leaf_min;
  for (uint64_t len = records; len > 1;) {
    len = div_ceil(len, per_block);
    blocks += len;
    per_block = node_min;
  }
  return blocks;
}

// xfs_refcountbt_calc_reserves + xfs_finobt_calc_reserves for an AG of
// `ag_blocks` (less the log where it has it): short-form v5 btree blocks
// (56-byte headers), refcount records of 12 bytes, inode records of 16, keys
// and pointers of 4 bytes each; 64 inodes a chunk, 512-byte inodes.
uint64_t xfs_ag_reservation(uint64_t ag_blocks, uint64_t block_size) {
  const uint64_t space = block_size - 56;
  const uint64_t node_min = space / 8 / 2;
  const uint64_t refcount = btree_blocks(ag_blocks, space / 12 / 2, node_min);
  const uint64_t inodes_per_block = block_size / 512;
  const uint64_t finobt = btree_blocks(ag_blocks * inodes_per_block / 64, space / 16 / 2, node_min);
  return refcount + finobt;
}

bool is_power_of(uint64_t value, uint64_t base) {
  while (value > 1 && value % base == 0) value /= base;
  return value == 1;
}

// sparse_super: groups 0 and 1 and the powers of 3, 5 and 7 hold a superblock copy.
bool ext4_group_has_super(uint64_t group) {
  return group <= 1 || is_power_of(group, 3) || is_power_of(group, 5) || is_power_of(group, 7);
}

// ext2fs_default_journal_size, in blocks of the filesystem.
uint64_t ext4_journal_blocks(uint64_t blocks) {
  if (blocks < 2048) return 0;
  if (blocks < 32768) return 1024;
  if (blocks < 256 * 1024) return 4096;
  if (blocks < 512 * 1024) return 8192;
  if (blocks < 4096 * 1024) return 16384;
  if (blocks < 8192 * 1024) return 32768;
  if (blocks < 16384 * 1024) return 65536;
  if (blocks < 32768 * 1024) return 131072;
  return 262144;
}

}  // namespace

DeviceGeometry uniform_groups(uint64_t total_blocks, uint64_t group_blocks,
                              uint64_t header_blocks) {
  DeviceGeometry g{total_blocks, group_blocks, {}};
  if (header_blocks == 0 || total_blocks == 0) return g;
  const uint64_t step = group_blocks == 0 ? total_blocks : group_blocks;
  for (uint64_t start = 0; start < total_blocks; start += step) {
    g.metadata.push_back({start, std::min(header_blocks, total_blocks - start)});
  }
  return g;
}

Result<XfsGeometry> mkfs_xfs(uint64_t total_blocks, uint64_t block_size) {
  // mkfs.xfs refuses a data section under 300 MiB (xfsprogs 5.19 and later).
  if (block_size != 4096) return fail(EDOM);
  if (total_blocks * block_size < 300 * kMiB) return fail(EINVAL);
  XfsGeometry x;
  uint64_t blocks = total_blocks;
  const uint64_t ag_max = (kTiB - 1) / block_size;  // XFS_AG_MAX_BLOCKS
  const uint64_t ag_min = 16 * kMiB / block_size;   // XFS_AG_MIN_BYTES
  // calc_default_ag_geometry, one disk: 4 groups from 128 MiB to 4 TiB, then
  // groups of the largest size.
  if (blocks >= 4 * kTiB / block_size) {
    x.ag_blocks = ag_max;
  } else {
    x.ag_blocks = blocks >> 2;
    if ((blocks & 3) != 0 && x.ag_blocks < ag_max) ++x.ag_blocks;
  }
  x.ag_count = div_ceil(blocks, x.ag_blocks);
  if (x.ag_count > kMaxAllocationGroups) return fail(EFBIG);
  // A last group smaller than the minimum is left out of the filesystem.
  if (const uint64_t last = blocks % x.ag_blocks; last != 0 && last < ag_min) {
    --x.ag_count;
    blocks -= last;
  }
  x.data_blocks = blocks;
  // The internal log: 1/2048 of the filesystem, at least 64 MiB, at most 2 GiB
  // less 10 MiB; in the middle group, after its headers.
  const uint64_t log_bytes =
      std::clamp(blocks * block_size / 2048, 64 * kMiB, 2 * kGiB - 10 * kMiB);
  x.log_blocks = log_bytes / block_size;
  x.log_start = x.ag_count / 2 * x.ag_blocks + 6;
  for (uint64_t ag = 0; ag < x.ag_count; ++ag) {
    uint64_t length = std::min(x.ag_blocks, blocks - ag * x.ag_blocks);
    if (ag == x.ag_count / 2) length -= x.log_blocks;  // the log is never free
    x.reserved_blocks.push_back(xfs_ag_reservation(length, block_size));
  }
  return x;
}

Result<Ext4Geometry> mkfs_ext4(uint64_t total_blocks, uint64_t block_size) {
  if (block_size != 4096) return fail(EDOM);
  // Past 24576 descriptor blocks (192 TiB) mke2fs turns on meta_bg, and from
  // 256 TiB it caps the inode count at 2^32 - 1: neither is modelled.
  if (total_blocks > uint64_t{24576} * 64 * 32768) return fail(E2BIG);
  Ext4Geometry e;
  const uint64_t bytes = total_blocks * block_size;
  // mke2fs.conf's usage types: the bytes per inode.
  uint64_t inode_ratio = 16384;
  if (bytes < 3 * kMiB) {
    inode_ratio = 8192;
  } else if (bytes < 512 * kMiB) {
    inode_ratio = 4096;
  } else if (bytes >= 16 * kTiB) {
    inode_ratio = 65536;
  } else if (bytes >= 4 * kTiB) {
    inode_ratio = 32768;
  }
  const uint64_t inode_size = 256;
  const uint64_t inodes = bytes / inode_ratio;
  e.blocks_per_group = block_size * 8;
  const uint64_t descriptors_per_block = block_size / 64;  // 64bit: 64-byte descriptors
  uint64_t blocks = total_blocks;
  for (;;) {
    e.group_count = div_ceil(blocks, e.blocks_per_group);
    e.descriptor_blocks = div_ceil(e.group_count, descriptors_per_block);
    // calc_reserved_gdt_blocks: room to grow 1024 times, or to 2^32 blocks.
    const uint64_t max_blocks = blocks < 0xffffffffULL / 1024 ? blocks * 1024 : 0xffffffffULL;
    const uint64_t reserve_groups = div_ceil(max_blocks, e.blocks_per_group);
    const uint64_t wanted = div_ceil(reserve_groups, descriptors_per_block);
    e.reserved_gdt_blocks =
        std::min(wanted > e.descriptor_blocks ? wanted - e.descriptor_blocks : 0, block_size / 4);
    uint64_t per_group = std::min(div_ceil(inodes, e.group_count), block_size * 8);
    e.inode_table_blocks = div_ceil(per_group * inode_size, block_size);
    per_group = (e.inode_table_blocks * block_size / inode_size) & ~uint64_t{7};
    e.inodes_per_group = per_group;
    e.inode_table_blocks = div_ceil(per_group * inode_size, block_size);
    // ext2fs_initialize: a last group too small to hold its own metadata and
    // 50 blocks is dropped.
    uint64_t overhead = 3 + e.inode_table_blocks;
    if (ext4_group_has_super(e.group_count - 1)) {
      overhead += 1 + e.descriptor_blocks + e.reserved_gdt_blocks;
    }
    const uint64_t last = blocks % e.blocks_per_group;
    if (last != 0 && last < overhead + 50) {
      if (e.group_count == 1) return fail(EINVAL);
      blocks -= last;
      continue;
    }
    break;
  }
  e.blocks = blocks;
  // Groups 0 and 1, then the powers of 3, 5 and 7 in order.
  e.backup_groups = {0};
  if (e.group_count > 1) e.backup_groups.push_back(1);
  for (uint64_t base : {3, 5, 7}) {
    for (uint64_t g = base; g < e.group_count; g *= base) e.backup_groups.push_back(g);
  }
  std::sort(e.backup_groups.begin(), e.backup_groups.end());
  e.journal_blocks = ext4_journal_blocks(blocks);
  // get_midpoint_journal_block: the group holding the middle block, moved to
  // the start of its flex group from the second flex group on; of it and its
  // neighbours the one with the most free blocks.
  auto free_in = [&](uint64_t group) {
    uint64_t used = ext4_group_has_super(group) ? 1 + e.descriptor_blocks + e.reserved_gdt_blocks
                                                : 0;
    if (group % e.flex_group_size == 0) {
      const uint64_t n = std::min(e.flex_group_size, e.group_count - group);
      used += n * (2 + e.inode_table_blocks);
    }
    const uint64_t length = std::min(e.blocks_per_group, blocks - group * e.blocks_per_group);
    return length > used ? length - used : 0;
  };
  uint64_t group = blocks / 2 / e.blocks_per_group;
  uint64_t first = group > 0 ? group - 1 : group;
  if (group > e.flex_group_size) {
    group &= ~(e.flex_group_size - 1);
    first = group;
  }
  const uint64_t last = group + 1 < e.group_count ? group + 1 : group;
  uint64_t chosen = first;
  for (uint64_t g = first + 1; g <= last; ++g) {
    if (free_in(g) > free_in(chosen)) chosen = g;
  }
  // The journal starts at the chosen group's first free block.
  uint64_t start = chosen * e.blocks_per_group;
  if (ext4_group_has_super(chosen)) start += 1 + e.descriptor_blocks + e.reserved_gdt_blocks;
  if (chosen % e.flex_group_size == 0) {
    start += std::min(e.flex_group_size, e.group_count - chosen) * (2 + e.inode_table_blocks);
  }
  e.journal_start = start;
  // mke2fs allocates the journal's blocks from there, past any superblock copy
  // in the way (group 3125's in a 6250-group filesystem).
  const uint64_t backup = 1 + e.descriptor_blocks + e.reserved_gdt_blocks;
  auto copy = std::lower_bound(e.backup_groups.begin(), e.backup_groups.end(),
                               div_ceil(start, e.blocks_per_group));
  for (uint64_t at = start, left = e.journal_blocks; left > 0;) {
    uint64_t length = left;
    if (copy != e.backup_groups.end() && *copy * e.blocks_per_group < at + left) {
      length = *copy * e.blocks_per_group - at;
    }
    if (length > 0) e.journal_runs.push_back({at, length});
    left -= length;
    if (left > 0) at = *copy++ * e.blocks_per_group + backup;
  }
  // More extents than the inode holds (4, of up to 32768 blocks) need an
  // extent-tree block, which mkfs places just before the journal.
  if (e.journal_blocks > 4 * 32768) e.journal_index_block = start - 1;
  return e;
}

Result<BtrfsGeometry> mkfs_btrfs(uint64_t capacity) {
  // btrfs_min_dev_size for the default profiles and 16 KiB nodes, as mkfs says.
  if (capacity < 114294784) return fail(EINVAL);
  BtrfsGeometry b;
  constexpr uint64_t kStripeLen = 64 * 1024;  // BTRFS_STRIPE_LEN: chunk sizes align to it
  const uint64_t tenth = capacity / 10;
  // btrfs-progs' init_alloc_chunk_ctl_policy_regular and btrfs_alloc_chunk for
  // the DUP metadata chunk: 256 MiB (1 GiB over 50 GiB), unless that exceeds
  // 10% of the device, in which case each copy is half of that 10%, at least
  // 32 MiB.
  const uint64_t wanted = capacity > 50 * kGiB ? kGiB : 256 * kMiB;
  uint64_t stripe = wanted;
  if (stripe > std::min(tenth, wanted)) stripe = std::min(tenth, wanted) / 2 / kStripeLen * kStripeLen;
  b.metadata_stripe_bytes = std::max(stripe, 32 * kMiB);
  b.data_start = 37 * kMiB + 2 * b.metadata_stripe_bytes;
  // The kernel's decide_stripe_size_regular for single data: 10% of the
  // device rounded up to 16 MiB, at most 1 GiB.
  b.data_chunk_bytes = std::min(div_ceil(tenth, 16 * kMiB) * 16 * kMiB, kGiB);
  b.super_mirror = 256 * kGiB + 4096 <= capacity;
  if (b.data_start >= capacity) return fail(EINVAL);
  return b;
}

Result<DeviceGeometry> device_geometry(const Profile& p) {
  const uint64_t unit = p.allocation_unit;
  const uint64_t total = p.capacity_bytes / unit;
  if (p.geometry == "groups") {
    return uniform_groups(total, p.allocation_group_bytes / unit, p.group_metadata_bytes / unit);
  }
  MetadataRuns runs;
  DeviceGeometry g{total, 0, {}};
  if (p.geometry == "mkfs.xfs") {
    auto xfs = mkfs_xfs(total, unit);
    if (!xfs) return fail(xfs.error().value);
    g.group_blocks = xfs->ag_blocks;
    for (uint64_t ag = 0; ag < xfs->ag_count; ++ag) {
      const uint64_t start = ag * xfs->ag_blocks;
      g.group_starts.push_back(start);  // not past the last AG: what mkfs drops is no group
      const uint64_t end = std::min(start + xfs->ag_blocks, xfs->data_blocks);
      runs.add(start, 6);  // superblock, AGF, AGI, AGFL sectors and five btree roots
      if (ag == xfs->ag_count / 2) {
        runs.add(xfs->log_start, xfs->log_blocks + 4);  // the log, then the AGFL's blocks
      } else {
        runs.add(start + 6, 4);  // the free list's initial blocks
      }
      if (ag == 0) runs.add(16, 8);  // the root directory's inode chunk
      runs.add(end - xfs->reserved_blocks[ag], xfs->reserved_blocks[ag]);
    }
    runs.add(xfs->data_blocks, total - xfs->data_blocks);
  } else if (p.geometry == "mkfs.ext4") {
    auto ext4 = mkfs_ext4(total, unit);
    if (!ext4) return fail(ext4.error().value);
    g.group_blocks = ext4->blocks_per_group * ext4->flex_group_size;
    const uint64_t backup = 1 + ext4->descriptor_blocks + ext4->reserved_gdt_blocks;
    for (uint64_t group : ext4->backup_groups) {
      runs.add(group * ext4->blocks_per_group, backup);
    }
    for (uint64_t group = 0; group < ext4->group_count; group += ext4->flex_group_size) {
      const uint64_t n = std::min(ext4->flex_group_size, ext4->group_count - group);
      g.group_starts.push_back(group * ext4->blocks_per_group);
      const uint64_t start = group * ext4->blocks_per_group + (group == 0 ? backup : 0);
      runs.add(start, n * (2 + ext4->inode_table_blocks));
    }
    for (const BlockRange& run : ext4->journal_runs) runs.add(run.start, run.length);
    if (ext4->journal_index_block != 0) runs.add(ext4->journal_index_block, 1);
    runs.add(ext4->blocks, total - ext4->blocks);
  } else if (p.geometry == "mkfs.btrfs") {
    auto btrfs = mkfs_btrfs(p.capacity_bytes);
    if (!btrfs) return fail(btrfs.error().value);
    if (div_ceil(p.capacity_bytes - btrfs->data_start, btrfs->data_chunk_bytes) + 1 >
        kMaxAllocationGroups) {
      return fail(EFBIG);
    }
    // Group 0 is everything up to the kernel's first data chunk: of it, only
    // mkfs's data chunk is free. Then a group per data chunk.
    const uint64_t data_chunk = btrfs->first_data_chunk / unit;
    runs.add(0, data_chunk);
    const uint64_t data_start = div_ceil(btrfs->data_start, unit);
    const uint64_t after = div_ceil(btrfs->first_data_chunk + btrfs->first_data_chunk_bytes, unit);
    runs.add(after, data_start - after);
    // The block group holding the copy loses a stripe (64 KiB) of it
    // (exclude_super_stripes); and the kernel makes no chunk of the last
    // 64 KiB fraction of the device.
    constexpr uint64_t kStripeLen = 64 * 1024;
    if (btrfs->super_mirror) runs.add(256 * kGiB / unit, div_ceil(kStripeLen, unit));
    const uint64_t usable = p.capacity_bytes / kStripeLen * kStripeLen / unit;
    runs.add(usable, total - usable);
    g.group_blocks = btrfs->data_chunk_bytes / unit;
    for (uint64_t start = 0; start < total;
         start = start == 0 ? data_start : start + g.group_blocks) {
      g.group_starts.push_back(start);
    }
  }
  g.metadata = runs.take();
  return g;
}

std::string geometry_error(const Profile& p) {
  if (p.geometry == "groups") return "";
  if (p.allocation_group_bytes != 0 || p.group_metadata_bytes != 0) {
    return fmt::format(
        "device.allocation_group_bytes and device.group_metadata_bytes come from "
        "device.geometry = \"{}\"; set device.geometry = \"groups\" to give them yourself",
        p.geometry);
  }
  const auto geometry = device_geometry(p);
  if (geometry) return "";
  if (geometry.error().value == EDOM) {
    return fmt::format("device.geometry = \"{}\" lays out 4 KiB blocks: device.allocation_unit "
                       "must be 4096 (or set device.geometry = \"groups\")",
                       p.geometry);
  }
  if (geometry.error().value == E2BIG) {
    return fmt::format("device.capacity_bytes ({}) is over the 192 TiB up to which {} is "
                       "modelled (meta_bg above); use device.geometry = \"groups\"",
                       p.capacity_bytes, p.geometry);
  }
  if (geometry.error().value == EFBIG) {
    return fmt::format("device.capacity_bytes ({}) gives {} more than {} allocation groups; "
                       "use device.geometry = \"groups\" with larger groups",
                       p.capacity_bytes, p.geometry, kMaxAllocationGroups);
  }
  if (p.geometry == "mkfs.xfs") {
    return fmt::format("device.capacity_bytes ({}) is under the 300 MiB mkfs.xfs needs (or set "
                       "device.geometry = \"groups\")",
                       p.capacity_bytes);
  }
  if (p.geometry == "mkfs.btrfs") {
    return fmt::format("device.capacity_bytes ({}) is under the 114294784 bytes mkfs.btrfs "
                       "needs (or set device.geometry = \"groups\")",
                       p.capacity_bytes);
  }
  return fmt::format("device.capacity_bytes ({}) is too small for {}'s metadata (or set "
                     "device.geometry = \"groups\")",
                     p.capacity_bytes, p.geometry);
}

}  // namespace mimicfs
