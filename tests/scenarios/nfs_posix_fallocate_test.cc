// SPDX-License-Identifier: Apache-2.0
// Seed 000 (MDEV-32268): InnoDB extends files with posix_fallocate(). NFS before
// 4.2 has no fallocate (profile nfs; nfs42 has ALLOCATE), so glibc falls back to writing one byte
// per 4 KiB (its step is fstatfs's f_bsize, the 1 MiB wsize, capped at 4096). A server with
// 512-byte blocks allocates one 512 B unit per byte written: one extent per 4 KiB,
// and every gap must be filled (and fragmented further) by later writes.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <vector>

#include "tests/support/mounted_volume.h"

namespace mimicfs::testing {
namespace {

constexpr off_t kFileSize = 4 << 20;
constexpr uint64_t kSteps = kFileSize / 4096;

TEST(NfsPosixFallocate, GlibcFallbackWritesOneByteEvery4KiB) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();

  const int fd = open(vol.file("ibdata1").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  struct statfs fs {};
  ASSERT_EQ(fstatfs(fd, &fs), 0);
  EXPECT_EQ(fs.f_bsize, 1 << 20) << "the NFS client reports wsize as f_bsize";
  vol.reset_counters();

  ASSERT_EQ(posix_fallocate(fd, 0, kFileSize), 0) << "glibc's fallback must succeed";
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  close(fd);

  const auto stats = vol.stats();
  // fallocate reached the daemon once and was refused per call, never disabled.
  EXPECT_EQ(stats["ops"]["fallocate"]["count"], 1);
  EXPECT_EQ(stats["ops"]["fallocate"]["errors"]["EOPNOTSUPP"], 1);
  // Then exactly one 1-byte WRITE per 4 KiB step, each arriving as written.
  EXPECT_EQ(stats["ops"]["write"]["count"], kSteps);
  EXPECT_EQ(stats["ops"]["write"]["bytes"], kSteps);

  const auto file = stats["files"]["/ibdata1"];
  EXPECT_EQ(file["size"], kFileSize);
  EXPECT_EQ(file["extents"], kSteps) << "one 512 B unit per 4 KiB, a hole after each";
  EXPECT_EQ(file["fragments"], kSteps) << "each unit sits at a different file-to-device offset";
  EXPECT_EQ(file["allocated_bytes"], kSteps * 512);
  EXPECT_EQ(st.st_size, kFileSize);
  EXPECT_EQ(st.st_blocks, static_cast<blkcnt_t>(kSteps)) << "1024 units of 512 B";
}

TEST(NfsPosixFallocate, FillingTheGapsLaterFragmentsTheFile) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();

  // Two files preallocated the glibc way, then written in full, as InnoDB does.
  for (const char* name : {"a.ibd", "b.ibd"}) {
    const int fd = open(vol.file(name).c_str(), O_CREAT | O_RDWR, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(posix_fallocate(fd, 0, kFileSize), 0);
    close(fd);
  }
  std::vector<char> page(16384, 'x');
  const int fd = open(vol.file("a.ibd").c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  for (off_t offset = 0; offset < kFileSize; offset += page.size()) {
    ASSERT_EQ(pwrite(fd, page.data(), page.size(), offset), static_cast<ssize_t>(page.size()));
  }
  close(fd);

  const auto file = vol.file_stats("a.ibd");
  EXPECT_EQ(file["allocated_bytes"], kFileSize);
  EXPECT_EQ(file["holes"], 0);
  // Each 16 KiB page had 4 units placed by the fallback; its other 28 go elsewhere
  // on the device, so the file stays in at least one extent per 4 KiB.
  EXPECT_GE(file["extents"].get<uint64_t>(), kSteps);

  // The same pages written into a file that was never preallocated: contiguous.
  const int plain = open(vol.file("plain.ibd").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(plain, 0);
  for (off_t offset = 0; offset < kFileSize; offset += page.size()) {
    ASSERT_EQ(pwrite(plain, page.data(), page.size(), offset), static_cast<ssize_t>(page.size()));
  }
  close(plain);
  EXPECT_EQ(vol.file_stats("plain.ibd")["extents"], 1);
}

// NFS 4.2 has ALLOCATE: the same posix_fallocate is one real fallocate, no byte
// is written, and the file is one unwritten extent that reads as zeros. Writing
// it afterwards converts the extent in place: still one extent.
TEST(NfsPosixFallocate, OnNfs42ItIsOneRealFallocate) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs42");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("ibdata1").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  vol.reset_counters();

  ASSERT_EQ(posix_fallocate(fd, 0, kFileSize), 0);
  const auto stats = vol.stats();
  EXPECT_EQ(stats["ops"]["fallocate"]["count"], 1);
  EXPECT_TRUE(stats["ops"]["fallocate"]["errors"].empty()) << stats["ops"]["fallocate"];
  EXPECT_FALSE(stats["ops"].contains("write")) << "no fallback writes";
  auto file = stats["files"]["/ibdata1"];
  EXPECT_EQ(file["size"], kFileSize);
  EXPECT_EQ(file["allocated_bytes"], kFileSize);
  EXPECT_EQ(file["extents"], 1);
  EXPECT_EQ(file["unwritten_extents"], 1);
  char byte = 1;
  ASSERT_EQ(pread(fd, &byte, 1, kFileSize / 2), 1);
  EXPECT_EQ(byte, 0);

  const std::vector<char> page(16384, 'x');
  for (off_t offset = 0; offset < kFileSize; offset += page.size()) {
    ASSERT_EQ(pwrite(fd, page.data(), page.size(), offset), static_cast<ssize_t>(page.size()));
  }
  close(fd);
  file = vol.file_stats("ibdata1");
  EXPECT_EQ(file["extents"], 1);
  EXPECT_EQ(file["unwritten_extents"], 0);
}

}  // namespace
}  // namespace mimicfs::testing
