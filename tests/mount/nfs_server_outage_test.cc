// SPDX-License-Identifier: Apache-2.0
// Server outages on NFS profiles, through real mounts (docs/nfs.md, "Server
// outages"): `ctl server down` ... `server up`. A hard mount's request waits
// for the server, a soft one's fails with EIO after the major timeout
// (softerr: ETIMEDOUT), and a process killed while it waits ends.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "tests/support/mounted_volume.h"

namespace {

using mimicfs::testing::MountedVolume;

std::string errno_text() { return std::strerror(errno); }

// Whether the server has `n` requests waiting within 10 s.
bool waiting_becomes(const MountedVolume& volume, int n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (volume.stats()["server"]["waiting"] != n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

class NfsServerOutage : public ::testing::TestWithParam<const char*> {};

// A create waits through the outage and succeeds once the server is back,
// charged the emulated time that passed (400 s: two major timeouts).
TEST_P(NfsServerOutage, AHardMountWaitsUntilTheServerIsBack) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam());
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ASSERT_EQ(vol.ctl("server down"), 0);
  std::atomic<int> result{-2};
  std::thread creator([&] {
    const int fd = open(vol.file("during").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    result = fd >= 0 ? 0 : errno;
    if (fd >= 0) close(fd);
  });
  ASSERT_TRUE(waiting_becomes(vol, 1));
  // Longer than the kernel keeps the root's attributes: the way to
  // .mimicfs/ctl stays open through the outage.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(result, -2) << "it waits for the server";
  ASSERT_EQ(vol.ctl("time advance 400s"), 0);
  ASSERT_EQ(vol.ctl("server up"), 0);
  creator.join();
  EXPECT_EQ(result, 0) << std::strerror(result);
  struct stat st {};
  EXPECT_EQ(stat(vol.file("during").c_str(), &st), 0) << errno_text();
  const auto server = vol.stats()["server"];
  EXPECT_EQ(server["up"], true);
  EXPECT_EQ(server["outages"], 1);
  EXPECT_EQ(server["waiting"], 0);
  EXPECT_EQ(server["major_timeouts"], 2);
}

// A soft mount fails at once in real time, 180 s later in emulated time; a
// buffered write returns and its writeback's EIO comes at fsync.
TEST_P(NfsServerOutage, ASoftMountFailsWithEioAfterTheMajorTimeout) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam(), {"--set", "client.timeout_mode=soft"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << errno_text();
  ASSERT_EQ(vol.ctl("server down"), 0);
  const uint64_t before = vol.emulated_ns();
  EXPECT_EQ(open(vol.file("during").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644), -1);
  EXPECT_EQ(errno, EIO) << errno_text();
  EXPECT_GE(vol.emulated_ns() - before, 180'000'000'000u);
  EXPECT_EQ(write(fd, "lost", 4), 4) << "into the page cache: " << errno_text();
  EXPECT_EQ(fsync(fd), -1);
  EXPECT_EQ(errno, EIO) << errno_text();
  ASSERT_EQ(vol.ctl("server up"), 0);
  EXPECT_EQ(write(fd, "kept", 4), 4);
  EXPECT_EQ(fsync(fd), 0) << errno_text();
  EXPECT_EQ(close(fd), 0);
  EXPECT_GE(vol.stats()["server"]["major_timeouts"], 2);
}

TEST_P(NfsServerOutage, SofterrFailsWithEtimedout) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam(), {"--set", "client.timeout_mode=softerr"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ASSERT_EQ(vol.ctl("server down"), 0);
  EXPECT_EQ(mkdir(vol.file("d").c_str(), 0755), -1);
  EXPECT_EQ(errno, ETIMEDOUT) << errno_text();
  ASSERT_EQ(vol.ctl("server up"), 0);
  EXPECT_EQ(mkdir(vol.file("d").c_str(), 0755), 0) << errno_text();
}

// A process killed while its request waits through a hard outage ends: the
// daemon stops waiting for a caller that is dying.
TEST_P(NfsServerOutage, AProcessKilledWhileItWaitsEnds) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam());
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ASSERT_EQ(vol.ctl("server down"), 0);
  const std::string path = vol.file("never");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    open(path.c_str(), O_CREAT | O_WRONLY, 0644);
    _exit(0);
  }
  ASSERT_TRUE(waiting_becomes(vol, 1));
  ASSERT_EQ(kill(child, SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(2));
  EXPECT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(vol.ctl("server up"), 0);
}

// A power cut while a write waits for the server: the crash and `server up`
// both answer (the cut's cache drops go to a worker, as during a freeze: a
// waiting request may hold locks they need), and the write ends with EIO.
TEST_P(NfsServerOutage, ACrashDuringAnOutageEndsTheWaitingRequest) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam());
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << errno_text();
  const std::string page(4096, 'p');
  ASSERT_EQ(pwrite(fd, page.data(), page.size(), 0), 4096);
  ASSERT_EQ(vol.ctl("server down"), 0);
  std::atomic<int> result{-2};
  std::thread writer([&] {
    result = pwrite(fd, page.data(), page.size(), 4096) == 4096 ? 0 : errno;
  });
  ASSERT_TRUE(waiting_becomes(vol, 1));
  EXPECT_EQ(vol.ctl("crash"), 0);
  EXPECT_EQ(vol.ctl("server up"), 0);
  writer.join();
  EXPECT_EQ(result, EIO) << std::strerror(result);
  close(fd);
}

// The same for a create, which holds its directory's lock meanwhile.
TEST_P(NfsServerOutage, ACrashDuringAnOutageEndsAWaitingCreate) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam());
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ASSERT_EQ(mkdir(vol.file("d").c_str(), 0755), 0) << errno_text();
  ASSERT_EQ(vol.ctl("sync"), 0);
  const int made = open(vol.file("d/undone").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(made, 0) << errno_text();
  close(made);
  ASSERT_EQ(vol.ctl("server down"), 0);
  std::atomic<int> result{-2};
  std::thread creator([&] {
    const int fd = open(vol.file("d/during").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    result = fd >= 0 ? 0 : errno;
    if (fd >= 0) close(fd);
  });
  ASSERT_TRUE(waiting_becomes(vol, 1));
  EXPECT_EQ(vol.ctl("crash"), 0);
  EXPECT_EQ(vol.ctl("server up"), 0);
  creator.join();
  EXPECT_EQ(result, EIO) << std::strerror(result);
}

// A lock is the server's: fcntl waits through a hard outage (F_SETLK too: the
// LOCK itself gets no answer) and fails with EIO on a soft mount.
TEST_P(NfsServerOutage, AnFcntlLockWaitsOrTimesOut) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam());
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << errno_text();
  ASSERT_EQ(vol.ctl("server down"), 0);
  std::atomic<int> result{-2};
  std::thread locker([&] {
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    result = fcntl(fd, F_SETLK, &lock) == 0 ? 0 : errno;
  });
  ASSERT_TRUE(waiting_becomes(vol, 1));
  EXPECT_EQ(result, -2) << "it waits for the server";
  ASSERT_EQ(vol.ctl("server up"), 0);
  locker.join();
  EXPECT_EQ(result, 0) << std::strerror(result);
  close(fd);

  MountedVolume soft(GetParam(), {"--set", "client.timeout_mode=soft"});
  ASSERT_TRUE(soft.mounted()) << soft.error();
  const int soft_fd = open(soft.file("f").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(soft_fd, 0) << errno_text();
  ASSERT_EQ(soft.ctl("server down"), 0);
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  EXPECT_EQ(fcntl(soft_fd, F_SETLK, &lock), -1);
  EXPECT_EQ(errno, EIO) << errno_text();
  ASSERT_EQ(soft.ctl("server up"), 0);
  EXPECT_EQ(fcntl(soft_fd, F_SETLK, &lock), 0) << errno_text();
  close(soft_fd);
}

// A close sends nothing that must wait: a reader's has nothing to write back,
// and a writer's writes went (or waited) when they were made.
TEST_P(NfsServerOutage, ACloseDoesNotWait) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol(GetParam());
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << errno_text();
  ASSERT_EQ(write(fd, "data", 4), 4);
  ASSERT_EQ(vol.ctl("server down"), 0);
  EXPECT_EQ(close(fd), 0) << errno_text();
  ASSERT_EQ(vol.ctl("server up"), 0);
}

INSTANTIATE_TEST_SUITE_P(Profiles, NfsServerOutage, ::testing::Values("nfs", "nfs42"));

TEST(LocalServerOutage, ALocalProfileHasNoServer) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  EXPECT_EQ(vol.ctl("server down"), EINVAL);
  EXPECT_FALSE(vol.stats().contains("server"));
}

}  // namespace
