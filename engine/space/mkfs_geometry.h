// SPDX-License-Identifier: Apache-2.0
// mkfs geometry: where a filesystem's own structures sit on a freshly made
// device of a given capacity, derived as Debian 12's mkfs.xfs (xfsprogs 6.1)
// and mkfs.ext4 (e2fsprogs 1.47) derive them, in the profile's block size
// (`mkfs.ext4 -b 4096`). A file that grows across one of these structures is
// split there, so a small test device has the real one's extent breaks.
//
// tests/unit/mkfs_geometry_test.cc compares the result with what the tools
// print for images of several sizes. docs/profiles.md, "Geometry", lists what
// is and is not derived.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/fs/result.h"
#include "engine/space/allocator.h"

namespace mimicfs {

struct Profile;

// `device.geometry = "groups"`: every group of `group_blocks` starts with
// `header_blocks` of metadata (the profile's own two keys).
DeviceGeometry uniform_groups(uint64_t total_blocks, uint64_t group_blocks,
                              uint64_t header_blocks);

// mkfs.xfs's data section on one device without stripe hints: the allocation
// group size from calc_default_ag_geometry, each group's headers and free-list
// blocks, the root inode chunk, the internal log in the middle group, and each
// group's per-AG reservation for refcount and free-inode btree growth, which
// data never gets (kept at the group's end here).
struct XfsGeometry {
  uint64_t ag_blocks = 0;
  uint64_t ag_count = 0;
  uint64_t data_blocks = 0;  // what the filesystem covers (a too-small last AG is dropped)
  uint64_t log_start = 0;
  uint64_t log_blocks = 0;
  std::vector<uint64_t> reserved_blocks;  // per AG, as `xfs_db -c "agresv N"` says
};
// Only for 4 KiB blocks (EDOM otherwise): the header and inode chunk
// positions are those of 4 KiB blocks.
Result<XfsGeometry> mkfs_xfs(uint64_t total_blocks, uint64_t block_size);

// mkfs.ext4 with its defaults (flex_bg of 16, sparse_super, 256-byte inodes,
// resize_inode, 64bit): 32768 blocks per group (at 4 KiB), the primary and
// backup superblocks with their descriptor and reserved-descriptor blocks, each
// flex group's bitmaps and inode tables at its start, and the journal where
// mkfs puts it, in the middle of the device.
struct Ext4Geometry {
  uint64_t blocks = 0;  // after mkfs drops a last group too small to use
  uint64_t blocks_per_group = 0;
  uint64_t group_count = 0;
  uint64_t descriptor_blocks = 0;
  uint64_t reserved_gdt_blocks = 0;
  uint64_t inodes_per_group = 0;
  uint64_t inode_table_blocks = 0;  // per group
  uint64_t flex_group_size = 16;    // groups
  uint64_t journal_start = 0;
  uint64_t journal_blocks = 0;
  std::vector<BlockRange> journal_runs;  // from journal_start, around any superblock copy
  uint64_t journal_index_block = 0;      // its extent-tree block, 0 when it has none
  std::vector<uint64_t> backup_groups;  // the groups that hold a superblock copy
};
// Only for 4 KiB blocks (EDOM otherwise) and up to 192 TiB (E2BIG), below which
// mkfs needs no meta_bg and no cap on the inode count.
Result<Ext4Geometry> mkfs_ext4(uint64_t total_blocks, uint64_t block_size);

// mkfs.btrfs (btrfs-progs 6.2) on one device, single data and DUP metadata,
// then the kernel's chunk allocator (Linux 6.1) as data is written. Physical
// layout: the first MiB reserved; a 12 MiB hole mkfs leaves, which the kernel
// takes for a chunk only when no hole left is as large as the chunk it wants
// (near the end of a full device; counted as metadata here);
// mkfs's 8 MiB data chunk; the 8 MiB system chunk twice; the metadata chunk
// twice; then data chunks one after another to the end, each
// min(round_up(10% of the device, 16 MiB), 1 GiB), the last one what is left
// in whole 64 KiB stripes. The data chunk holding the superblock copy at
// 256 GiB loses a stripe there. Metadata chunks the kernel adds later, as
// metadata grows, are not modelled.
struct BtrfsGeometry {
  uint64_t first_data_chunk = 13 << 20;  // bytes: mkfs's data chunk
  uint64_t first_data_chunk_bytes = 8 << 20;
  uint64_t metadata_stripe_bytes = 0;  // each of the DUP metadata chunk's two copies
  uint64_t data_start = 0;             // bytes: where the kernel's first data chunk goes
  uint64_t data_chunk_bytes = 0;       // the kernel's data chunks
  bool super_mirror = false;           // the superblock copy at 256 GiB is written
};
Result<BtrfsGeometry> mkfs_btrfs(uint64_t capacity_bytes);

// The geometry `profile` asks for, or why its capacity cannot have it.
Result<DeviceGeometry> device_geometry(const Profile& profile);

// One line saying why a profile's geometry is refused, for profile validation.
std::string geometry_error(const Profile& profile);

}  // namespace mimicfs
