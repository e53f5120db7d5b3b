// `mimicfs mount --data-dir DIR`: file contents in sparse host files through a
// real mount. Holes, zeros and punched ranges take no host block, a full host
// filesystem fails the write with ENOSPC and loses nothing written before, and
// the host files go with the volume.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/mounted_volume.h"

namespace mimicfs::testing {
namespace {

namespace fs = std::filesystem;
constexpr off_t kKiB = 1024;
constexpr off_t kMiB = 1024 * kKiB;

std::vector<char> pattern(size_t length, unsigned seed) {
  std::vector<char> out(length);
  for (size_t i = 0; i < length; ++i) out[i] = static_cast<char>(1 + (seed + i * 7) % 251);
  return out;
}

// Bytes of host blocks under DIR/files.
uint64_t host_bytes(const std::string& data_dir) {
  uint64_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(data_dir + "/files")) {
    struct stat st {};
    if (stat(entry.path().c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return bytes;
}

size_t host_files(const std::string& data_dir) {
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(data_dir + "/files")) ++count;
  return count;
}

std::vector<char> read_at(int fd, size_t length, off_t offset) {
  std::vector<char> out(length);
  EXPECT_EQ(pread(fd, out.data(), length, offset), static_cast<ssize_t>(length));
  return out;
}

TEST(DataDirectory, ContentsLiveInSparseHostFilesAndGoWithTheVolume) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string data_dir = make_temp_dir();
  {
    MountedVolume volume("ext4", {"--data-dir", data_dir});
    ASSERT_TRUE(volume.mounted()) << volume.error();
    const int fd = open(volume.file("table.ibd").c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const auto first = pattern(kMiB, 1), second = pattern(kMiB, 2);
    const std::vector<char> zeros(4 * kMiB, 0);
    ASSERT_EQ(pwrite(fd, first.data(), first.size(), 0), kMiB);
    ASSERT_EQ(pwrite(fd, zeros.data(), zeros.size(), kMiB), 4 * kMiB);  // written zeros
    ASSERT_EQ(pwrite(fd, second.data(), second.size(), 64 * kMiB), kMiB);  // past a hole
    ASSERT_EQ(fsync(fd), 0);
    // Only the 2 MiB of data takes host blocks (an extent-tree block aside).
    EXPECT_GE(host_bytes(data_dir), uint64_t(2 * kMiB));
    EXPECT_LE(host_bytes(data_dir), uint64_t(2 * kMiB + 64 * kKiB));
    ASSERT_EQ(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 256 * kKiB, 512 * kKiB), 0)
        << std::strerror(errno);
    EXPECT_LE(host_bytes(data_dir), uint64_t(1536 * kKiB + 64 * kKiB)) << "the punch frees host blocks";
    // Read back through a cold page cache: the bytes come from the host file.
    ASSERT_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    auto expected = first;
    std::fill(expected.begin() + 256 * kKiB, expected.begin() + 768 * kKiB, 0);
    EXPECT_EQ(read_at(fd, kMiB, 0), expected);
    EXPECT_EQ(read_at(fd, 4 * kMiB, kMiB), zeros);
    EXPECT_EQ(read_at(fd, kMiB, 64 * kMiB), second);
    close(fd);
    EXPECT_EQ(host_files(data_dir), 1u);
  }
  EXPECT_EQ(host_files(data_dir), 0u) << "a clean unmount leaves no host file";
  EXPECT_TRUE(fs::exists(data_dir + "/mimicfs-data")) << "DIR stays a data directory";
  // And serves the next mount.
  {
    MountedVolume again("nfs", {"--data-dir", data_dir});
    EXPECT_TRUE(again.mounted()) << again.error();
  }
  fs::remove_all(data_dir);
}

TEST(DataDirectory, ADirectoryInUseOrMissingIsRefusedWithOneLine) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string data_dir = make_temp_dir();
  MountedVolume volume("nfs", {"--data-dir", data_dir});
  ASSERT_TRUE(volume.mounted()) << volume.error();
  const std::string second = make_temp_dir();
  auto r = run_command({mimicfs_binary(), "mount", "--data-dir", data_dir, second});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_EQ(r.err, "mimicfs: --data-dir " + data_dir + ": in use by another mimicfs mount\n");
  EXPECT_FALSE(is_mounted(second));
  r = run_command({mimicfs_binary(), "mount", "--data-dir", data_dir + "/missing", second});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_EQ(r.err, "mimicfs: --data-dir " + data_dir + "/missing: No such file or directory\n");
  r = run_command({mimicfs_binary(), "mount", "--data-dir", second, second});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_EQ(r.err, "mimicfs: --data-dir " + second + ": inside the mountpoint " + second + "\n");
  EXPECT_TRUE(fs::is_empty(second)) << "nothing made in a refused directory";
  r = run_command({mimicfs_binary(), "run", "--data-dir", data_dir, "--", "true"});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_EQ(r.err, "mimicfs: --data-dir " + data_dir + ": in use by another mimicfs mount\n");
  fs::remove(second);
}

TEST(DataDirectory, RunKeepsContentsInTheDirectoryForTheCommand) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string data_dir = make_temp_dir();
  auto r = run_command({mimicfs_binary(), "run", "--profile", "xfs", "--data-dir", data_dir, "--",
                        "sh", "-c",
                        "head -c 300000 /dev/urandom > \"$MIMICFS_MOUNT/f\" && sync && "
                        "ls \"$0/files\" | wc -l && stat -c %s \"$0\"/files/*",
                        data_dir});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out, "1\n300000\n");
  EXPECT_EQ(host_files(data_dir), 0u);
  fs::remove_all(data_dir);
}

// A host filesystem of 8 MiB (a tmpfs) under a volume of 256 GiB: the host
// fills first.
TEST(DataDirectory, AFullHostFailsTheWriteWithEnospcAndLosesNothing) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string data_dir = make_temp_dir();
  if (geteuid() != 0 || mount("tmpfs", data_dir.c_str(), "tmpfs", 0, "size=8m") != 0) {
    fs::remove(data_dir);
    GTEST_SKIP() << "needs root to mount a small tmpfs";
  }
  {
    MountedVolume volume("ideal", {"--data-dir", data_dir});
    ASSERT_TRUE(volume.mounted()) << volume.error();
    const auto kept = pattern(3 * kMiB, 5);
    const int a = open(volume.file("kept").c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_EQ(pwrite(a, kept.data(), kept.size(), 0), 3 * kMiB);
    ASSERT_EQ(fsync(a), 0);
    const int b = open(volume.file("filler").c_str(), O_RDWR | O_CREAT, 0644);
    const auto chunk = pattern(256 * kKiB, 9);
    off_t written = 0;
    int error = 0;
    while (written < 16 * kMiB) {
      if (pwrite(b, chunk.data(), chunk.size(), written) != static_cast<ssize_t>(chunk.size())) {
        error = errno;
        break;
      }
      written += chunk.size();
    }
    EXPECT_EQ(error, ENOSPC) << "wrote " << written << " bytes";
    EXPECT_LT(written, 8 * kMiB);
    struct stat st {};
    ASSERT_EQ(fstat(b, &st), 0);
    EXPECT_EQ(st.st_size, written) << "the refused write changed nothing";
    ASSERT_EQ(posix_fadvise(a, 0, 0, POSIX_FADV_DONTNEED), 0);
    EXPECT_EQ(read_at(a, kept.size(), 0), kept);
    ASSERT_EQ(posix_fadvise(b, 0, 0, POSIX_FADV_DONTNEED), 0);
    for (off_t at = 0; at < written; at += chunk.size()) {
      ASSERT_EQ(read_at(b, chunk.size(), at), chunk) << "at " << at;
    }
    // The daemon serves on, and freeing host space lets writes go on.
    close(b);
    ASSERT_EQ(unlink(volume.file("filler").c_str()), 0);
    // Until the removal is committed a crash could bring the file back, so its
    // contents stay (docs/architecture.md); a volume sync commits it.
    ASSERT_EQ(volume.ctl("sync"), 0);
    EXPECT_EQ(pwrite(a, chunk.data(), chunk.size(), 3 * kMiB), static_cast<ssize_t>(chunk.size()))
        << std::strerror(errno);
    close(a);
  }
  EXPECT_EQ(umount(data_dir.c_str()), 0);
  fs::remove(data_dir);
}

}  // namespace
}  // namespace mimicfs::testing
