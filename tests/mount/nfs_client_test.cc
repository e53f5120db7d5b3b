// SPDX-License-Identifier: Apache-2.0
// The NFS client's own behaviour through a real mount (docs/nfs.md): silly
// rename of open files, as Linux's nfs_unlink and nfs_rename do it, on both
// NFS profiles, and its absence on a local one.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/mounted_volume.h"

namespace {

using mimicfs::testing::MountedVolume;
using mimicfs::testing::names_in;

std::string errno_text() { return std::strerror(errno); }


// A new file holding `text`, open for reading and writing.
int create_with(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
  if (fd >= 0 && pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string read_all(int fd) {
  std::string text(4096, '\0');
  const ssize_t n = pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return text;
}

// `.nfs`, the file id in 16 hex digits, a counter in 8 (nfs_sillyrename).
bool is_silly_name_of(const std::string& name, ino_t inode) {
  char fileid[17];
  std::snprintf(fileid, sizeof(fileid), "%016llx", static_cast<unsigned long long>(inode));
  return name.size() == 4 + 16 + 8 && name.starts_with(".nfs") && name.substr(4, 16) == fileid &&
         name.find_first_not_of("0123456789abcdef", 4) == std::string::npos;
}

class SillyRename : public ::testing::TestWithParam<std::string> {};

// The InfluxDB and MonetDB failures: a file still open is renamed, not removed;
// its directory cannot be removed, nor its new name, until the last close.
TEST_P(SillyRename, AnOpenFileRemovedIsRenamedUntilItsLastClose) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam());
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string dir = vol.file("db");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const int fd = create_with(dir + "/table.ibd", "rows");
  ASSERT_GE(fd, 0) << errno_text();
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);

  ASSERT_EQ(unlink((dir + "/table.ibd").c_str()), 0) << errno_text();
  const auto names = names_in(dir);
  ASSERT_EQ(names.size(), 1u);
  const std::string silly = names[0];
  EXPECT_TRUE(is_silly_name_of(silly, st.st_ino)) << silly;
  EXPECT_EQ(access((dir + "/table.ibd").c_str(), F_OK), -1);
  EXPECT_EQ(read_all(fd), "rows") << "the open file is intact";

  errno = 0;
  EXPECT_EQ(unlink((dir + "/" + silly).c_str()), -1);
  EXPECT_EQ(errno, EBUSY) << "as InfluxDB's DROP DATABASE saw";
  errno = 0;
  EXPECT_EQ(rmdir(dir.c_str()), -1);
  EXPECT_EQ(errno, ENOTEMPTY) << "as MonetDB's rmdir saw";
  const auto stats = vol.stats();
  EXPECT_EQ(stats["client"]["silly_renames"], 1);
  EXPECT_EQ(stats["client"]["silly_renamed_open"], 1);
  EXPECT_EQ(stats["open"]["unlinked_files"], 0) << "the server still has a name for it";

  // The last close removes it: an rmdir right after succeeds, as nfs_rmdir
  // waits for the silly delete.
  ASSERT_EQ(close(fd), 0);
  EXPECT_EQ(rmdir(dir.c_str()), 0) << errno_text();
  EXPECT_EQ(vol.stats()["client"]["silly_renamed_open"], 0);
}

// nfs_rename: the open target of a rename is renamed away first, so that its
// reader keeps its data; the replacement takes its name.
TEST_P(SillyRename, ARenameOntoAnOpenFileRenamesTheTargetAway) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam());
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int reader = create_with(vol.file("rpmdb"), "old");
  ASSERT_GE(reader, 0) << errno_text();
  const int writer = create_with(vol.file("rpmdb.new"), "new");
  ASSERT_GE(writer, 0) << errno_text();
  ASSERT_EQ(close(writer), 0);

  ASSERT_EQ(rename(vol.file("rpmdb.new").c_str(), vol.file("rpmdb").c_str()), 0) << errno_text();
  auto names = names_in(vol.path());
  std::erase(names, ".mimicfs");
  ASSERT_EQ(names.size(), 2u);
  std::erase(names, "rpmdb");
  ASSERT_EQ(names.size(), 1u) << "rpmdb and one .nfs name";
  EXPECT_TRUE(names[0].starts_with(".nfs")) << names[0];
  EXPECT_EQ(read_all(reader), "old");
  const int fresh = open(vol.file("rpmdb").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fresh, 0);
  EXPECT_EQ(read_all(fresh), "new");
  close(fresh);

  // Gone by the next listing, however late the close's RELEASE.
  ASSERT_EQ(close(reader), 0);
  names = names_in(vol.path());
  std::erase(names, ".mimicfs");
  EXPECT_EQ(names, std::vector<std::string>{"rpmdb"});
}

// close(2) returns before the kernel sends RELEASE: a file closed, then
// removed at once, is removed, not renamed, however the two race.
TEST_P(SillyRename, AFileClosedThenRemovedIsNotRenamed) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam());
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string dir = vol.file("tmp");
  for (int round = 0; round < 20; ++round) {
    ASSERT_EQ(mkdir(dir.c_str(), 0755), 0) << errno_text();
    for (int i = 0; i < 5; ++i) {
      const std::string path = dir + "/f" + std::to_string(i);
      const int fd = create_with(path, std::string(8192, 'x'));
      ASSERT_GE(fd, 0) << errno_text();
      ASSERT_EQ(close(fd), 0);
      ASSERT_EQ(unlink(path.c_str()), 0) << errno_text();
    }
    ASSERT_EQ(rmdir(dir.c_str()), 0) << "round " << round << ": " << errno_text();
  }
  EXPECT_EQ(vol.stats()["client"]["silly_renames"], 0);
}

// A client that crashes before the last close leaves the file behind for good,
// holding its space; once nothing holds it, it is an ordinary file.
TEST_P(SillyRename, ACrashedClientLeavesTheFileBehind) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam());
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = create_with(vol.file("log"), std::string(1 << 20, 'l'));
  ASSERT_GE(fd, 0) << errno_text();
  ASSERT_EQ(fsync(fd), 0);
  ASSERT_EQ(unlink(vol.file("log").c_str()), 0);
  ASSERT_EQ(vol.ctl("crash"), 0);
  close(fd);  // a descriptor of the world the crash ended: EIO or not, it goes
  ASSERT_TRUE(vol.wait_for_releases());

  auto names = names_in(vol.path());
  std::erase(names, ".mimicfs");
  ASSERT_EQ(names.size(), 1u);
  ASSERT_TRUE(names[0].starts_with(".nfs")) << names[0];
  struct stat st {};
  ASSERT_EQ(stat(vol.file(names[0]).c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1 << 20);
  EXPECT_GE(st.st_blocks * 512, 1 << 20) << "its space is still taken";
  EXPECT_EQ(unlink(vol.file(names[0]).c_str()), 0) << errno_text();
}

INSTANTIATE_TEST_SUITE_P(Nfs, SillyRename, ::testing::Values("nfs", "nfs42"),
                         [](const auto& info) { return info.param; });

// Local filesystems remove an open file's name at once; the file lives on
// without one until its last close.
TEST(SillyRename, ALocalFilesystemRemovesAnOpenFileAtOnce) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string dir = vol.file("db");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const int fd = create_with(dir + "/table.ibd", "rows");
  ASSERT_GE(fd, 0) << errno_text();
  ASSERT_EQ(unlink((dir + "/table.ibd").c_str()), 0);
  EXPECT_TRUE(names_in(dir).empty());
  EXPECT_EQ(rmdir(dir.c_str()), 0) << errno_text();
  EXPECT_EQ(read_all(fd), "rows");
  close(fd);
  EXPECT_FALSE(vol.stats().contains("client"));
}

}  // namespace
