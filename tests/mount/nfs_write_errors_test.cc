// SPDX-License-Identifier: Apache-2.0
// Write-back errors on NFS profiles, through real mounts (docs/nfs.md,
// "Errors at close and fsync"): a buffered write the server refuses returns,
// its data is lost, and the program learns of it at the file's next write
// (ENOSPC), fsync or close, as Linux's nfs_file_write, nfs_file_fsync and
// nfs_file_flush report it. A local filesystem fails the write itself.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "tests/support/mounted_volume.h"

namespace {

using mimicfs::testing::MountedVolume;
using mimicfs::testing::ProfileFile;

constexpr size_t kChunk = 64 << 10;

std::string errno_text() { return std::strerror(errno); }

std::string chunk_of(char c) { return std::string(kChunk, c); }

off_t size_of(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class NfsWriteErrors : public ::testing::TestWithParam<const char*> {
 protected:
  // Mounts `base` on a 2 MiB device.
  static std::unique_ptr<MountedVolume> mount_small(const std::string& base) {
    const std::string dir = mimicfs::testing::make_temp_dir();
    {
      std::ofstream out(dir + "/small.toml");
      out << "base = \"" << base << "\"\nname = \"small-" << base << "\"\n"
          << "[device]\ncapacity_bytes = 2097152\n";
    }
    auto volume = std::make_unique<MountedVolume>(ProfileFile{dir + "/small.toml"});
    std::filesystem::remove_all(dir);
    return volume;
  }

  // Writes 64 KiB chunks to `name` until a write fails; returns the bytes
  // write(2) said it wrote, and the error in `error`.
  static size_t fill(const MountedVolume& volume, const std::string& name, int& error) {
    const int fd = open(volume.file(name).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0) << errno_text();
    size_t returned = 0;
    error = 0;
    const std::string chunk = chunk_of('f');
    while (error == 0 && returned < (64u << 20)) {
      const ssize_t n = write(fd, chunk.data(), chunk.size());
      if (n < 0) {
        error = errno;
      } else {
        returned += static_cast<size_t>(n);
      }
    }
    close(fd);
    return returned;
  }
};

// The write that found the server full returned; the next one fails. What
// write(2) said it wrote is more than the file holds.
TEST_P(NfsWriteErrors, AWritePastAFullServerReturnsAndTheNextOneFails) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const auto volume = mount_small(GetParam());
  const MountedVolume& vol = *volume;
  ASSERT_TRUE(vol.mounted()) << vol.error();
  int error = 0;
  const size_t returned = fill(vol, "filler", error);
  EXPECT_EQ(error, ENOSPC) << std::strerror(error);
  const off_t kept = size_of(vol.file("filler"));
  EXPECT_GT(kept, 0);
  EXPECT_GT(returned, static_cast<size_t>(kept)) << "a write that returned was lost";
  EXPECT_GE(vol.stats()["client"]["deferred_write_errors"], 1);
}

// A program that writes its record to a full server and ignores close(2)'s
// status loses it without a sign; one that checks fsync sees ENOSPC.
TEST_P(NfsWriteErrors, AProgramIgnoringCloseLosesItsDataAndFsyncTellsIt) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const auto volume = mount_small(GetParam());
  const MountedVolume& vol = *volume;
  ASSERT_TRUE(vol.mounted()) << vol.error();
  int error = 0;
  fill(vol, "filler", error);
  ASSERT_EQ(error, ENOSPC);
  const std::string record = chunk_of('r');

  const int careless = open(vol.file("careless").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(careless, 0) << errno_text();
  EXPECT_EQ(write(careless, record.data(), record.size()), static_cast<ssize_t>(record.size()))
      << "into the client's page cache: " << errno_text();
  EXPECT_EQ(close(careless), -1) << "nfs_file_flush reports the writeback's error";
  EXPECT_EQ(errno, ENOSPC) << errno_text();
  EXPECT_LT(contents(vol.file("careless")).size(), record.size()) << "the record is lost";

  const int careful = open(vol.file("careful").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(careful, 0) << errno_text();
  EXPECT_EQ(write(careful, record.data(), record.size()), static_cast<ssize_t>(record.size()));
  EXPECT_EQ(fsync(careful), -1);
  EXPECT_EQ(errno, ENOSPC) << errno_text();
  EXPECT_EQ(fsync(careful), 0) << "reported once";
  EXPECT_EQ(close(careful), 0) << "nothing left to write back";
}

// A fault rule's error comes at the writeback too: the write returns, fsync
// reports it once, and the data is gone from the client's cache as from the
// server.
TEST_P(NfsWriteErrors, AFaultOnWriteIsReportedByFsyncOnce) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam());
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << errno_text();
  // Whole pages, which the kernel keeps once written.
  const std::string kept(4096, 'k');
  const std::string lost(4096, 'l');
  ASSERT_EQ(write(fd, kept.data(), kept.size()), 4096);
  ASSERT_EQ(fsync(fd), 0);
  ASSERT_EQ(vol.ctl("fault add op=write,error=EIO"), 0);
  EXPECT_EQ(pwrite(fd, lost.data(), lost.size(), 4096), 4096) << errno_text();
  EXPECT_EQ(fsync(fd), -1);
  EXPECT_EQ(errno, EIO) << errno_text();
  EXPECT_EQ(fsync(fd), 0);
  ASSERT_EQ(vol.ctl("fault clear"), 0);
  EXPECT_EQ(close(fd), 0);
  const std::string now = contents(vol.file("f"));
  EXPECT_EQ(now.size(), kept.size()) << "the lost page is gone from the cache too";
  EXPECT_TRUE(now.substr(0, kept.size()) == kept);
  EXPECT_EQ(vol.stats()["client"]["deferred_write_errors"], 1);
}

// An O_SYNC write is sent at once: it fails at once, as on a local disk.
TEST_P(NfsWriteErrors, AnOSyncWriteFailsAtOnce) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam());
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_WRONLY | O_SYNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << errno_text();
  ASSERT_EQ(vol.ctl("fault add op=write,error=EIO"), 0);
  EXPECT_EQ(write(fd, "x", 1), -1);
  EXPECT_EQ(errno, EIO) << errno_text();
  ASSERT_EQ(vol.ctl("fault clear"), 0);
  EXPECT_EQ(close(fd), 0);
  EXPECT_EQ(vol.stats()["client"]["deferred_write_errors"], 0);
}

INSTANTIATE_TEST_SUITE_P(Profiles, NfsWriteErrors, ::testing::Values("nfs", "nfs42"));

// On a local filesystem the same rule fails the write itself.
TEST(LocalWriteErrors, AFaultOnWriteFailsTheWrite) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << errno_text();
  ASSERT_EQ(vol.ctl("fault add op=write,error=ENOSPC"), 0);
  EXPECT_EQ(write(fd, "lost", 4), -1);
  EXPECT_EQ(errno, ENOSPC);
  ASSERT_EQ(vol.ctl("fault clear"), 0);
  EXPECT_EQ(fsync(fd), 0);
  EXPECT_EQ(close(fd), 0);
}

}  // namespace
