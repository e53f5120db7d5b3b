// SPDX-License-Identifier: Apache-2.0
// Server restarts on NFS profiles, through real mounts (docs/nfs.md, "Server
// restarts"): `ctl server restart [--grace D]`. A client that learns of the
// restart in the grace period reclaims its locks; one that learns too late
// loses them to another client, and its reads and writes through them get
// EIO. Opens wait out the grace period.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tests/support/mounted_volume.h"
#include "tests/support/two_clients.h"

namespace {

using mimicfs::testing::MountedVolume;

std::string errno_text() { return std::strerror(errno); }

int open_file(const MountedVolume& volume, const std::string& name, int flags = O_RDWR) {
  return open(volume.file(name).c_str(), flags | O_CREAT | O_CLOEXEC, 0644);
}

int lock(int fd, short type, int command = F_SETLK) {
  struct flock request {};
  request.l_type = type;
  request.l_whence = SEEK_SET;
  return fcntl(fd, command, &request);  // the whole file
}

class NfsServerRestart : public mimicfs::testing::TwoClients {};

// The default grace period (90 s) is longer than a client's renewal (two
// thirds of the 90 s lease): A reclaims its lock, and B's lock, which waited
// out the grace, is refused. Opens meanwhile wait too.
TEST_P(NfsServerRestart, ALockReclaimedInTheGracePeriodStays) {
  const int a = open_file(this->a(), "db");
  ASSERT_GE(a, 0) << errno_text();
  ASSERT_EQ(lock(a, F_WRLCK), 0) << errno_text();
  ASSERT_EQ(this->a().ctl("server restart"), 0);
  EXPECT_EQ(this->a().stats()["server"]["in_grace"], true);
  const uint64_t before = this->b().emulated_ns();
  const int b = open_file(this->b(), "db");  // an OPEN: refused until the grace ends
  ASSERT_GE(b, 0) << errno_text();
  EXPECT_GE(this->b().emulated_ns() - before, 90'000'000'000u) << "the open waited";
  EXPECT_EQ(lock(b, F_WRLCK), -1);
  EXPECT_EQ(errno, EAGAIN) << errno_text();
  ASSERT_EQ(pwrite(a, "kept", 4, 0), 4) << errno_text();
  EXPECT_EQ(fsync(a), 0) << errno_text();
  const auto stats = this->a().stats();
  EXPECT_EQ(stats["server"]["restarts"], 1);
  EXPECT_GE(stats["server"]["grace_waits"], 1);
  EXPECT_EQ(stats["client"]["lost_locks"], 0);
  close(b);
  close(a);
}

// A grace period shorter than the renewal, and A silent through it: its lock
// is lost and B takes it. A's buffered write returns, its data lost, and the
// EIO comes at fsync; its read gets EIO; once A unlocks, its I/O works again.
TEST_P(NfsServerRestart, ALockNotReclaimedInTimeIsLostToAnotherClient) {
  const int b = open_file(this->b(), "db");
  ASSERT_GE(b, 0) << errno_text();
  ASSERT_EQ(pwrite(b, "committed", 9, 0), 9) << errno_text();
  ASSERT_EQ(fsync(b), 0) << errno_text();
  const int a = open_file(this->a(), "db");
  ASSERT_GE(a, 0) << errno_text();
  ASSERT_EQ(lock(a, F_WRLCK), 0) << errno_text();

  ASSERT_EQ(this->b().ctl("server restart --grace 10s"), 0);
  EXPECT_EQ(lock(b, F_WRLCK), 0) << "A's lock went at the grace's end: " << errno_text();

  char buffer[9] = {};
  EXPECT_EQ(pread(a, buffer, sizeof buffer, 0), -1);
  EXPECT_EQ(errno, EIO) << errno_text();
  ASSERT_EQ(pwrite(a, "overwrite", 9, 0), 9) << "into the page cache: " << errno_text();
  EXPECT_EQ(fsync(a), -1);
  EXPECT_EQ(errno, EIO) << errno_text();
  EXPECT_EQ(this->a().stats()["client"]["lost_locks"], 1);

  ASSERT_EQ(pread(b, buffer, sizeof buffer, 0), 9) << errno_text();
  EXPECT_EQ(std::string(buffer, 9), "committed") << "A's write never reached the server";

  ASSERT_EQ(lock(b, F_UNLCK), 0) << errno_text();
  ASSERT_EQ(lock(a, F_UNLCK), 0) << errno_text();
  EXPECT_EQ(pread(a, buffer, sizeof buffer, 0), 9) << "given back: " << errno_text();
  close(a);
  close(b);
}

// A request of A's in the grace period tells it of the restart in time.
TEST_P(NfsServerRestart, ARequestInTheGracePeriodReclaims) {
  const int a = open_file(this->a(), "db");
  ASSERT_GE(a, 0) << errno_text();
  ASSERT_EQ(lock(a, F_WRLCK), 0) << errno_text();
  const int b = open_file(this->b(), "db");
  ASSERT_GE(b, 0) << errno_text();
  ASSERT_EQ(this->a().ctl("server restart --grace 10s"), 0);
  ASSERT_EQ(pwrite(a, "x", 1, 0), 1) << errno_text();  // reaches the server: A learns of it
  EXPECT_EQ(lock(b, F_WRLCK), -1);
  EXPECT_EQ(errno, EAGAIN) << errno_text();
  EXPECT_EQ(fsync(a), 0) << errno_text();
  close(b);
  close(a);
}

// A restart ends an outage: the requests waiting for the server go on.
TEST_P(NfsServerRestart, ARestartEndsAnOutage) {
  ASSERT_EQ(this->a().ctl("server down"), 0);
  ASSERT_EQ(this->a().ctl("server restart --grace 0s"), 0);
  const auto server = this->a().stats()["server"];
  EXPECT_EQ(server["up"], true);
  EXPECT_EQ(server["in_grace"], false);
  const int fd = open_file(this->b(), "after");
  EXPECT_GE(fd, 0) << errno_text();
  close(fd);
}

INSTANTIATE_TEST_SUITE_P(Nfs, NfsServerRestart, ::testing::Values("nfs", "nfs42"),
                         [](const auto& info) { return info.param; });

TEST(LocalServerRestart, ALocalProfileHasNoServer) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  EXPECT_EQ(vol.ctl("server restart"), EINVAL);
}

}  // namespace
