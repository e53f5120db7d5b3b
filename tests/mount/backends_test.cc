// SPDX-License-Identifier: Apache-2.0
// The local-filesystem and NFS 4.2 profiles seen through the kernel: statfs
// geometry, the fallocate modes each accepts, delayed allocation, speculative
// preallocation in st_blocks, and SEEK_DATA/SEEK_HOLE over punched files.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/mounted_volume.h"

namespace mimicfs::testing {
namespace {

constexpr off_t kKiB = 1024;
constexpr off_t kMiB = 1024 * kKiB;

std::string errno_text() { return std::strerror(errno); }

uint64_t xattr_number(const std::string& path, const char* name) {
  char value[64] = {};
  const ssize_t n = getxattr(path.c_str(), name, value, sizeof value - 1);
  return n > 0 ? std::stoull(std::string(value, n)) : ~uint64_t{0};
}

// Each profile answers exactly the fallocate modes its filesystem has (real ext4,
// xfs and btrfs on kernel 6.x accept all four; the NFS 4.2 client only ALLOCATE
// and DEALLOCATE), and a punch without KEEP_SIZE is refused with EOPNOTSUPP by the
// VFS on every filesystem, as measured on ext4, xfs, btrfs and tmpfs.
struct ModeCase {
  std::string profile;
  bool allocate, keep_size, punch_hole, zero_range;
};

// gtest prints a parameter this way (not as its bytes).
void PrintTo(const ModeCase& c, std::ostream* os) { *os << c.profile; }

class FallocateModes : public ::testing::TestWithParam<ModeCase> {};

TEST_P(FallocateModes, ExactlyTheModesTheRealFilesystemHas) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const ModeCase& c = GetParam();
  MountedVolume vol(c.profile);
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  const std::vector<char> data(64 * kKiB, 'd');
  ASSERT_EQ(pwrite(fd, data.data(), data.size(), 0), 64 * kKiB);
  auto accepted = [&](int mode) {
    errno = 0;
    const int r = fallocate(fd, mode, 16 * kKiB, 16 * kKiB);
    if (r != 0) {
      EXPECT_EQ(errno, EOPNOTSUPP) << "mode " << mode << ": " << errno_text();
    }
    return r == 0;
  };
  EXPECT_EQ(accepted(0), c.allocate);
  EXPECT_EQ(accepted(FALLOC_FL_KEEP_SIZE), c.keep_size);
  EXPECT_EQ(accepted(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE), c.punch_hole);
  EXPECT_EQ(accepted(FALLOC_FL_ZERO_RANGE), c.zero_range);
  errno = 0;
  EXPECT_EQ(fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4 * kKiB), -1);
  EXPECT_EQ(errno, EOPNOTSUPP) << "punch without KEEP_SIZE";
  close(fd);
}

INSTANTIATE_TEST_SUITE_P(Profiles, FallocateModes,
                         ::testing::Values(ModeCase{"nfs", false, false, false, false},
                                           ModeCase{"nfs42", true, false, true, false},
                                           ModeCase{"ext4", true, true, true, true},
                                           ModeCase{"xfs", true, true, true, true},
                                           ModeCase{"btrfs", true, true, true, true}),
                         [](const auto& info) { return info.param.profile; });

// statfs reports the real filesystems' geometry: 4 KiB f_bsize and f_frsize on
// ext4, xfs and btrfs (as measured), the 1 MiB wsize on both NFS profiles.
TEST(Backends, StatfsGeometry) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const auto& [profile, block] : std::vector<std::pair<std::string, long>>{
           {"ext4", 4096}, {"xfs", 4096}, {"btrfs", 4096}, {"nfs42", 1 << 20}}) {
    MountedVolume vol(profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    struct statfs fs {};
    ASSERT_EQ(statfs(vol.path().c_str(), &fs), 0);
    EXPECT_EQ(fs.f_bsize, block) << profile;
    EXPECT_EQ(fs.f_frsize, block) << profile;
    EXPECT_EQ(fs.f_namelen, 255) << profile;
  }
}

// ext4's delayed allocation: written data has no extent until fsync, yet st_blocks
// counts it and SEEK_DATA finds it; fsync allocates it as one extent.
TEST(Backends, DelayedAllocationHappensAtFsync) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("redo.log");
  const int fd = open(path.c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  const std::vector<char> block(4 * kKiB, 'r');
  for (int i = 0; i < 64; ++i) {
    ASSERT_EQ(pwrite(fd, block.data(), block.size(), kMiB + i * 4 * kKiB), 4 * kKiB);
  }
  EXPECT_EQ(xattr_number(path, "user.mimicfs.extents"), 0u);
  EXPECT_EQ(xattr_number(path, "user.mimicfs.delayed_bytes"), 256u * kKiB);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_blocks * 512, 256 * kKiB) << "delayed blocks are in st_blocks";
  EXPECT_EQ(lseek(fd, 0, SEEK_DATA), kMiB);
  EXPECT_EQ(lseek(fd, kMiB, SEEK_HOLE), kMiB + 256 * kKiB);

  ASSERT_EQ(fsync(fd), 0);
  EXPECT_EQ(xattr_number(path, "user.mimicfs.delayed_bytes"), 0u);
  EXPECT_EQ(xattr_number(path, "user.mimicfs.extents"), 1u) << "64 small writes, one allocation";
  EXPECT_EQ(lseek(fd, 0, SEEK_DATA), kMiB);
  close(fd);
}

// xfs's speculative preallocation shows in st_blocks while the file is open and
// is trimmed on close (real xfs: a 16 MiB file used 32 MiB - 64 KiB after fsync,
// 16 MiB after close); a file that was fallocated keeps its blocks past EOF.
TEST(Backends, XfsSpeculativePreallocationIsTrimmedOnClose) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("xfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("growing");
  int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  const std::vector<char> chunk(kMiB, 'g');
  for (int i = 0; i < 16; ++i) ASSERT_EQ(write(fd, chunk.data(), chunk.size()), kMiB);
  ASSERT_EQ(fsync(fd), 0);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 16 * kMiB);
  EXPECT_EQ(st.st_blocks * 512, 32 * kMiB) << "the file doubled past EOF";
  EXPECT_EQ(xattr_number(path, "user.mimicfs.preallocated_bytes"), 16u * kMiB);
  ASSERT_EQ(close(fd), 0);
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_blocks * 512, 16 * kMiB) << "trimmed on close";

  const std::string reserved = vol.file("reserved");
  fd = open(reserved.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 8 * kMiB), 0);
  ASSERT_EQ(write(fd, chunk.data(), chunk.size()), kMiB);
  ASSERT_EQ(close(fd), 0);
  ASSERT_EQ(stat(reserved.c_str(), &st), 0);
  EXPECT_EQ(st.st_blocks * 512, 8 * kMiB) << "fallocated blocks survive close";
}

// Two O_SYNC writers whose files both exist before either writes, writing in
// turns: on xfs they begin in different allocation groups and each file is one
// extent (real xfs on a fresh 4 GiB device: AGs 0 and 1, one extent each; the
// AGF trylock). With the key off they interleave write by write, as on ext4.
TEST(Backends, XfsWritersStartingTogetherBeginInDifferentGroups) {
  MIMICFS_REQUIRE_MOUNTABLE();
  {  // No block yet: no group.
    MountedVolume vol("xfs");
    ASSERT_TRUE(vol.mounted()) << vol.error();
    const int fd = open(vol.file("empty").c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    close(fd);
    char value[32];
    EXPECT_EQ(getxattr(vol.file("empty").c_str(), "user.mimicfs.first_group", value, sizeof value), -1);
    EXPECT_EQ(errno, ENODATA);
  }
  for (const char* trylock : {"true", "false"}) {
    SCOPED_TRACE(trylock);
    MountedVolume vol("xfs", {"--set", "allocation.speculative_preallocation=false", "--set",
                              std::string("allocation.group_trylock=") + trylock});
    ASSERT_TRUE(vol.mounted()) << vol.error();
    const std::string paths[] = {vol.file("datafile0"), vol.file("datafile1")};
    int fds[2];
    for (int i = 0; i < 2; ++i) {
      fds[i] = open(paths[i].c_str(), O_CREAT | O_WRONLY | O_SYNC, 0644);
      ASSERT_GE(fds[i], 0) << errno_text();
    }
    const std::vector<char> chunk(32 * kKiB, 'w');
    for (int i = 0; i < 32; ++i) {
      for (int fd : fds) ASSERT_EQ(write(fd, chunk.data(), chunk.size()), 32 * kKiB);
    }
    const bool spread = std::string(trylock) == "true";
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(xattr_number(paths[i], "user.mimicfs.extents"), spread ? 1u : 32u) << paths[i];
      close(fds[i]);
    }
    // user.mimicfs.first_group: where each file's first block is (xfs_bmap's AG).
    const uint64_t first = xattr_number(paths[0], "user.mimicfs.first_group");
    EXPECT_LT(first, 4u);
    EXPECT_EQ(xattr_number(paths[1], "user.mimicfs.first_group"), spread ? first + 1 : first);
  }
}

// `mount --set` changes one key for one mount: xfs without speculative
// preallocation allocates exactly what is written.
TEST(Backends, SetOverridesAProfileKey) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("xfs", {"--set", "allocation.speculative_preallocation=false"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  const std::vector<char> chunk(kMiB, 'g');
  for (int i = 0; i < 4; ++i) ASSERT_EQ(write(fd, chunk.data(), chunk.size()), kMiB);
  ASSERT_EQ(fsync(fd), 0);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_blocks * 512, 4 * kMiB);
  close(fd);
  EXPECT_EQ(vol.stats()["profile"], "xfs");
}

// btrfs writes an overwrite elsewhere: the old blocks stay allocated while part of
// their data extent is still used, and ZERO_RANGE reads back as zeros.
TEST(Backends, BtrfsOverwriteIsCopyOnWrite) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("btrfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("table.ibd");
  const int fd = open(path.c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  const std::vector<char> data(kMiB, 'a');
  ASSERT_EQ(pwrite(fd, data.data(), data.size(), 0), kMiB);
  ASSERT_EQ(fsync(fd), 0);
  EXPECT_EQ(xattr_number(path, "user.mimicfs.extents"), 1u);
  const std::vector<char> page(16 * kKiB, 'b');
  ASSERT_EQ(pwrite(fd, page.data(), page.size(), 256 * kKiB), 16 * kKiB);
  ASSERT_EQ(fsync(fd), 0);
  EXPECT_EQ(xattr_number(path, "user.mimicfs.extents"), 3u) << "the page moved";
  auto device = vol.stats()["device"];
  EXPECT_EQ(device["unreferenced_bytes"], 16 * kKiB) << "the old page is a bookend";

  ASSERT_EQ(fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 512 * kKiB, 64 * kKiB), 0);
  std::vector<char> back(64 * kKiB, 'x');
  ASSERT_EQ(pread(fd, back.data(), back.size(), 512 * kKiB), 64 * kKiB);
  EXPECT_EQ(std::string(back.begin(), back.end()), std::string(64 * kKiB, '\0'));
  close(fd);
  ASSERT_TRUE(vol.wait_for_releases());
  ASSERT_EQ(unlink(path.c_str()), 0);
  device = vol.stats()["device"];
  EXPECT_EQ(device["unreferenced_bytes"], 0);
  EXPECT_EQ(device["allocated_bytes"], device["metadata_bytes"]) << "everything is free again";
}

}  // namespace
}  // namespace mimicfs::testing
