// SPDX-License-Identifier: Apache-2.0
// Emulated time, `ctl crash` and fault rules through a real mount: what a
// program sees through the kernel, and what the command line accepts.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/mounted_volume.h"

namespace mimicfs::testing {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_at(int fd, const std::string& text, off_t offset) {
  ASSERT_EQ(pwrite(fd, text.data(), text.size(), offset), static_cast<ssize_t>(text.size()));
}

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

void create_file(const std::string& path, const std::string& contents = "") {
  const int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0) << path;
  if (!contents.empty()) write_at(fd, contents, 0);
  close(fd);
}

void sync_path(const std::string& path, bool datasync = false) {
  const int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(datasync ? fdatasync(fd) : fsync(fd), 0) << path;
  close(fd);
}

// A single-threaded workload: create, write, fsync, overwrite, read, close.
uint64_t workload_cost(const std::string& profile) {
  MountedVolume vol(profile);
  EXPECT_TRUE(vol.mounted()) << vol.error();
  if (!vol.mounted()) return 0;
  const int fd = open(vol.file("db").c_str(), O_CREAT | O_RDWR, 0644);
  std::string page(16384, 'a');
  for (int i = 0; i < 64; ++i) write_at(fd, page, i * 16384);
  EXPECT_EQ(fsync(fd), 0);
  for (int i = 0; i < 64; i += 3) write_at(fd, std::string(4096, 'b'), i * 16384 + 100);
  EXPECT_EQ(fdatasync(fd), 0);
  close(fd);
  EXPECT_EQ(unlink(vol.file("db").c_str()), 0);
  return vol.emulated_ns();
}

TEST(EmulatedClock, VirtualTimeIsTheSameToTheNanosecondAcrossRuns) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const char* profile : {"nfs", "ext4", "xfs"}) {
    const uint64_t first = workload_cost(profile);
    const uint64_t second = workload_cost(profile);
    EXPECT_GT(first, 0u) << profile;
    EXPECT_EQ(first, second) << profile;
  }
}

TEST(EmulatedClock, StatsShowTimePerOperationPerFileAndInTotal) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_RDWR, 0644);
  write_at(fd, std::string(8192, 'x'), 0);
  ASSERT_EQ(fsync(fd), 0);
  const auto stats = vol.stats();
  close(fd);
  EXPECT_EQ(stats["clock"]["mode"], "virtual");
  const uint64_t fsync_ns = stats["ops"]["fsync"]["emulated_ns"].get<uint64_t>();
  const uint64_t write_ns = stats["ops"]["write"]["emulated_ns"].get<uint64_t>();
  EXPECT_GE(fsync_ns, 500'000u) << "ext4's commit";
  EXPECT_GT(write_ns, 0u);
  const uint64_t create_ns = stats["ops"]["create"]["emulated_ns"].get<uint64_t>();
  EXPECT_EQ(create_ns, 10'000u) << "ext4's metadata_ns";
  EXPECT_EQ(stats["files"]["/f"]["emulated_ns"].get<uint64_t>(), create_ns + fsync_ns + write_ns);
  EXPECT_EQ(stats["clock"]["emulated_ns"].get<uint64_t>(), create_ns + fsync_ns + write_ns);
  EXPECT_EQ(stats["files"]["/f"]["unsynced_bytes"], 0);
}

TEST(EmulatedClock, RealLatencyWaitsAtLeastTheCost) {
  MIMICFS_REQUIRE_MOUNTABLE();
  // ext4-hdd's fsync commits for 10 ms; at scale 2 it must take at least 20 ms
  // of wall time (a lower bound only: the machine may be slower, never faster).
  MountedVolume vol("ext4-hdd", {"--latency", "real:2"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  EXPECT_EQ(vol.stats()["clock"]["mode"], "real:2");
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_RDWR, 0644);
  write_at(fd, "x", 0);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(fsync(fd), 0);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  close(fd);
  EXPECT_GE(elapsed, std::chrono::milliseconds(20));
  EXPECT_EQ(vol.ctl("latency virtual"), 0);
  EXPECT_EQ(vol.stats()["clock"]["mode"], "virtual");
}

// `ctl time advance`: idle time passes on the emulated clock, and the
// kernel's threads it reaches run (the flusher every 5 s on ext4). Real
// latency's clock is the host's: refused there.
TEST(EmulatedClock, TimeAdvanceLetsIdleTimePass) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const uint64_t before = vol.stats()["clock"]["emulated_ns"].get<uint64_t>();
  const uint64_t runs = vol.stats()["background"]["flusher_runs"].get<uint64_t>();
  ASSERT_EQ(vol.ctl("time advance 6s"), 0);
  EXPECT_EQ(vol.stats()["clock"]["emulated_ns"].get<uint64_t>(), before + 6'000'000'000u);
  EXPECT_EQ(vol.stats()["background"]["flusher_runs"].get<uint64_t>(), runs + 1);
  EXPECT_EQ(vol.ctl("time advance 6"), EINVAL) << "no unit";
  EXPECT_EQ(vol.ctl("time advance 0s"), EINVAL);
  ASSERT_EQ(vol.ctl("latency real"), 0);
  EXPECT_EQ(vol.ctl("time advance 1s"), EINVAL) << "the host's clock";
}

// ---------------------------------------------------------------------------
// ctl crash

TEST(Crash, DropsWhatWasNotSyncedAndKeepsWhatWas) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const char* profile : {"ext4", "xfs", "btrfs", "nfs"}) {
    SCOPED_TRACE(profile);
    MountedVolume vol(profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    const std::string path = vol.file("redo.log");
    int fd = open(path.c_str(), O_CREAT | O_RDWR, 0644);
    ASSERT_GE(fd, 0);
    write_at(fd, std::string(10000, 's'), 0);
    ASSERT_EQ(fsync(fd), 0);
    write_at(fd, std::string(100, 'u'), 50);      // an unsynced overwrite
    write_at(fd, std::string(5000, 'u'), 10000);  // an unsynced append
    EXPECT_EQ(vol.file_stats("redo.log")["unsynced_bytes"], 5100);
    ASSERT_EQ(vol.ctl("crash"), 0);
    close(fd);
    // On nfs the close above flushed nothing more: the crash came first.
    EXPECT_EQ(read_file(path), std::string(10000, 's'));
    EXPECT_EQ(vol.file_stats("redo.log")["unsynced_bytes"], 0);
  }
}

// A power cut ends the world it interrupts: a descriptor opened before it gets
// EIO for everything, as a process after a reboot would have none; a new open
// sees the crashed state.
TEST(Crash, DescriptorsOpenedBeforeACrashGetEio) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("t.ibd");
  const int fd = open(path.c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  write_at(fd, std::string(8192, 's'), 0);
  ASSERT_EQ(fsync(fd), 0);
  write_at(fd, "unsynced", 0);
  const int dir = open(vol.path().c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  ASSERT_EQ(vol.ctl("crash"), 0);

  char buffer[16];
  EXPECT_EQ(pread(fd, buffer, sizeof buffer, 0), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(pwrite(fd, "x", 1, 0), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(fsync(fd), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(fdatasync(fd), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(ftruncate(fd, 0), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(fallocate(fd, 0, 0, 4096), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(lseek(fd, 0, SEEK_DATA), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(fsync(dir), -1);
  EXPECT_EQ(errno, EIO);
  close(fd);
  close(dir);

  EXPECT_EQ(read_file(path), std::string(8192, 's')) << "a new open sees the durable state";
  const int again = open(path.c_str(), O_RDWR);
  ASSERT_GE(again, 0);
  write_at(again, "new", 0);
  EXPECT_EQ(fsync(again), 0);
  close(again);
  EXPECT_EQ(vol.stats()["power"]["crashes"], 1);
}

// What the kernel answers without asking the daemon, the daemon cannot refuse:
// a page another descriptor read back since the crash is in the page cache
// again, and a pre-crash descriptor's read of it is served from there; lseek
// with SEEK_SET, SEEK_CUR or SEEK_END never leaves the kernel. The pages no
// one read back, and SEEK_DATA/SEEK_HOLE, still reach the daemon: EIO.
TEST(Crash, WhatThePageCacheAnswersAPreCrashDescriptorStillGets) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("t.ibd");
  const int fd = open(path.c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  write_at(fd, std::string(4 << 20, 's'), 0);
  ASSERT_EQ(fsync(fd), 0);
  ASSERT_EQ(vol.ctl("crash"), 0);

  const int fresh = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fresh, 0);
  ASSERT_EQ(posix_fadvise(fresh, 0, 0, POSIX_FADV_RANDOM), 0) << "no readahead past page 0";
  char page[4096];
  ASSERT_EQ(pread(fresh, page, sizeof page, 0), 4096) << "a new descriptor reads page 0 back";
  close(fresh);
  EXPECT_EQ(pread(fd, page, sizeof page, 0), 4096) << "from the page cache";
  EXPECT_EQ(std::string(page, 4), "ssss");
  EXPECT_EQ(pread(fd, page, sizeof page, 2 << 20), -1) << "a page no one read back";
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(lseek(fd, 100, SEEK_SET), 100);
  EXPECT_EQ(lseek(fd, 0, SEEK_END), 4 << 20);
  EXPECT_EQ(lseek(fd, 0, SEEK_DATA), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(pwrite(fd, "x", 1, 0), -1) << "a write always reaches the daemon";
  EXPECT_EQ(errno, EIO);
  close(fd);
}

// btrfs commits an inode's names at its fsync (the log tree): with 30,000
// removals pending in one directory, the fsync of a file elsewhere commits
// none of them and must not look at each (the journal once scanned them all
// per removal: 1.4 s here, against 0.1 ms); the directory's fsync commits
// them all (0.1-0.3 s). Bounds far from both, under the sanitizers too: what
// they pin is the complexity.
TEST(Durability, AFsyncWithManyRemovalsPendingCostsWhatItCommits) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("btrfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  constexpr int kRemovals = 30000;
  ASSERT_EQ(mkdir(vol.file("removed").c_str(), 0755), 0);
  for (int i = 0; i < kRemovals; ++i) create_file(vol.file("removed/" + std::to_string(i)));
  ASSERT_EQ(vol.ctl("sync"), 0);
  for (int i = 0; i < kRemovals; ++i) {
    ASSERT_EQ(unlink(vol.file("removed/" + std::to_string(i)).c_str()), 0);
  }
  create_file(vol.file("other"), "data");
  auto seconds = [](auto&& call) {
    const auto start = std::chrono::steady_clock::now();
    call();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const double one = seconds([&] { sync_path(vol.file("other")); });
  const double all = seconds([&] { sync_path(vol.file("removed")); });
  std::cout << "[ figures  ] fsync of one file " << one << " s, of the directory " << all << " s\n";
  EXPECT_LT(one, 0.25) << "commits one file";
  EXPECT_LT(all, 10.0) << "commits every removal";
}

// A mapping made before the crash faults in through its stale descriptor: SIGBUS.
TEST(Crash, AMappingFromBeforeTheCrashFaultsWithSigbus) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("shm");
  int fd = open(path.c_str(), O_CREAT | O_RDWR, 0644);
  write_at(fd, std::string(8192, 'a'), 0);
  ASSERT_EQ(fsync(fd), 0);
  write_at(fd, "b", 4096);  // unsynced: the crash puts the file back and drops its pages
  close(fd);
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGBUS, SIG_DFL);  // not a sanitizer's handler: the kernel's verdict is the test
    const int mapped = open(path.c_str(), O_RDONLY);
    void* map = mmap(nullptr, 8192, PROT_READ, MAP_SHARED, mapped, 0);
    if (map == MAP_FAILED) _exit(2);
    char byte = 0;
    if (write(ready[1], &byte, 1) != 1 || read(go[0], &byte, 1) != 1) _exit(3);
    volatile char seen = static_cast<const char*>(map)[4096];
    (void)seen;
    _exit(0);
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  ASSERT_EQ(vol.ctl("crash"), 0);
  ASSERT_EQ(write(go[1], &byte, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) << "status " << status;
  for (int p : {ready[0], ready[1], go[0], go[1]}) close(p);
}

// `crash hold`: the volume stays off (every operation EIO) until `restart`, so a
// server can be stopped before anything reaches the crashed state.
TEST(Crash, AHeldVolumeAnswersEioUntilRestart) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("xfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("redo");
  const int fd = open(path.c_str(), O_CREAT | O_RDWR, 0644);
  write_at(fd, "committed", 0);
  ASSERT_EQ(fsync(fd), 0);
  close(fd);
  create_file(vol.file("not-committed"));
  ASSERT_EQ(vol.ctl("crash hold"), 0);
  EXPECT_EQ(vol.stats()["power"]["on"], false);
  EXPECT_EQ(open(path.c_str(), O_RDONLY), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(open(vol.file("new").c_str(), O_CREAT | O_RDWR, 0644), -1);
  EXPECT_EQ(errno, EIO);
  ASSERT_EQ(vol.ctl("restart"), 0);
  EXPECT_EQ(vol.stats()["power"]["on"], true);
  EXPECT_EQ(read_file(path), "committed");
  EXPECT_FALSE(exists(vol.file("not-committed")));
}

// `crash freeze`: the operations sent to the crashed volume wait, so the
// program learns nothing of the cut; a killed program dies at the restart.
TEST(Crash, AFrozenVolumeHoldsOperationsUntilRestart) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("wal").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  write_at(fd, "committed", 0);
  ASSERT_EQ(fsync(fd), 0);
  ASSERT_EQ(vol.ctl("crash freeze"), 0);
  // Two writers that would report their commit: one through the descriptor it
  // had before the cut, one opening the file anew.
  std::vector<pid_t> children;
  for (const bool reopen : {false, true}) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const int wal = reopen ? open(vol.file("wal").c_str(), O_RDWR) : fd;
      _exit(wal >= 0 && pwrite(wal, "x", 1, 0) == 1 && fsync(wal) == 0 ? 0 : 1);
    }
    children.push_back(child);
  }
  nlohmann::json power;
  for (int i = 0; i < 400; ++i) {  // until their requests wait in the daemon
    power = vol.stats()["power"];
    if (power.value("frozen_operations", 0) == 2) break;
    usleep(10'000);
  }
  EXPECT_EQ(power["on"], false);
  EXPECT_EQ(power.value("frozen_operations", 0), 2);
  int status = 0;
  for (const pid_t child : children) {
    EXPECT_EQ(waitpid(child, &status, WNOHANG), 0) << "the writer waits";
    ASSERT_EQ(kill(child, SIGKILL), 0);
  }
  EXPECT_EQ(vol.ctl("sync"), EIO) << "nothing reaches the volume while it is off";
  ASSERT_EQ(vol.ctl("crash hold"), 0) << "a cut while frozen";
  ASSERT_EQ(vol.ctl("restart"), 0);
  for (const pid_t child : children) {
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  }
  EXPECT_EQ(fsync(fd), -1) << "a descriptor from before the cut";
  close(fd);
  EXPECT_EQ(read_file(vol.file("wal")), "committed");
}

// A program killed while its operation waits on a frozen volume ends at once,
// not at the restart: the kernel keeps it in an uninterruptible wait until its
// request is answered, where a CI job's timeout could never end it.
TEST(Crash, AProgramKilledWhileFrozenEndsWithoutARestart) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  create_file(vol.file("f"));
  ASSERT_EQ(vol.ctl("crash freeze"), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = open(vol.file("f").c_str(), O_RDONLY);
    char byte;
    _exit(fd >= 0 && read(fd, &byte, 1) >= 0 ? 0 : 1);
  }
  for (int i = 0; i < 400 && vol.stats()["power"].value("frozen_operations", 0) != 1; ++i) {
    usleep(10'000);
  }
  ASSERT_EQ(vol.stats()["power"].value("frozen_operations", 0), 1);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  pid_t reaped = 0;
  const auto killed = std::chrono::steady_clock::now();
  while (reaped == 0 && std::chrono::steady_clock::now() - killed < std::chrono::seconds(3)) {
    reaped = waitpid(child, &status, WNOHANG);
    if (reaped == 0) usleep(10'000);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_EQ(reaped, child) << "still waiting after " << seconds << " s";
  EXPECT_LT(seconds, 1.0);
  EXPECT_EQ(vol.stats()["power"].value("frozen_operations", 0), 0);
  EXPECT_EQ(vol.stats()["power"]["on"], false) << "the volume stays frozen";
  ASSERT_EQ(vol.ctl("restart"), 0);
  if (reaped == 0) {
    ASSERT_EQ(waitpid(child, &status, 0), child);
  }
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
}

// A frozen volume holds any number of operations: 64 writers (a server's
// threads in flight) all wait, none gets an error before the restart, the
// daemon still answers .mimicfs meanwhile, and the restart answers each EIO.
// Before, past 8 waiting operations the rest got EIO at once, and a program
// learned of the cut.
TEST(Crash, AFrozenVolumeHoldsSixtyFourWritersUntilTheRestart) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  if (vol.stats()["fuse"]["transport"] == "io_uring") {
    GTEST_SKIP() << "over FUSE io_uring a waiting request holds its ring entry (frozen_requests.h)";
  }
  constexpr int kWriters = 64;
  std::vector<int> fds;
  for (int i = 0; i < kWriters; ++i) {
    fds.push_back(open(vol.file("f" + std::to_string(i)).c_str(), O_CREAT | O_RDWR, 0644));
    ASSERT_GE(fds.back(), 0);
  }
  ASSERT_EQ(vol.ctl("sync"), 0);
  ASSERT_EQ(vol.ctl("crash freeze"), 0);
  std::vector<std::atomic<int>> outcome(kWriters);  // 0: waiting, 1: written, else -errno
  std::vector<std::thread> writers;
  for (int i = 0; i < kWriters; ++i) {
    writers.emplace_back([&, i] {
      const std::string block(4096, 'w');
      const ssize_t n = pwrite(fds[i], block.data(), block.size(), 0);
      outcome[i] = n >= 0 ? 1 : -errno;
    });
  }
  for (int i = 0; i < 500 && vol.stats()["power"].value("frozen_operations", 0) < kWriters; ++i) {
    usleep(10'000);
  }
  usleep(200'000);  // a writer refused at once would have returned by now
  const nlohmann::json power = vol.stats()["power"];  // the daemon still answers
  EXPECT_EQ(power.value("frozen_operations", 0), kWriters) << power;
  int returned = 0;
  for (const auto& o : outcome) returned += o.load() != 0;
  EXPECT_EQ(returned, 0) << "writers that learned of the cut before the restart";
  EXPECT_EQ(vol.ctl("restart"), 0);  // not ASSERT: the writers are joined first
  for (auto& writer : writers) writer.join();
  for (int i = 0; i < kWriters; ++i) {
    EXPECT_EQ(outcome[i].load(), -EIO) << "writer " << i;
    close(fds[i]);
  }
}

// `ctl sync`: everything written becomes durable, as sync(1) makes it on the
// real filesystem (FUSE passes no syncfs on).
TEST(Crash, CtlSyncMakesEverythingDurable) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const char* profile : {"ext4", "btrfs", "nfs"}) {
    SCOPED_TRACE(profile);
    MountedVolume vol(profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    ASSERT_EQ(mkdir(vol.file("d").c_str(), 0755), 0);
    const int fd = open(vol.file("d/f").c_str(), O_CREAT | O_RDWR, 0644);
    ASSERT_GE(fd, 0);
    write_at(fd, "written, never fsynced", 0);
    ASSERT_EQ(vol.ctl("sync"), 0);
    EXPECT_EQ(vol.file_stats("d/f")["unsynced_bytes"], 0);
    ASSERT_EQ(vol.ctl("crash"), 0);
    close(fd);
    EXPECT_EQ(read_file(vol.file("d/f")), "written, never fsynced");
  }
}

// `crash writeback=1`: every unsynced in-place overwrite reached the device.
TEST(Crash, WritebackBeforeTheCrashPersistsOverwrites) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  write_at(fd, std::string(8192, 'o'), 0);
  ASSERT_EQ(fsync(fd), 0);
  write_at(fd, std::string(8192, 'n'), 0);
  write_at(fd, "appended", 8192);
  ASSERT_EQ(vol.ctl("crash writeback=1 seed=3"), 0);
  close(fd);
  EXPECT_EQ(read_file(vol.file("f")), std::string(8192, 'n'));
  EXPECT_EQ(vol.ctl("crash writeback=3"), EINVAL);
  EXPECT_EQ(vol.ctl("crash sideways"), EINVAL);
}

// Crash points: a rule cuts the power at a chosen operation, from the command
// line or ctl, and the operation's own fate follows before/after.
TEST(CrashPoints, TheNthFsyncOfAPathCrashesAfterIt) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4", {"--fault", "op=fsync,path=/wal/*.log,nth=3,crash=after"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ASSERT_EQ(mkdir(vol.file("wal").c_str(), 0755), 0);
  const int fd = open(vol.file("wal/1.log").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  for (int i = 1; i <= 3; ++i) {
    write_at(fd, "commit " + std::to_string(i) + ";", (i - 1) * 9);
    ASSERT_EQ(fsync(fd), 0) << i;  // the third completes, then the power goes
  }
  EXPECT_EQ(pwrite(fd, "commit 4;", 9, 27), -1) << "the world it was opened in ended";
  EXPECT_EQ(errno, EIO);
  close(fd);
  EXPECT_EQ(read_file(vol.file("wal/1.log")), "commit 1;commit 2;commit 3;");
  const nlohmann::json power = vol.stats()["power"];
  EXPECT_EQ(power["crashes"], 1);
  EXPECT_NE(power["last_crash"].get<std::string>().find("fsync /wal/1.log (after it)"),
            std::string::npos)
      << power;
}

TEST(CrashPoints, ACrashBeforeAWriteLosesItAndTheVolumeCanStayOff) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("xfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("data").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  write_at(fd, "synced", 0);
  ASSERT_EQ(fsync(fd), 0);
  ASSERT_EQ(vol.ctl("fault add op=write,path=/data,crash=before,restart=ctl"), 0);
  EXPECT_EQ(pwrite(fd, "never", 5, 0), -1);
  EXPECT_EQ(errno, EIO);
  close(fd);
  EXPECT_EQ(vol.stats()["power"]["on"], false);
  EXPECT_EQ(open(vol.file("data").c_str(), O_RDONLY), -1);
  ASSERT_EQ(vol.ctl("restart"), 0);
  EXPECT_EQ(read_file(vol.file("data")), "synced");
}

// A write crashed after it completes: the kernel's pages are dropped after the
// reply (the request holds them locked until then), and nothing hangs.
TEST(CrashPoints, ACrashAfterABufferedWriteDoesNotHang) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("btrfs", {"--fault", "op=write,nth=2,crash=after"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  write_at(fd, std::string(4096, 'a'), 0);
  ASSERT_EQ(fsync(fd), 0);
  write_at(fd, std::string(4096, 'b'), 0);  // completes; the power goes after it
  close(fd);
  EXPECT_EQ(read_file(vol.file("f")), std::string(4096, 'a'));
}

// Background reclaim through a real mount: the unlinked file's space stays
// allocated (stats.json's `deferred`) until the clock gets there or `ctl settle`.
TEST(DeferredWork, SettleFinishesBackgroundReclaim) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("xfs", {"--set", "allocation.background_reclaim=true"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("t.ibd");
  int fd = open(path.c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  write_at(fd, std::string(1 << 20, 'p'), 0);
  for (off_t page = 1; page < 256; page += 2) {
    ASSERT_EQ(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, page * 4096, 4096), 0);
  }
  ASSERT_EQ(fsync(fd), 0);
  close(fd);
  ASSERT_TRUE(vol.wait_for_releases());
  const uint64_t allocated = vol.stats()["device"]["allocated_bytes"];
  ASSERT_EQ(unlink(path.c_str()), 0);
  const nlohmann::json after = vol.stats();
  EXPECT_EQ(after["deferred"]["pending_tasks"], 1);
  EXPECT_EQ(after["deferred"]["pending_free_bytes"], 128 * 4096);
  EXPECT_EQ(after["device"]["allocated_bytes"], allocated);
  EXPECT_GT(after["deferred"]["last_due_ns"].get<uint64_t>(),
            after["clock"]["emulated_ns"].get<uint64_t>());
  ASSERT_EQ(vol.ctl("settle"), 0);
  const nlohmann::json settled = vol.stats();
  EXPECT_EQ(settled["deferred"]["pending_tasks"], 0);
  EXPECT_EQ(settled["deferred"]["completed_tasks"], 1);
  EXPECT_EQ(settled["device"]["allocated_bytes"], allocated - 128 * 4096);
}

// xfs (its profile reclaims in the background): a deleted file's space is free
// for df at once, and a write that needs it waits for the reclaim instead of
// failing with ENOSPC, as xfs flushes its inode inactivation queue.
TEST(DeferredWork, ADeletedFilesSpaceIsUsableAtOnce) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("xfs", {"--set", "device.capacity_bytes=8388608", "--set",
                            "device.geometry=groups", "--set",
                            "device.allocation_group_bytes=0", "--set",
                            "device.group_metadata_bytes=0", "--set",
                            "allocation.speculative_preallocation=false"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  struct statvfs empty {};
  ASSERT_EQ(statvfs(vol.path().c_str(), &empty), 0);
  const std::string data(5 << 20, 'd');
  int fd = open(vol.file("a").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  write_at(fd, data, 0);
  ASSERT_EQ(fsync(fd), 0);
  close(fd);
  ASSERT_TRUE(vol.wait_for_releases());
  ASSERT_EQ(unlink(vol.file("a").c_str()), 0);
  ASSERT_EQ(vol.stats()["deferred"]["pending_tasks"], 1);
  struct statvfs deleted {};
  ASSERT_EQ(statvfs(vol.path().c_str(), &deleted), 0);
  EXPECT_EQ(deleted.f_bfree, empty.f_bfree) << "what the reclaim frees counts as free";
  fd = open(vol.file("b").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(pwrite(fd, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()))
      << strerror(errno);
  EXPECT_EQ(fsync(fd), 0);
  close(fd);
  const nlohmann::json after = vol.stats();
  EXPECT_EQ(after["deferred"]["pending_tasks"], 0);
  EXPECT_EQ(after["device"]["allocated_bytes"].get<uint64_t>(), data.size()) << "b's blocks only";
}

TEST(Crash, AFileCreatedSinceTheLastCommitIsGoneOnAJournalProfile) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  int fd = open(vol.file("committed").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_EQ(fsync(fd), 0);  // commits the journal: the entry is durable
  close(fd);
  fd = open(vol.file("new").c_str(), O_CREAT | O_RDWR, 0644);
  write_at(fd, "lost", 0);
  close(fd);
  ASSERT_EQ(rename(vol.file("committed").c_str(), vol.file("renamed").c_str()), 0);
  ASSERT_EQ(vol.ctl("crash"), 0);
  struct stat st {};
  EXPECT_NE(stat(vol.file("new").c_str(), &st), 0) << "created after the last commit";
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(stat(vol.file("committed").c_str(), &st), 0) << "the rename is undone";
  EXPECT_NE(stat(vol.file("renamed").c_str(), &st), 0);
}

// The clock moves 5 s at each open of /clock (a latency rule), and nothing else
// syncs: ext4's own commit every 5 s makes the name durable, the flusher writes
// the data back once it has been dirty for more than 30 s, and the commit at
// the same wake makes it durable.
TEST(Crash, Ext4CommitsEveryFiveSecondsAndTheFlusherWritesBackAfterThirty) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4", {"--fault", "op=open,path=/clock,latency=5s"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  create_file(vol.file("clock"));  // its create is not an open: the clock is at 0
  auto tick = [&] {
    const int fd = open(vol.file("clock").c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    close(fd);
  };
  create_file(vol.file("log"), "record 1");
  tick();  // 5 s: the commit
  EXPECT_EQ(vol.stats()["background"]["commits"], 1);
  ASSERT_EQ(vol.ctl("crash"), 0);
  EXPECT_TRUE(exists(vol.file("log"))) << "committed with the journal";
  EXPECT_EQ(read_file(vol.file("log")), "") << "its data was still in the page cache";

  const int fd = open(vol.file("log").c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  write_at(fd, "record 2", 0);  // dirty since the wake at 5 s
  close(fd);
  for (int i = 0; i < 6; ++i) tick();  // 35 s: 30 s since, not more
  EXPECT_EQ(vol.stats()["files"]["/log"]["dirty_bytes"], 4096);
  tick();  // 40 s
  const nlohmann::json after = vol.stats();
  EXPECT_EQ(after["files"]["/log"]["dirty_bytes"], 0);
  EXPECT_EQ(after["background"]["files_written_back"], 1);
  ASSERT_EQ(vol.ctl("crash"), 0);
  EXPECT_EQ(read_file(vol.file("log")), "record 2");
}

// "Rewrite a file in place" without fsync: open(O_TRUNC), write, close. The
// commit carries the truncate; ext4 writes a file truncated to 0 back at its
// close (auto_da_alloc), so the rewrite goes with it once closed, and not
// before: the zero-length file.
TEST(Crash, Ext4WritesBackAtCloseAFileTruncatedToZero) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4", {"--fault", "op=open,path=/clock,latency=5s"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  create_file(vol.file("clock"));
  auto tick = [&] {
    const int fd = open(vol.file("clock").c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    close(fd);
  };
  auto rewrite = [&](const std::string& contents) {
    const int fd = open(vol.file("state").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_GE(fd, 0);
    write_at(fd, contents, 0);
    return fd;
  };
  const int first = rewrite("old state");
  ASSERT_EQ(fsync(first), 0);
  close(first);

  const int open_across = rewrite("new state");
  tick();  // 5 s: the commit, the file still open and dirty
  ASSERT_EQ(vol.ctl("crash"), 0);
  close(open_across);
  EXPECT_TRUE(exists(vol.file("state")));
  EXPECT_EQ(read_file(vol.file("state")), "") << "the truncate committed, the rewrite not";

  close(rewrite("new state"));
  tick();  // 10 s
  ASSERT_EQ(vol.ctl("crash"), 0);
  EXPECT_EQ(read_file(vol.file("state")), "new state");
}

TEST(Crash, NfsServersCommitEntriesAtOnce) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("new").c_str(), O_CREAT | O_RDWR, 0644);
  write_at(fd, "kept by close-to-open", 0);
  close(fd);  // nfs: close writes back and COMMITs
  ASSERT_EQ(vol.ctl("crash"), 0);
  EXPECT_EQ(read_file(vol.file("new")), "kept by close-to-open");
}

TEST(Crash, ODsyncWritesSurvive) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("xfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int dir = open(vol.path().c_str(), O_RDONLY | O_DIRECTORY);
  const int fd = open(vol.file("log").c_str(), O_CREAT | O_WRONLY | O_DSYNC, 0644);
  ASSERT_EQ(fsync(dir), 0);  // the entry
  write_at(fd, "commit 1;", 0);
  write_at(fd, "commit 2;", 9);
  EXPECT_EQ(vol.file_stats("log")["unsynced_bytes"], 0);
  ASSERT_EQ(vol.ctl("crash"), 0);
  close(fd);
  close(dir);
  EXPECT_EQ(read_file(vol.file("log")), "commit 1;commit 2;");
}

TEST(Crash, ADirectoryFsyncMakesRenamesAndNewNamesDurable) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const char* profile : {"ext4", "xfs", "btrfs"}) {
    SCOPED_TRACE(profile);
    MountedVolume vol(profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    // The pattern of every careful log: write a temporary, sync it, rename it
    // into place, sync the directory.
    const int fd = open(vol.file("seg.tmp").c_str(), O_CREAT | O_WRONLY, 0644);
    write_at(fd, "segment", 0);
    ASSERT_EQ(fsync(fd), 0);
    close(fd);
    ASSERT_EQ(rename(vol.file("seg.tmp").c_str(), vol.file("seg.final").c_str()), 0);
    close(open(vol.file("empty").c_str(), O_CREAT | O_WRONLY, 0644));
    vol.reset_counters();
    const int dir = open(vol.path().c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_EQ(fsync(dir), 0);
    close(dir);
    EXPECT_EQ(vol.stats()["ops"]["fsync"]["count"], 1);
    EXPECT_GT(vol.stats()["ops"]["fsync"]["emulated_ns"], 0) << "the commit is charged";
    ASSERT_EQ(vol.ctl("crash"), 0);
    EXPECT_EQ(read_file(vol.file("seg.final")), "segment");
    struct stat st {};
    EXPECT_NE(stat(vol.file("seg.tmp").c_str(), &st), 0);
    EXPECT_EQ(stat(vol.file("empty").c_str(), &st), 0);
  }
}

// What each profile's sync makes durable (docs/time.md, "What a sync makes
// durable"), one guarantee per test, on every profile.

struct DurabilityCase {
  const char* profile;
  bool journal;      // ext4, xfs: one journal, any commit takes every namespace change
  bool synchronous;  // nfs: nothing pending
};
constexpr DurabilityCase kDurabilityCases[] = {
    {"ext4", true, false}, {"xfs", true, false}, {"btrfs", false, false}, {"nfs", false, true}};

// A file's fsync: its data, and on a journal every other namespace change;
// btrfs logs the synced file's names only.
TEST(Durability, AFileFsyncCommitsOtherNamesOnAJournalOnly) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const DurabilityCase& c : kDurabilityCases) {
    SCOPED_TRACE(c.profile);
    MountedVolume vol(c.profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    create_file(vol.file("synced"), "data");
    create_file(vol.file("neighbour"));
    sync_path(vol.file("synced"));
    ASSERT_EQ(vol.ctl("crash"), 0);
    EXPECT_EQ(read_file(vol.file("synced")), "data");
    EXPECT_EQ(exists(vol.file("neighbour")), c.journal || c.synchronous);
  }
}

// A new file's fsync makes its name durable with its new directories (btrfs
// logs new ancestors), everywhere.
TEST(Durability, ANewFilesFsyncMakesItsPathDurable) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const DurabilityCase& c : kDurabilityCases) {
    SCOPED_TRACE(c.profile);
    MountedVolume vol(c.profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    ASSERT_EQ(mkdir(vol.file("db").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(vol.file("db/base").c_str(), 0755), 0);
    create_file(vol.file("db/base/16384"), "page");
    sync_path(vol.file("db/base/16384"), /*datasync=*/true);
    ASSERT_EQ(vol.ctl("crash"), 0);
    EXPECT_EQ(read_file(vol.file("db/base/16384")), "page");
  }
}

// A rename nobody synced is undone by a crash, except on NFS.
TEST(Durability, AnUnsyncedRenameIsUndone) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const DurabilityCase& c : kDurabilityCases) {
    SCOPED_TRACE(c.profile);
    MountedVolume vol(c.profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    create_file(vol.file("seg.tmp"), "segment");
    sync_path(vol.file("seg.tmp"));
    ASSERT_EQ(rename(vol.file("seg.tmp").c_str(), vol.file("seg.final").c_str()), 0);
    ASSERT_EQ(vol.ctl("crash"), 0);
    EXPECT_EQ(exists(vol.file("seg.final")), c.synchronous);
    EXPECT_EQ(exists(vol.file("seg.tmp")), !c.synchronous);
  }
}

// The renamed file's own fsync makes its new name durable (btrfs logs the
// inode's names; a journal commits everything).
TEST(Durability, TheRenamedFilesFsyncMakesTheRenameDurable) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const DurabilityCase& c : kDurabilityCases) {
    SCOPED_TRACE(c.profile);
    MountedVolume vol(c.profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    create_file(vol.file("a"), "contents");
    sync_path(vol.file("a"));
    ASSERT_EQ(rename(vol.file("a").c_str(), vol.file("b").c_str()), 0);
    sync_path(vol.file("b"));
    ASSERT_EQ(vol.ctl("crash"), 0);
    EXPECT_EQ(read_file(vol.file("b")), "contents");
    EXPECT_FALSE(exists(vol.file("a")));
  }
}

// A directory's fsync: every change on a journal, the entries in that directory
// on btrfs (a change in another directory waits for its own sync).
TEST(Durability, ADirectoryFsyncCommitsItsEntriesAndOnAJournalEverything) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const DurabilityCase& c : kDurabilityCases) {
    SCOPED_TRACE(c.profile);
    MountedVolume vol(c.profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    ASSERT_EQ(mkdir(vol.file("wal").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(vol.file("tmp").c_str(), 0755), 0);
    sync_path(vol.path());
    create_file(vol.file("wal/000001.log"));
    create_file(vol.file("tmp/scratch"));
    vol.reset_counters();
    sync_path(vol.file("wal"));
    const nlohmann::json stats = vol.stats();
    EXPECT_EQ(stats["ops"]["fsync"]["count"], 1) << "a directory's fsync is counted";
    EXPECT_EQ(stats["ops"]["fsync"]["emulated_ns"].get<uint64_t>() > 0, !c.synchronous)
        << "and its commit charged where there was one";
    ASSERT_EQ(vol.ctl("crash"), 0);
    EXPECT_TRUE(exists(vol.file("wal/000001.log")));
    EXPECT_EQ(exists(vol.file("tmp/scratch")), c.journal || c.synchronous);
  }
}

// An unlink, and a rename over a file, are undone by a crash until committed:
// on a journal by any commit, on btrfs by the directory's fsync; on NFS never.
TEST(Durability, AnUnsyncedUnlinkAndReplaceAreUndone) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const DurabilityCase& c : kDurabilityCases) {
    SCOPED_TRACE(c.profile);
    MountedVolume vol(c.profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    create_file(vol.file("gone"), "unlinked");
    create_file(vol.file("state"), "version 1");
    create_file(vol.file("state.tmp"), "version 2");
    sync_path(vol.path());
    sync_path(vol.file("gone"));
    sync_path(vol.file("state"));
    sync_path(vol.file("state.tmp"));
    ASSERT_EQ(unlink(vol.file("gone").c_str()), 0);
    ASSERT_EQ(rename(vol.file("state.tmp").c_str(), vol.file("state").c_str()), 0);
    ASSERT_EQ(vol.ctl("crash"), 0);
    if (c.synchronous) {
      EXPECT_FALSE(exists(vol.file("gone")));
      EXPECT_EQ(read_file(vol.file("state")), "version 2");
    } else {
      EXPECT_EQ(read_file(vol.file("gone")), "unlinked");
      EXPECT_EQ(read_file(vol.file("state")), "version 1");
      EXPECT_EQ(read_file(vol.file("state.tmp")), "version 2");
    }
    // The directory's fsync makes both durable everywhere.
    ASSERT_EQ(unlink(vol.file("gone").c_str()) == 0, !c.synchronous);
    if (!c.synchronous) {
      ASSERT_EQ(rename(vol.file("state.tmp").c_str(), vol.file("state").c_str()), 0);
    }
    sync_path(vol.path());
    ASSERT_EQ(vol.ctl("crash"), 0);
    EXPECT_FALSE(exists(vol.file("gone")));
    EXPECT_EQ(read_file(vol.file("state")), "version 2");
    EXPECT_FALSE(exists(vol.file("state.tmp")));
  }
}

// A size change: durable at the file's sync on a local filesystem; on NFS the
// client writes the file back and commits it, and the server's SETATTR is stable.
TEST(Durability, ATruncateIsDurableAtOnceOnNfsOnly) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const DurabilityCase& c : kDurabilityCases) {
    SCOPED_TRACE(c.profile);
    MountedVolume vol(c.profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    const int fd = open(vol.file("t").c_str(), O_CREAT | O_RDWR, 0644);
    ASSERT_GE(fd, 0);
    write_at(fd, std::string(8192, 's'), 0);
    ASSERT_EQ(fsync(fd), 0);
    write_at(fd, "unsynced", 0);
    ASSERT_EQ(ftruncate(fd, 4096), 0);
    ASSERT_EQ(vol.ctl("crash"), 0);
    close(fd);
    const std::string after = read_file(vol.file("t"));
    if (c.synchronous) {
      EXPECT_EQ(after, "unsynced" + std::string(4096 - 8, 's'));
    } else {
      EXPECT_EQ(after, std::string(8192, 's'));
    }
  }
}

// Another file's fsync: on a journal its commit carries this file's truncate,
// and the rewrite still in the page cache is lost (the zero-length file);
// btrfs logs the synced file alone; NFS committed the truncate at once.
TEST(Durability, AnotherFilesFsyncCarriesATruncateOnAJournal) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const DurabilityCase& c : kDurabilityCases) {
    SCOPED_TRACE(c.profile);
    MountedVolume vol(c.profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    create_file(vol.file("other"));
    const int fd = open(vol.file("t").c_str(), O_CREAT | O_RDWR, 0644);
    ASSERT_GE(fd, 0);
    write_at(fd, std::string(8192, 's'), 0);
    ASSERT_EQ(fsync(fd), 0);
    ASSERT_EQ(ftruncate(fd, 0), 0);
    write_at(fd, "rewritten", 0);
    const int other = open(vol.file("other").c_str(), O_WRONLY);
    ASSERT_GE(other, 0);
    write_at(other, "synced", 0);
    ASSERT_EQ(fsync(other), 0);
    ASSERT_EQ(vol.ctl("crash"), 0);
    close(other);
    close(fd);
    EXPECT_EQ(read_file(vol.file("other")), "synced");
    const std::string after = read_file(vol.file("t"));
    if (c.journal) {
      EXPECT_EQ(after, "");
    } else if (c.synchronous) {
      EXPECT_EQ(after, "") << "the SETATTR committed; the rewrite was never written back";
    } else {
      EXPECT_EQ(after, std::string(8192, 's'));
    }
  }
}

// An O_SYNC write commits like fsync: on a journal the pending names with it.
TEST(Durability, AnOSyncWriteCommitsLikeFsync) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const DurabilityCase& c : kDurabilityCases) {
    SCOPED_TRACE(c.profile);
    MountedVolume vol(c.profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    create_file(vol.file("other"));
    const int fd = open(vol.file("log").c_str(), O_CREAT | O_WRONLY | O_SYNC, 0644);
    ASSERT_GE(fd, 0);
    write_at(fd, "record", 0);
    ASSERT_EQ(vol.ctl("crash"), 0);
    close(fd);
    EXPECT_EQ(read_file(vol.file("log")), "record");
    EXPECT_EQ(exists(vol.file("other")), c.journal || c.synchronous);
  }
}

// ---------------------------------------------------------------------------
// Fault rules

TEST(Faults, ARuleFromTheCommandLineFailsTheNthMatchingCall) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4", {"--fault", "op=fsync,path=/db/*.ibd,error=EIO,nth=2"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ASSERT_EQ(mkdir(vol.file("db").c_str(), 0755), 0);
  const int other = open(vol.file("other").c_str(), O_CREAT | O_RDWR, 0644);
  const int fd = open(vol.file("db/t.ibd").c_str(), O_CREAT | O_RDWR, 0644);
  write_at(fd, "x", 0);
  EXPECT_EQ(fsync(other), 0) << "the path does not match";
  EXPECT_EQ(fsync(fd), 0);
  EXPECT_EQ(fsync(fd), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(fsync(fd), 0) << "nth=2 fires once";
  close(fd);
  close(other);
  const auto faults = vol.stats()["faults"];
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_EQ(faults[0]["fired"], 1);
  EXPECT_EQ(faults[0]["matched"], 3);
  EXPECT_EQ(vol.stats()["ops"]["fsync"]["errors"]["EIO"], 1);
}

// A rule may pick fdatasync(2) apart from fsync(2) (a redo log's flush
// against a data file's), and stats.json counts the two apart.
TEST(Faults, FdatasyncIsAnOperationOfItsOwn) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4", {"--fault", "op=fdatasync,error=EIO"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("redo").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  write_at(fd, "x", 0);
  EXPECT_EQ(fsync(fd), 0);
  EXPECT_EQ(fdatasync(fd), -1);
  EXPECT_EQ(errno, EIO);
  ASSERT_EQ(vol.ctl("fault clear"), 0);
  ASSERT_EQ(vol.ctl("fault add op=fsync,error=ENOSPC,count=2"), 0);
  EXPECT_EQ(fdatasync(fd), -1) << "fsync names both calls";
  EXPECT_EQ(errno, ENOSPC);
  EXPECT_EQ(fsync(fd), -1);
  EXPECT_EQ(errno, ENOSPC);
  close(fd);
  const auto ops = vol.stats()["ops"];
  EXPECT_EQ(ops["fsync"]["count"], 2);
  EXPECT_EQ(ops["fsync"]["errors"]["ENOSPC"], 1);
  EXPECT_EQ(ops["fdatasync"]["count"], 2);
  EXPECT_EQ(ops["fdatasync"]["errors"]["EIO"], 1);
  EXPECT_EQ(ops["fdatasync"]["errors"]["ENOSPC"], 1);
}

TEST(Faults, RulesSetWhileMountedInjectErrorsAndLatencyAndAreCleared) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_EQ(vol.ctl("fault add op=write,error=ENOSPC"), 0);
  EXPECT_EQ(pwrite(fd, "abc", 3, 0), -1);
  EXPECT_EQ(errno, ENOSPC);
  ASSERT_EQ(vol.ctl("fault clear"), 0);
  ASSERT_EQ(vol.ctl("fault add op=read,latency=7ms"), 0);
  write_at(fd, "abc", 0);
  vol.reset_counters();
  char buffer[3];
  ASSERT_EQ(pread(fd, buffer, 3, 0), 3);
  EXPECT_GE(vol.stats()["ops"]["read"]["emulated_ns"].get<uint64_t>(), 7'000'000u);
  close(fd);
}

TEST(Faults, AMalformedRuleOrUnknownCommandIsEinvalAndChangesNothing) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  EXPECT_EQ(vol.ctl("fault add op=wrte,error=EIO"), EINVAL);
  EXPECT_EQ(vol.ctl("fault add op=write,error=EWHAT"), EINVAL);
  EXPECT_EQ(vol.ctl("latency fast"), EINVAL);
  EXPECT_EQ(vol.ctl("explode"), EINVAL);
  EXPECT_TRUE(vol.stats()["faults"].empty());
  const int fd = open(vol.file("f").c_str(), O_CREAT | O_RDWR, 0644);
  write_at(fd, "still works", 0);
  close(fd);
}

TEST(Faults, TheCommandLineRejectsAMalformedRuleWithExitStatus2) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string dir = make_temp_dir();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"mount", "--fault", "op=write,error=EIO,nth=0", dir},
        std::vector<std::string>{"mount", "--latency", "real:-1", dir},
        std::vector<std::string>{"run", "--fault", "path=db,error=EIO", "--", "true"}}) {
    std::vector<std::string> argv = {mimicfs_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    const CommandResult r = run_command(argv);
    EXPECT_EQ(r.exit_status, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(is_mounted(dir));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mimicfs::testing
