// SPDX-License-Identifier: Apache-2.0
// The derived geometry against Debian's own mkfs.xfs, mkfs.ext4 and
// mkfs.btrfs, run on sparse image files of several sizes (no mount: xfs_db,
// dumpe2fs, debugfs and btrfs inspect-internal read the images). Skipped where
// the tools are missing, unless MIMICFS_REQUIRE_MKFS=1 (CI installs xfsprogs,
// e2fsprogs and btrfs-progs).
#include "engine/space/mkfs_geometry.h"

#include "engine/profile/profile.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace mimicfs {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kBlock = 4096;

std::string output_of(const std::string& command) {
  std::string out;
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (!pipe) return out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  pclose(pipe);
  return out;
}

bool have(const std::string& tool) {
  return system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
}

#define REQUIRE_TOOLS(...)                                                  \
  do {                                                                      \
    for (const char* tool : {__VA_ARGS__}) {                                \
      if (have(tool)) continue;                                             \
      const char* required = getenv("MIMICFS_REQUIRE_MKFS");                \
      if (required && std::string(required) == "1") FAIL() << tool << " missing"; \
      GTEST_SKIP() << tool << " is not installed";                          \
    }                                                                       \
  } while (0)

// A sparse image of `bytes` in a temporary directory, removed at the end.
class Image {
 public:
  explicit Image(uint64_t bytes) {
    char dir[] = "/tmp/mimicfs-mkfs.XXXXXX";
    dir_ = mkdtemp(dir);
    path_ = dir_ + "/image";
    std::filesystem::resize_file(
        (std::fclose(std::fopen(path_.c_str(), "w")), std::filesystem::path(path_)), bytes);
  }
  ~Image() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

uint64_t field(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(name + R"(\s*[=:]\s*(\d+))"))) {
    ADD_FAILURE() << "no " << name << " in:\n" << text;
    return 0;
  }
  return std::stoull(m[1]);
}

class MkfsXfs : public testing::TestWithParam<uint64_t> {};

TEST_P(MkfsXfs, AgsLogAndReservationsAreMkfsOwn) {
  REQUIRE_TOOLS("mkfs.xfs", "xfs_db");
  const uint64_t bytes = GetParam();
  Image image(bytes);
  ASSERT_EQ(system(("mkfs.xfs -q -f " + image.path() + " >/dev/null 2>&1").c_str()), 0);
  const std::string sb = output_of("xfs_db -r -c 'sb 0' -c 'p agcount agblocks agblklog dblocks "
                                   "logstart logblocks' " + image.path());
  auto x = mkfs_xfs(bytes / kBlock, kBlock);
  ASSERT_TRUE(x.has_value());
  EXPECT_EQ(x->ag_count, field(sb, "agcount"));
  EXPECT_EQ(x->ag_blocks, field(sb, "agblocks"));
  EXPECT_EQ(x->data_blocks, field(sb, "dblocks"));
  // logstart is a filesystem block number: the AG in the bits above agblklog.
  const uint64_t log_fsb = field(sb, "logstart");
  const uint64_t ag_bits = field(sb, "agblklog");
  EXPECT_EQ(x->log_start,
            (log_fsb >> ag_bits) * x->ag_blocks + (log_fsb & ((uint64_t{1} << ag_bits) - 1)));
  EXPECT_EQ(x->log_blocks, field(sb, "logblocks"));
  for (uint64_t ag = 0; ag < x->ag_count; ++ag) {
    const std::string resv =
        output_of("xfs_db -r -c 'agresv " + std::to_string(ag) + "' " + image.path());
    EXPECT_EQ(x->reserved_blocks[ag], field(resv, "reserved")) << "AG " << ag;
  }
}

INSTANTIATE_TEST_SUITE_P(Capacities, MkfsXfs,
                         testing::Values(300 * kMiB, 512 * kMiB, 1 * kGiB, 4 * kGiB, 4608 * kMiB,
                                         16 * kGiB, 256 * kGiB));

TEST(MkfsXfs, RefusesUnder300MiBAsMkfsDoes) {
  EXPECT_FALSE(mkfs_xfs(299 * kMiB / kBlock, kBlock).has_value());
}

class MkfsExt4 : public testing::TestWithParam<uint64_t> {};

TEST_P(MkfsExt4, GroupsBackupsTablesAndJournalAreMkfsOwn) {
  REQUIRE_TOOLS("mkfs.ext4", "dumpe2fs", "debugfs");
  const uint64_t bytes = GetParam();
  Image image(bytes);
  ASSERT_EQ(system(("mkfs.ext4 -q -F -b 4096 " + image.path() + " >/dev/null 2>&1").c_str()), 0);
  const std::string dump = output_of("dumpe2fs " + image.path());
  auto e = mkfs_ext4(bytes / kBlock, kBlock);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->blocks, field(dump, "Block count"));
  EXPECT_EQ(e->reserved_gdt_blocks, field(dump, "Reserved GDT blocks"));
  EXPECT_EQ(e->inodes_per_group, field(dump, "Inodes per group"));
  EXPECT_EQ(e->inode_table_blocks, field(dump, "Inode blocks per group"));
  EXPECT_EQ(e->blocks_per_group, field(dump, "Blocks per group"));

  // Every superblock copy, and where each flex group's first block bitmap is.
  std::vector<uint64_t> backups;
  const std::regex super(R"(Group (\d+): [^\n]*\n\s+(Primary|Backup) superblock at (\d+))");
  for (std::sregex_iterator it(dump.begin(), dump.end(), super), end; it != end; ++it) {
    backups.push_back(std::stoull((*it)[1]));
  }
  EXPECT_EQ(e->backup_groups, backups);
  const uint64_t backup = 1 + e->descriptor_blocks + e->reserved_gdt_blocks;
  const std::regex bitmap(R"(Group (\d+): [^\n]*\n(?:[^\n]*\n)*?\s+Block bitmap at (\d+))");
  for (std::sregex_iterator it(dump.begin(), dump.end(), bitmap), end; it != end; ++it) {
    const uint64_t group = std::stoull((*it)[1]);
    if (group % e->flex_group_size != 0) continue;
    const uint64_t expected = group * e->blocks_per_group + (group == 0 ? backup : 0);
    EXPECT_EQ(std::stoull((*it)[2]), expected) << "flex group at group " << group;
  }

  // The journal (inode 8): where it starts, how long it is, its index block.
  const std::string journal = output_of("debugfs -R 'stat <8>' " + image.path());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(journal, m, std::regex(R"(\(0(?:-\d+)?\):(\d+))"))) << journal;
  EXPECT_EQ(e->journal_start, std::stoull(m[1]));
  uint64_t length = 0;
  std::vector<BlockRange> runs;  // on the device, contiguous ones merged
  const std::regex run(R"(\((\d+)(?:-(\d+))?\):(\d+)(?:-(\d+))?)");
  for (std::sregex_iterator it(journal.begin(), journal.end(), run), end; it != end; ++it) {
    const uint64_t first = std::stoull((*it)[1]);
    const uint64_t blocks = ((*it)[2].matched ? std::stoull((*it)[2]) : first) - first + 1;
    length += blocks;
    const uint64_t physical = std::stoull((*it)[3]);
    if (!runs.empty() && runs.back().start + runs.back().length == physical) {
      runs.back().length += blocks;
    } else {
      runs.push_back({physical, blocks});
    }
  }
  EXPECT_EQ(e->journal_blocks, length);
  EXPECT_EQ(e->journal_runs, runs);
  if (std::regex_search(journal, m, std::regex(R"(\(ETB0\):(\d+))"))) {
    EXPECT_EQ(e->journal_index_block, std::stoull(m[1]));
  } else {
    EXPECT_EQ(e->journal_index_block, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Capacities, MkfsExt4,
                         testing::Values(512 * kMiB, 1 * kGiB, 4 * kGiB, 4608 * kMiB, 16 * kGiB,
                                         6250 * 128 * kMiB,  // the journal skips group 3125's copy
                                         uint64_t{1} << 40));

class MkfsBtrfs : public testing::TestWithParam<uint64_t> {};

// mkfs.btrfs's chunks on the device (its dev tree's DEV_EXTENT items: physical
// start and length) are the model's: the 8 MiB data chunk at 13 MiB, the
// system chunk twice, the metadata chunk twice; and the superblock copy at
// 256 GiB exists exactly when the model keeps its block.
TEST_P(MkfsBtrfs, ChunksAndSuperblockCopiesAreMkfsOwn) {
  REQUIRE_TOOLS("mkfs.btrfs", "btrfs");
  const uint64_t bytes = GetParam();
  Image image(bytes);
  ASSERT_EQ(system(("mkfs.btrfs -q -f " + image.path() + " >/dev/null 2>&1").c_str()), 0);
  const std::string dev = output_of("btrfs inspect-internal dump-tree -t dev " + image.path());
  std::vector<std::pair<uint64_t, uint64_t>> real;
  const std::regex item(R"(key \(1 DEV_EXTENT (\d+)\)[^]*?length (\d+))");
  for (std::sregex_iterator it(dev.begin(), dev.end(), item), end; it != end; ++it) {
    real.emplace_back(std::stoull((*it)[1]), std::stoull((*it)[2]));
  }
  auto b = mkfs_btrfs(bytes);
  ASSERT_TRUE(b.has_value());
  const uint64_t stripe = b->metadata_stripe_bytes;
  const std::vector<std::pair<uint64_t, uint64_t>> model = {
      {b->first_data_chunk, b->first_data_chunk_bytes},
      {21 * kMiB, 8 * kMiB},
      {29 * kMiB, 8 * kMiB},
      {37 * kMiB, stripe},
      {37 * kMiB + stripe, stripe}};
  EXPECT_EQ(real, model) << dev;
  EXPECT_EQ(b->data_start, 37 * kMiB + 2 * stripe);
  const std::string mirror =
      output_of("btrfs inspect-internal dump-super -s 2 " + image.path());
  EXPECT_EQ(b->super_mirror, mirror.find("bytenr\t\t\t274877906944") != std::string::npos)
      << mirror;
}

INSTANTIATE_TEST_SUITE_P(Capacities, MkfsBtrfs,
                         testing::Values(114294784, 512 * kMiB, 1 * kGiB, 2 * kGiB, 4 * kGiB,
                                         16 * kGiB, 50 * kGiB, 64 * kGiB, 300 * kGiB));

TEST(MkfsBtrfs, RefusesUnderItsMinimumAsMkfsDoes) {
  EXPECT_FALSE(mkfs_btrfs(114294784 - 4096).has_value());
}

// The kernel's data chunks, as measured on Linux 6.1 (a 2 GiB file written to
// a fresh 4 GiB loop device: chunks of 416 MiB, 10% rounded up to 16 MiB; 1 GiB
// from 10 GiB up), follow mkfs's chunks to the device's end; each is a group.
TEST(MkfsBtrfs, DataChunksFollowMkfsChunksToTheEnd) {
  EXPECT_EQ(mkfs_btrfs(4 * kGiB)->data_chunk_bytes, 416 * kMiB);
  EXPECT_EQ(mkfs_btrfs(16 * kGiB)->data_chunk_bytes, kGiB);
  Profile p;
  p.allocation_unit = kBlock;
  p.capacity_bytes = 4 * kGiB;
  p.geometry = "mkfs.btrfs";
  auto g = device_geometry(p);
  ASSERT_TRUE(g.has_value());
  const uint64_t start = 549 * kMiB / kBlock;  // 37 MiB + 2 x 256 MiB
  const uint64_t chunk = 416 * kMiB / kBlock;
  ASSERT_EQ(g->group_starts.size(), 2u + (4 * kGiB / kBlock - start) / chunk);
  EXPECT_EQ(g->group_starts[0], 0u);
  EXPECT_EQ(g->group_starts[1], start);
  EXPECT_EQ(g->group_starts[2], start + chunk);
  EXPECT_EQ(g->group_starts.back(), start + 8 * chunk);  // the last: 219 MiB
  EXPECT_EQ(g->metadata, (std::vector<BlockRange>{{0, 13 * kMiB / kBlock},
                                                  {21 * kMiB / kBlock, start - 21 * kMiB / kBlock}}));
}

// A group mkfs drops (xfs's last AG under 16 MiB, ext4's last block group too
// small for its metadata) is no group: new directories rotate over the real
// ones only.
TEST(MkfsGeometry, WhatMkfsDropsIsNoGroup) {
  auto groups = [](const char* geometry, uint64_t bytes) {
    Profile p;
    p.allocation_unit = kBlock;
    p.capacity_bytes = bytes;
    p.geometry = geometry;
    auto g = device_geometry(p);
    EXPECT_TRUE(g.has_value()) << geometry << " " << bytes;
    return g ? g->group_starts.size() : 0;
  };
  EXPECT_EQ(groups("mkfs.xfs", uint64_t{4} << 40), 4u);  // 4 AGs of 2^28 - 1 blocks and 4 left over
  EXPECT_EQ(groups("mkfs.xfs", uint64_t{8} << 40), 8u);
  EXPECT_EQ(groups("mkfs.ext4", 2 * kGiB + 100 * kBlock), 1u);  // 16 groups; the 17th dropped
  EXPECT_EQ(groups("mkfs.ext4", 2 * kGiB + 2000 * kBlock), 2u);
}

}  // namespace
}  // namespace mimicfs
