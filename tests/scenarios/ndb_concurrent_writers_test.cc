// SPDX-License-Identifier: Apache-2.0
// Seed 003 (NDB BUG#24143): several processes zero-fill their data files on one
// filesystem at the same time, in 32 KiB O_SYNC writes. How many extents each
// file ends with is decided by the allocator: who shares a cursor, how much a
// growing file is given beyond its write, and whether space was reserved first.
//
// The expected ranges are what real filesystems gave on this kind of machine
// (kernel 6.x, 4 GiB loop devices, default mkfs, 3 runs each; see docs/profiles.md)
// and what the issue reports. Real counts depend on scheduling; the emulation is
// deterministic for one arrival order of writes, and the ranges below hold for
// any order, because they follow from the policies:
//   ext4   windows double from 32 KiB to 8 MiB: about 8 doublings plus one window
//          per 8 MiB, so at most ~24 extents for 128 MiB however the files meet.
//   xfs    speculative preallocation doubles with the file: one extent per
//          doubling at most (~12), 1 when nobody interleaves.
//   xfs, speculative_preallocation = false (allocsize=4k): the group's shared
//          cursor hands consecutive blocks to whichever file syncs next, so files
//          that share a group interleave write by write; writers whose first
//          writes meet begin in different groups (the AGF trylock) and stay one
//          extent. Real: 1 to 4095 per file with 2 writers, 1 to 208 with 4.
//   btrfs  one shared cursor and no preallocation: about one extent per write.
//   fallocate(KEEP_SIZE) of the full size first: the blocks are reserved before
//          any writer competes, so 1 extent (ext4: split at 128 MiB extent records
//          and block groups).
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/support/mounted_volume.h"
#include "workloads/seed_workloads.h"

namespace mimicfs::testing {
namespace {

constexpr off_t kFileSize = 128 << 20;
constexpr size_t kWriteSize = 32 << 10;
constexpr uint64_t kWritesPerFile = kFileSize / kWriteSize;  // 4096

struct NdbCase {
  std::string name;
  std::string profile;
  std::vector<std::string> overrides;  // mimicfs mount --set ...
  int writers;
  bool reserve_first;  // fallocate(KEEP_SIZE, full size) before writing
  uint64_t min_extents;
  uint64_t max_extents;
  // Each file is whole (it began in a group of its own) or interleaved with
  // another write by write: 1-2 or at least 100 extents (xfs allocsize=4k, 2
  // writers; with 4, a late starter can join a pair part-way: 7 was seen).
  bool split_or_whole = false;
};

void PrintTo(const NdbCase& c, std::ostream* os) { *os << c.name; }


class NdbConcurrentWriters : public ::testing::TestWithParam<NdbCase> {};

TEST_P(NdbConcurrentWriters, ExtentsPerFileFollowFromTheAllocationPolicy) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const NdbCase& c = GetParam();
  std::vector<std::string> extra;
  for (const auto& o : c.overrides) {
    extra.push_back("--set");
    extra.push_back(o);
  }
  MountedVolume vol(c.profile, extra);
  ASSERT_TRUE(vol.mounted()) << vol.error();
  // Each writer is its own process, as each NDB node is; they start together.
  const auto ran = workloads::concurrent_writers(
      vol.path(), {c.writers, kFileSize, kWriteSize, c.reserve_first});
  ASSERT_TRUE(ran) << ran.error();

  const nlohmann::json stats = vol.stats();
  uint64_t total_extents = 0;
  for (int i = 0; i < c.writers; ++i) {
    const std::string name = "/datafile" + std::to_string(i);
    ASSERT_TRUE(stats["files"].contains(name)) << name;
    const auto& file = stats["files"][name];
    const uint64_t extents = file["extents"].get<uint64_t>();
    total_extents += extents;
    EXPECT_EQ(file["size"], kFileSize) << name;
    // Closed: speculative preallocation is trimmed, reservations are returned.
    EXPECT_EQ(file["allocated_bytes"], kFileSize) << name;
    EXPECT_EQ(file["unwritten_extents"], 0) << name << ": every reserved block was written";
    EXPECT_GE(extents, c.min_extents) << name;
    EXPECT_LE(extents, c.max_extents) << name;
    if (c.split_or_whole) {  // a group of its own, or shared write by write
      EXPECT_TRUE(extents <= 2 || extents >= 100) << name << ": " << extents << " extents";
    }
  }
  // The figures, for whoever reads the log beside the real filesystems' ones.
  std::cout << "[ figures  ] " << c.name << ": " << total_extents / c.writers
            << " extents per file on average\n";
  EXPECT_EQ(stats["ops"]["write"]["count"].get<uint64_t>(), kWritesPerFile * c.writers);
}

const std::vector<std::string> kNoSpeculation = {"allocation.speculative_preallocation=false"};

INSTANTIATE_TEST_SUITE_P(
    Seed003, NdbConcurrentWriters,
    ::testing::Values(
        // ext4: per-inode windows up to 8 MiB; real 2-24 per file, the issue 3-23.
        NdbCase{"ext4_2_writers", "ext4", {}, 2, false, 2, 24},
        NdbCase{"ext4_4_writers", "ext4", {}, 4, false, 2, 24},
        NdbCase{"ext4_4_writers_reserved", "ext4", {}, 4, true, 1, 8},
        // xfs: speculative preallocation; real 1-13 per file.
        NdbCase{"xfs_2_writers", "xfs", {}, 2, false, 1, 13},
        NdbCase{"xfs_4_writers", "xfs", {}, 4, false, 1, 13},
        NdbCase{"xfs_4_writers_reserved", "xfs", {}, 4, true, 1, 1},
        // xfs -o allocsize=4k: writers that share a group interleave (2006's 13-212);
        // real 1-4095 per file, depending on whether the first writes met.
        NdbCase{"xfs_allocsize_4k_2_writers", "xfs", kNoSpeculation, 2, false, 1, kWritesPerFile,
                true},
        NdbCase{"xfs_allocsize_4k_4_writers", "xfs", kNoSpeculation, 4, false, 1, kWritesPerFile},
        NdbCase{"xfs_allocsize_4k_4_writers_reserved", "xfs", kNoSpeculation, 4, true, 1, 1},
        // btrfs: about one extent per write; real 3948-4093 per file. How long a
        // writer runs alone is scheduling: on a loaded machine 2039 was seen, and
        // 858 with one of the two cores kept busy by another process. The bound
        // still lies ten times above what ext4 and xfs can give (24).
        NdbCase{"btrfs_2_writers", "btrfs", {}, 2, false, kWritesPerFile / 16, kWritesPerFile},
        NdbCase{"btrfs_4_writers", "btrfs", {}, 4, false, kWritesPerFile / 16, kWritesPerFile},
        NdbCase{"btrfs_4_writers_reserved", "btrfs", {}, 4, true, 1, 1}),
    [](const ::testing::TestParamInfo<NdbCase>& info) { return info.param.name; });

}  // namespace
}  // namespace mimicfs::testing
