// SPDX-License-Identifier: Apache-2.0
// The seeds as emulated time (issue 4): each test runs a seed's competing
// strategies through a real mount, reads clock.emulated_ns from stats.json and
// asserts the direction and size of the published effect. Virtual time, so the
// figures are the same every run; each test prints them.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "tests/support/mounted_volume.h"
#include "workloads/seed_workloads.h"

namespace mimicfs::testing {
namespace {

using workloads::kMiB;

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<char, AlignedFree>;

// A buffer of `size` bytes of `fill`, 4 KiB aligned (O_DIRECT needs no more here).
AlignedBuffer buffer(size_t size, char fill) {
  // aligned_alloc wants a size that is a multiple of the alignment.
  AlignedBuffer b(static_cast<char*>(std::aligned_alloc(4096, (size + 4095) / 4096 * 4096)));
  std::fill(b.get(), b.get() + size, fill);
  return b;
}

double ratio(uint64_t a, uint64_t b) { return b == 0 ? 0 : static_cast<double>(a) / b; }

// ---------------------------------------------------------------------------
// Seed 000 (MDEV-32268): extend to 256 MiB, then overwrite it with 1 MiB writes,
// each step made durable as InnoDB does. posix_fallocate's fallback on NFS writes
// a byte per 4 KiB (65536 tiny WRITEs) and leaves 65536 holes the overwrite must
// allocate into; the fix (fallocate, refused, then the program's own 1 MiB zero
// writes) sends 256 full WRITEs. Customers saw about 4x the write rate with the fix.

constexpr off_t kSeed000Size = 256 * kMiB;

uint64_t seed000_cost(bool use_posix_fallocate) {
  MountedVolume vol("nfs");
  EXPECT_TRUE(vol.mounted()) << vol.error();
  if (!vol.mounted()) return 0;
  const int fd = open(vol.file("t.ibd").c_str(), O_CREAT | O_RDWR, 0644);
  EXPECT_GE(fd, 0);
  vol.reset_counters();
  const auto extended =
      workloads::extend(fd, kSeed000Size,
                        use_posix_fallocate ? workloads::Extension::kPosixFallocate
                                            : workloads::Extension::kFallocateOrZeros);
  EXPECT_TRUE(extended) << extended.error();
  EXPECT_EQ(vol.stats()["ops"]["fallocate"]["errors"]["EOPNOTSUPP"], 1) << "nfs has no fallocate";
  EXPECT_EQ(fsync(fd), 0);
  const auto written = workloads::write_range(fd, 0, kSeed000Size, kMiB, 'p');
  EXPECT_TRUE(written) << written.error();
  EXPECT_EQ(fsync(fd), 0);
  const uint64_t cost = vol.emulated_ns();
  std::printf("seed 000 on nfs, %s: %.3f s emulated, %llu extents\n",
              use_posix_fallocate ? "posix_fallocate" : "fallocate + 1 MiB zeros", cost / 1e9,
              static_cast<unsigned long long>(vol.file_stats("t.ibd")["extents"].get<uint64_t>()));
  close(fd);
  return cost;
}

TEST(EmulatedTime, Seed000PosixFallocateOnNfsCostsAtLeastThreeTimesTheFix) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const uint64_t posix = seed000_cost(true);
  const uint64_t fixed = seed000_cost(false);
  std::printf("seed 000: posix_fallocate / fix = %.2f\n", ratio(posix, fixed));
  // The 65536 one-byte WRITEs and the 65535 allocations into holes the overwrite
  // makes are the regression; the issue asks for at least 3x, customers saw ~4x.
  EXPECT_GE(ratio(posix, fixed), 3.0);
  EXPECT_LE(ratio(posix, fixed), 6.0) << "calibrated to about 4x";
}

// ---------------------------------------------------------------------------
// Seed 001 (MySQL #60593): a tablespace grown one 16 KiB page at a time with an
// fsync after each extension, against growing it 128 pages at a time. On the
// disks of the time each fsync cost ~10 ms whatever its size (profile ext4-hdd);
// the reporter measured 2.5x faster with 128-page extensions.

constexpr int kSeed001Pages = 2000;
constexpr off_t kPage = workloads::kInnodbPage;

uint64_t seed001_cost(int pages_per_extension) {
  MountedVolume vol("ext4-hdd");
  EXPECT_TRUE(vol.mounted()) << vol.error();
  if (!vol.mounted()) return 0;
  const int fd = open(vol.file("t1.ibd").c_str(), O_CREAT | O_RDWR, 0644);
  EXPECT_GE(fd, 0);
  vol.reset_counters();
  // fil_extend_space_to_desired_size: zeros written past EOF, an fsync, then the pages.
  const auto grown = workloads::grow(fd, kSeed001Pages, pages_per_extension, kPage);
  EXPECT_TRUE(grown) << grown.error();
  EXPECT_EQ(fsync(fd), 0);
  const auto stats = vol.stats();
  const uint64_t cost = stats["clock"]["emulated_ns"].get<uint64_t>();
  std::printf("seed 001 on ext4-hdd, %d page(s) per extension: %.3f s emulated, %llu fsyncs\n",
              pages_per_extension, cost / 1e9,
              static_cast<unsigned long long>(stats["ops"]["fsync"]["count"].get<uint64_t>()));
  close(fd);
  return cost;
}

TEST(EmulatedTime, Seed001OnePageExtensionsWithFsyncCostMoreThan128PageOnes) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const uint64_t one_page = seed001_cost(1);
  const uint64_t extent_of_128 = seed001_cost(128);
  std::printf("seed 001: 1-page / 128-page extensions = %.2f\n", ratio(one_page, extent_of_128));
  // 2001 fsyncs at ~10 ms against 17: the direction of the seed's 2.5x, larger
  // here because nothing else (SQL, the buffer pool) shares the time.
  EXPECT_GT(ratio(one_page, extent_of_128), 2.5);
}

// ---------------------------------------------------------------------------
// Seed 002 (MDEV-28766): with innodb_flush_log_at_trx_commit=2 the redo log is
// written without fsync and trusts the page cache. Opened with O_DIRECT each
// 512-byte append pays the device at once instead: the setting loses its point.

constexpr int kRedoAppends = 2000;
constexpr size_t kRedoBlock = 512;

// The emulated time of the appends alone (before close, which on NFS flushes).
uint64_t seed002_cost(const std::string& profile, bool direct) {
  MountedVolume vol(profile);
  EXPECT_TRUE(vol.mounted()) << vol.error();
  if (!vol.mounted()) return 0;
  const int fd =
      open(vol.file("ib_logfile0").c_str(), O_CREAT | O_WRONLY | (direct ? O_DIRECT : 0), 0644);
  EXPECT_GE(fd, 0) << "O_DIRECT open on " << profile;
  vol.reset_counters();
  auto block = buffer(kRedoBlock, 'L');
  for (int i = 0; i < kRedoAppends; ++i) {
    EXPECT_EQ(pwrite(fd, block.get(), kRedoBlock, i * static_cast<off_t>(kRedoBlock)),
              static_cast<ssize_t>(kRedoBlock));
  }
  const auto file = vol.file_stats("ib_logfile0");
  const uint64_t cost = file["emulated_ns"].get<uint64_t>();
  std::printf("seed 002 on %s, %s: %.6f s emulated, %llu dirty bytes\n", profile.c_str(),
              direct ? "O_DIRECT" : "buffered", cost / 1e9,
              static_cast<unsigned long long>(file["dirty_bytes"].get<uint64_t>()));
  // Neither is durable without an fsync: the page cache, or the drive's cache.
  EXPECT_EQ(file["unsynced_bytes"], kRedoAppends * kRedoBlock);
  EXPECT_EQ(file["dirty_bytes"], direct ? 0 : kRedoAppends * kRedoBlock);
  close(fd);
  return cost;
}

class Seed002 : public ::testing::TestWithParam<std::string> {};

TEST_P(Seed002, ODirectRedoAppendsPayTheDeviceBufferedOnesDoNot) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const uint64_t buffered = seed002_cost(GetParam(), false);
  const uint64_t direct = seed002_cost(GetParam(), true);
  std::printf("seed 002 on %s: O_DIRECT / buffered = %.1f\n", GetParam().c_str(),
              ratio(direct, buffered));
  // A 512-byte memory copy against a device (or server) round trip per append.
  EXPECT_GE(ratio(direct, buffered), 10.0);
}

INSTANTIATE_TEST_SUITE_P(Profiles, Seed002, ::testing::Values("ext4", "nfs"));

TEST(EmulatedTime, Seed002MisalignedODirectIsRefusedOnExt4ButNotOnNfs) {
  MIMICFS_REQUIRE_MOUNTABLE();
  auto block = buffer(4096, 'L');
  for (const char* profile : {"ext4", "nfs"}) {
    MountedVolume vol(profile);
    ASSERT_TRUE(vol.mounted()) << vol.error();
    const int fd = open(vol.file("log").c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
    ASSERT_GE(fd, 0);
    const ssize_t written = pwrite(fd, block.get(), 100, 512);
    if (std::string(profile) == "ext4") {
      EXPECT_EQ(written, -1) << "a 100-byte O_DIRECT write is not 512-aligned";
      EXPECT_EQ(errno, EINVAL);
      EXPECT_EQ(pwrite(fd, block.get(), 512, 100), -1) << "nor is offset 100";
      EXPECT_EQ(errno, EINVAL);
      EXPECT_EQ(pwrite(fd, block.get(), 512, 512), 512);
    } else {
      EXPECT_EQ(written, 100) << "the NFS client has no O_DIRECT alignment constraint";
    }
    close(fd);
  }
}

// ---------------------------------------------------------------------------
// Seed 004 (InnoDB hole punching): dropping a table whose every other page was
// punched took 9.3x as long as a plain one on xfs, 7.9x on btrfs, about the same
// on ext4 (SSD) and 8.8x on ext4 on a disk. Freeing costs per extent and per MiB;
// on xfs a background task frees the blocks after the unlink returns, and the
// drop is both.

constexpr off_t kSeed004Size = 64 * kMiB;

uint64_t seed004_unlink_cost(const std::string& profile, bool punched) {
  MountedVolume vol(profile);
  EXPECT_TRUE(vol.mounted()) << vol.error();
  if (!vol.mounted()) return 0;
  const int fd = open(vol.file("t.ibd").c_str(), O_CREAT | O_RDWR, 0644);
  EXPECT_GE(fd, 0);
  const auto written = workloads::write_range(fd, 0, kSeed004Size, kMiB, 'd');
  EXPECT_TRUE(written) << written.error();
  EXPECT_EQ(fsync(fd), 0);
  if (punched) {
    const auto punched_tails = workloads::punch_page_tails(fd, kSeed004Size);
    EXPECT_TRUE(punched_tails) << punched_tails.error();
  }
  close(fd);
  EXPECT_TRUE(vol.wait_for_releases());
  const uint64_t extents = vol.file_stats("t.ibd")["extents"].get<uint64_t>();
  vol.reset_counters();
  EXPECT_EQ(unlink(vol.file("t.ibd").c_str()), 0);
  const bool background = profile == "xfs";  // the task is queued at the unlink
  const nlohmann::json stats = vol.stats();
  const uint64_t cost = stats["ops"]["unlink"]["emulated_ns"].get<uint64_t>() +
                        stats["deferred"]["task_ns"].get<uint64_t>();
  if (background) {
    EXPECT_GT(stats["deferred"]["task_ns"].get<uint64_t>(), 0u);
  }
  std::printf("seed 004 on %s, %s (%llu extents): unlink %.3f ms emulated\n", profile.c_str(),
              punched ? "punched" : "plain", static_cast<unsigned long long>(extents), cost / 1e6);
  return cost;
}

struct Seed004Case {
  std::string profile;
  double low, high;  // the expected punched / plain ratio
};

// gtest prints a parameter this way (not as its bytes).
void PrintTo(const Seed004Case& c, std::ostream* os) { *os << c.profile; }

class Seed004 : public ::testing::TestWithParam<Seed004Case> {};

TEST_P(Seed004, UnlinkOfAPunchedFileCostsWhatTheSeedMeasured) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const Seed004Case& c = GetParam();
  const uint64_t plain = seed004_unlink_cost(c.profile, false);
  const uint64_t punched = seed004_unlink_cost(c.profile, true);
  std::printf("seed 004 on %s: punched / plain = %.2f\n", c.profile.c_str(), ratio(punched, plain));
  EXPECT_GE(ratio(punched, plain), c.low);
  EXPECT_LE(ratio(punched, plain), c.high);
}

INSTANTIATE_TEST_SUITE_P(Profiles, Seed004,
                         // The seed's ratios within 30%.
                         ::testing::Values(Seed004Case{"xfs", 6.5, 12.1},
                                           Seed004Case{"btrfs", 5.5, 10.3},
                                           Seed004Case{"ext4", 0.7, 1.3},
                                           Seed004Case{"ext4-hdd", 6.2, 11.4}),
                         [](const auto& info) {
                           std::string name = info.param.profile;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });


// ---------------------------------------------------------------------------
// Concurrent O_SYNC writers (engine/time/timelines.h). Each 32 KiB O_SYNC write
// crosses the device and waits for a journal commit. Writers' requests
// overlap, and the changes made while a commit runs go into the next commit,
// which their writers share. So two writers take less than twice one's time
// and more than one's (they share the device and the journal), and four share
// commits: real ext4 on a loop device took 1.74x and 2.16x (docs/profiles.md,
// "Fidelity").

uint64_t osync_writers_ns(int writers) {
  MountedVolume vol("ext4");
  EXPECT_TRUE(vol.mounted()) << vol.error();
  if (!vol.mounted()) return 0;
  std::vector<int> fds;
  for (int i = 0; i < writers; ++i) {
    fds.push_back(open(vol.file("w" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY | O_SYNC,
                       0644));
    EXPECT_GE(fds.back(), 0);
  }
  vol.reset_counters();
  std::vector<std::thread> threads;
  for (const int fd : fds) {
    threads.emplace_back([fd] {
      const std::vector<char> block(32 << 10, 'o');
      for (int i = 0; i < 256; ++i) {
        if (write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) return;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const uint64_t ns = vol.emulated_ns();
  for (const int fd : fds) {
    EXPECT_EQ(lseek(fd, 0, SEEK_END), 256 * (32 << 10)) << "a write failed";
    close(fd);
  }
  std::printf("ext4, %d O_SYNC writer(s) of 8 MiB: %.3f s emulated\n", writers, ns / 1e9);
  return ns;
}

// Several writers' time depends on how the host schedules them (one writer's
// is exact): a writer it leaves idle for longer than Timelines::kIdleNs starts
// again after everything already done and loses its overlap, which only adds
// time. So a bound is met if any of up to six runs meets it. On a 2-core
// machine with three busy loops beside it, single runs of four writers gave
// 2.3x to 2.9x; on a shared CI host the fastest of three once gave 3.23x. A
// model whose writers never shared a commit would give about 3.4x every run.
uint64_t osync_writers_ns_within(int writers, uint64_t bound_ns) {
  uint64_t fastest = UINT64_MAX;
  for (int run = 0; run < 6 && fastest >= bound_ns; ++run) {
    fastest = std::min(fastest, osync_writers_ns(writers));
  }
  return fastest;
}

TEST(EmulatedTime, ConcurrentOSyncWritersOverlapAndShareCommits) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const uint64_t one = osync_writers_ns(1);
  ASSERT_GT(one, 0u);
  // Overlapping: below twice one writer's time (the model gives about 1.7).
  const uint64_t two = osync_writers_ns_within(2, static_cast<uint64_t>(1.9 * one));
  // Sharing commits: four writers whose commits were each their own would
  // take about 3.4x (four commits per round, the journal one at a time).
  const uint64_t four = osync_writers_ns_within(4, static_cast<uint64_t>(3.0 * one));
  std::printf("O_SYNC writers: 2 / 1 = %.2f, 4 / 1 = %.2f\n", ratio(two, one), ratio(four, one));
  // Sharing the device and the journal: never one writer's time.
  EXPECT_GT(ratio(two, one), 1.1);
  EXPECT_LT(ratio(two, one), 1.9);
  EXPECT_LT(ratio(four, one), 3.0);
}

// ---------------------------------------------------------------------------
// A database flushing pages: 16 KiB overwritten in place, then fdatasync
// (docs/time.md, "Per-filesystem costs"). ext4 and xfs commit no transaction
// for it, only flush the drive's cache; btrfs writes every overwrite elsewhere
// and commits its log tree. Measured per call on one loop device: xfs 0.95x
// ext4's, btrfs 4.03x.

uint64_t overwrite_fdatasync_ns(const std::string& profile) {
  MountedVolume vol(profile);
  EXPECT_TRUE(vol.mounted()) << vol.error();
  if (!vol.mounted()) return 0;
  const int fd = open(vol.file("t.ibd").c_str(), O_CREAT | O_RDWR, 0644);
  EXPECT_GE(fd, 0);
  EXPECT_TRUE(workloads::write_range(fd, 0, 4 * kMiB, kMiB, 'p'));
  EXPECT_EQ(fsync(fd), 0);
  vol.reset_counters();
  const auto overwritten = workloads::overwrite_pages_synced(fd, 64);
  EXPECT_TRUE(overwritten) << overwritten.error();
  const uint64_t ns = vol.emulated_ns();
  close(fd);
  std::printf("%s: 64 x (16 KiB overwrite + fdatasync): %.3f ms emulated\n", profile.c_str(),
              ns / 1e6);
  return ns;
}

TEST(EmulatedTime, FdatasyncOfOverwritesIsAFlushOnExt4AndXfsAndALogCommitOnBtrfs) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const uint64_t ext4 = overwrite_fdatasync_ns("ext4");
  const uint64_t xfs = overwrite_fdatasync_ns("xfs");
  const uint64_t btrfs = overwrite_fdatasync_ns("btrfs");
  std::printf("overwrite + fdatasync: xfs / ext4 = %.2f, btrfs / ext4 = %.2f\n",
              ratio(xfs, ext4), ratio(btrfs, ext4));
  // The same flush on ext4 and xfs; a commit (half a millisecond and more)
  // per page on btrfs. Charging ext4 a journal commit would give 0.56 ms per
  // page, 0.18 ms with the flush.
  EXPECT_EQ(xfs, ext4);
  EXPECT_LT(ext4, 64u * 250'000);
  EXPECT_GT(ratio(btrfs, ext4), 3.0);
  EXPECT_LT(ratio(btrfs, ext4), 5.5);
}

}  // namespace
}  // namespace mimicfs::testing
