// SPDX-License-Identifier: Apache-2.0
// One NFS client's crash, through real mounts (docs/nfs.md, "A client's
// crash"): `ctl crash --client [hold]`. What the client had not written back
// is lost, its descriptors get EIO, its silly-renamed files stay, and its
// locks stay on the server until its lease expires or its next boot sends a
// request; the other client goes on.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/mounted_volume.h"
#include "tests/support/two_clients.h"

namespace {

using mimicfs::testing::MountedVolume;

std::string errno_text() { return std::strerror(errno); }

int open_file(const MountedVolume& volume, const std::string& name, int flags = O_RDWR) {
  return open(volume.file(name).c_str(), flags | O_CREAT | O_CLOEXEC, 0644);
}

int lock(int fd, short type) {
  struct flock request {};
  request.l_type = type;
  request.l_whence = SEEK_SET;
  return fcntl(fd, F_SETLK, &request);
}

std::string read_all(const MountedVolume& volume, const std::string& name) {
  const int fd = open(volume.file(name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "open: " + errno_text();
  char buffer[64] = {};
  const ssize_t n = pread(fd, buffer, sizeof buffer, 0);
  close(fd);
  return n < 0 ? "read: " + errno_text() : std::string(buffer, static_cast<size_t>(n));
}

std::vector<std::string> names(const std::string& directory) {
  std::vector<std::string> out;
  DIR* dir = opendir(directory.c_str());
  if (dir == nullptr) return out;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != ".." && name != ".mimicfs") out.push_back(name);
  }
  closedir(dir);
  return out;
}

class NfsClientCrash : public mimicfs::testing::TwoClients {};

// B wrote "kept" and synced it, then "+lost" without: after its crash A reads
// "kept"; B's descriptor from before gets EIO; A's own file is untouched.
TEST_P(NfsClientCrash, WhatItHadNotWrittenBackIsLost) {
  const int b = open_file(this->b(), "log");
  ASSERT_GE(b, 0) << errno_text();
  ASSERT_EQ(pwrite(b, "kept", 4, 0), 4) << errno_text();
  ASSERT_EQ(fsync(b), 0) << errno_text();
  ASSERT_EQ(pwrite(b, "+lost", 5, 4), 5) << errno_text();
  const int a = open_file(this->a(), "mine");
  ASSERT_GE(a, 0) << errno_text();
  ASSERT_EQ(pwrite(a, "A's", 3, 0), 3) << errno_text();

  ASSERT_EQ(this->b().ctl("crash --client"), 0);
  EXPECT_EQ(read_all(this->a(), "log"), "kept");
  EXPECT_EQ(read_all(this->b(), "log"), "kept") << "B's page cache went with it";
  EXPECT_EQ(pwrite(b, "x", 1, 0), -1);
  EXPECT_EQ(errno, EIO) << "opened before B's crash: " << errno_text();
  EXPECT_EQ(pwrite(a, "x", 1, 0), 1) << "A goes on: " << errno_text();
  EXPECT_EQ(this->b().stats()["client"]["crashes"], 1);
  close(b);
  close(a);
}

// B holds a lock and stays down: A is refused until B's lease expires (90 s
// of emulated time); B's mount answers EIO until `restart`.
TEST_P(NfsClientCrash, ItsLocksStayUntilItsLeaseExpires) {
  const int b = open_file(this->b(), "db");
  ASSERT_GE(b, 0) << errno_text();
  ASSERT_EQ(lock(b, F_WRLCK), 0) << errno_text();
  const int a = open_file(this->a(), "db");
  ASSERT_GE(a, 0) << errno_text();
  ASSERT_EQ(this->b().ctl("crash --client hold"), 0);
  EXPECT_EQ(open(this->b().file("db").c_str(), O_RDONLY | O_CLOEXEC), -1);
  EXPECT_EQ(errno, EIO) << "down: " << errno_text();
  EXPECT_EQ(lock(a, F_WRLCK), -1);
  EXPECT_EQ(errno, EAGAIN) << errno_text();
  close(b);  // a descriptor from before the crash gives back nothing
  EXPECT_EQ(lock(a, F_WRLCK), -1) << "still B's";
  ASSERT_EQ(this->a().ctl("time advance 90s"), 0);
  EXPECT_EQ(lock(a, F_WRLCK), 0) << "B's lease expired: " << errno_text();
  ASSERT_EQ(this->b().ctl("restart"), 0);
  EXPECT_EQ(read_all(this->b(), "db"), "") << "up again";
  close(a);
}

// A file B had open and removed is renamed away (.nfsXXXX); its crash leaves it.
TEST_P(NfsClientCrash, ItsSillyRenamedFilesStay) {
  const int b = open_file(this->b(), "tmp");
  ASSERT_GE(b, 0) << errno_text();
  ASSERT_EQ(unlink(this->b().file("tmp").c_str()), 0) << errno_text();
  ASSERT_EQ(this->b().ctl("crash --client"), 0);
  close(b);
  const std::vector<std::string> left = names(this->a().path());
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].substr(0, 4), ".nfs");
}

INSTANTIATE_TEST_SUITE_P(Nfs, NfsClientCrash, ::testing::Values("nfs", "nfs42"),
                         [](const auto& info) { return info.param; });

TEST(LocalClientCrash, ALocalProfileHasNoClient) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  EXPECT_EQ(vol.ctl("crash --client"), EINVAL);
}

}  // namespace
