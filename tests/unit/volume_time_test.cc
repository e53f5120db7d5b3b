// SPDX-License-Identifier: Apache-2.0
// The Volume's emulated time, page cache, O_DIRECT, durability (crash) and fault
// injection, through its public API.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/volume.h"
#include "engine/durability/durability.h"
#include "engine/time/cost_model.h"
#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using namespace volume_fixture;

constexpr uint64_t kPage = 4096;

// ceil(bytes / per_second) in ns, as the cost model rounds; 0 per_second: free.
uint64_t transfer(uint64_t bytes, uint64_t per_second) {
  if (per_second == 0) return 0;
  return static_cast<uint64_t>(
      (static_cast<unsigned __int128>(bytes) * 1'000'000'000u + per_second - 1) / per_second);
}

// A buffered read or write: host time only.
uint64_t copy_ns(const Profile& p, uint64_t bytes) {
  return p.syscall_ns + transfer(bytes, p.memory_bandwidth_bytes_per_second);
}

// One batch of device writes of `bytes` in `requests` requests, one extent.
uint64_t device_write_ns(const Profile& p, uint64_t bytes) {
  const uint64_t requests = (bytes + p.max_request_bytes - 1) / p.max_request_bytes;
  const uint64_t rounds = (requests + p.queue_depth - 1) / p.queue_depth;
  return rounds * (p.round_trip_ns + p.write_ns) + transfer(bytes, p.bandwidth_bytes_per_second);
}

uint64_t device_read_ns(const Profile& p, uint64_t bytes) {
  const uint64_t requests = (bytes + p.max_request_bytes - 1) / p.max_request_bytes;
  const uint64_t rounds = (requests + p.queue_depth - 1) / p.queue_depth;
  return rounds * (p.round_trip_ns + p.read_ns) + transfer(bytes, p.bandwidth_bytes_per_second);
}

uint64_t commit_ns(const Profile& p) { return p.round_trip_ns + p.fsync_ns; }
uint64_t flush_ns(const Profile& p) { return p.round_trip_ns + p.flush_ns; }

// The emulated time charged to one operation class so far.
uint64_t op_ns(Fs& fs, const std::string& op) {
  const auto ops = fs.volume.snapshot().ops;
  auto it = ops.find(op);
  return it == ops.end() ? 0 : it->second.emulated_ns;
}

Result<size_t> write_flags(Fs& fs, uint64_t inode, uint64_t offset, std::string_view text,
                           int flags) {
  return fs.volume.write(inode, offset, as_bytes(text), flags);
}

Result<size_t> read_flags(Fs& fs, uint64_t inode, uint64_t offset, size_t length, int flags) {
  std::vector<std::byte> out(length);
  return fs.volume.read(inode, offset, out, flags);
}

// Writes `length` bytes of pattern(seed) at `offset` in 1 MiB writes.
void write_big(Fs& fs, uint64_t inode, uint64_t offset, uint64_t length, char seed = 'a') {
  const std::string chunk = pattern(kMiB, seed);
  for (uint64_t done = 0; done < length;) {
    const uint64_t n = std::min<uint64_t>(kMiB, length - done);
    ASSERT_TRUE(fs.write(inode, offset + done, std::string_view(chunk).substr(0, n)).has_value());
    done += n;
  }
}

bool exists(Fs& fs, const std::string& name, uint64_t parent = kRoot) {
  return fs.inode_of(name, parent) != 0;
}

// A single-threaded workload touching every charged operation.
void workload(Fs& fs) {
  const uint64_t a = fs.create_open("a");
  const uint64_t b = fs.create_open("b");
  ASSERT_TRUE(fs.write(a, 0, pattern(100'000, 'a')).has_value());
  ASSERT_TRUE(fs.write(a, 50'000, pattern(70'000, 'b')).has_value());
  for (uint64_t offset = 0; offset < 256 * kKiB; offset += 4 * kKiB) {
    ASSERT_TRUE(fs.write(b, offset, "x").has_value());
  }
  fs.read(a, 1000, 20'000);
  fs.fsync(a);
  ASSERT_TRUE(fs.write(b, 0, pattern(300 * kKiB, 'c')).has_value());
  (void)fs.punch(a, 8192, 8192);  // EOPNOTSUPP on nfs: charged nothing
  ASSERT_TRUE(fs.truncate(b, 100 * kKiB).has_value());
  ASSERT_TRUE(write_flags(fs, a, 0, pattern(8192, 'd'), O_DSYNC).has_value());
  fs.fsync(b);
  fs.flush(a);
  fs.volume.release(a);
  const uint64_t dir = fs.mkdir("dir");
  ASSERT_TRUE(fs.volume.rename(kRoot, "b", dir, "b", 0).has_value());
  ASSERT_TRUE(fs.volume.unlink(dir, "b").has_value());
  fs.volume.forget(b, 1);
}

// --- emulated time

TEST(VolumeTime, SameWorkloadGivesTheSameEmulatedTimeToTheNanosecond) {
  for (std::string_view profile : {"nfs", "ext4", "xfs", "btrfs"}) {
    Fs first(profile);
    Fs second(profile);
    workload(first);
    workload(second);
    const uint64_t once = first.volume.snapshot().clock.emulated_ns;
    EXPECT_GT(once, 0u) << profile;
    EXPECT_EQ(once, second.volume.snapshot().clock.emulated_ns) << profile;
    EXPECT_EQ(once, first.engine.cost().emulated_ns()) << profile;
  }
}

TEST(VolumeTime, IdealProfileChargesNothing) {
  Fs fs("ideal");
  workload(fs);
  EXPECT_EQ(fs.volume.snapshot().clock.emulated_ns, 0u);
  for (const auto& [name, op] : fs.volume.snapshot().ops) EXPECT_EQ(op.emulated_ns, 0u) << name;
}

TEST(VolumeTime, BufferedWriteIsChargedTheCopyAndFsyncTheWriteback) {
  Fs fs("ext4");
  const Profile& p = fs.volume.profile();
  const uint64_t f = fs.create_open("f");
  fs.volume.reset_statistics();

  ASSERT_TRUE(fs.write(f, 0, pattern(10'000, 'a')).has_value());
  EXPECT_EQ(op_ns(fs, "write"), copy_ns(p, 10'000));
  EXPECT_EQ(fs.engine.cost().emulated_ns(), copy_ns(p, 10'000));  // no device time
  EXPECT_EQ(fs.stats(f).dirty_bytes, 3 * kPage);                  // whole pages
  EXPECT_EQ(fs.stats(f).unsynced_bytes, 10'000u);

  // Writeback writes the dirty pages as one request, then the journal commits.
  fs.fsync(f);
  ASSERT_EQ(fs.extents(f).size(), 1u);
  EXPECT_EQ(op_ns(fs, "fsync"), device_write_ns(p, 3 * kPage) + commit_ns(p));
  EXPECT_EQ(fs.stats(f).dirty_bytes, 0u);
  EXPECT_EQ(fs.stats(f).unsynced_bytes, 0u);
}

TEST(VolumeTime, NfsWritesBackExactDirtyBytes) {
  Fs fs("nfs");
  const Profile& p = fs.volume.profile();
  const uint64_t f = fs.create_open("f");
  fs.volume.reset_statistics();
  ASSERT_TRUE(fs.write(f, 0, pattern(10'000, 'a')).has_value());
  EXPECT_EQ(fs.stats(f).dirty_bytes, 10'000u);
  fs.fsync(f);
  ASSERT_EQ(fs.extents(f).size(), 1u);
  EXPECT_EQ(op_ns(fs, "fsync"), device_write_ns(p, 10'000) + commit_ns(p));
}

TEST(VolumeTime, FsyncOfACleanFileChargesNoCommit) {
  for (std::string_view profile : {"nfs", "ext4"}) {
    Fs fs(profile);
    const uint64_t f = fs.create_open("f");
    ASSERT_TRUE(fs.write(f, 0, pattern(5000, 'a')).has_value());
    fs.fsync(f);
    fs.volume.reset_statistics();
    fs.fsync(f);
    EXPECT_EQ(op_ns(fs, "fsync"), 0u) << profile;
    EXPECT_EQ(fs.engine.cost().emulated_ns(), 0u) << profile;
  }
}

TEST(VolumeTime, FsyncAfterANamespaceChangeCommitsOnAJournal) {
  Fs fs("ext4");
  const uint64_t f = fs.create_open("f");
  fs.volume.reset_statistics();
  fs.fsync(f);  // nothing written, but the create is in the journal
  EXPECT_EQ(op_ns(fs, "fsync"), commit_ns(fs.volume.profile()));
}

TEST(VolumeTime, DirectWritePaysTheDeviceAtOnce) {
  Fs fs("ext4");
  const Profile& p = fs.volume.profile();
  const uint64_t f = fs.create_open("f");
  fs.fsync(f);
  fs.volume.reset_statistics();
  ASSERT_TRUE(write_flags(fs, f, 0, pattern(2 * kPage, 'a'), O_DIRECT).has_value());
  EXPECT_EQ(op_ns(fs, "write"), device_write_ns(p, 2 * kPage));  // no page cache copy
  EXPECT_EQ(fs.stats(f).dirty_bytes, 0u);
  EXPECT_EQ(fs.stats(f).delayed_bytes, 0u);  // direct I/O allocates at once
  EXPECT_EQ(fs.stats(f).allocated_bytes, 2 * kPage);
  // On the device but in its volatile cache: durable only after a commit.
  EXPECT_EQ(fs.stats(f).unsynced_bytes, 2 * kPage);
  fs.fsync(f);
  EXPECT_EQ(op_ns(fs, "fsync"), commit_ns(p));  // nothing to write back
  EXPECT_EQ(fs.read(f, 0, 2 * kPage), pattern(2 * kPage, 'a'));
}

TEST(VolumeTime, DirectWriteDropsDirtyPagesItOverwrites) {
  Fs fs("ext4");
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(3 * kPage, 'a')).has_value());
  ASSERT_EQ(fs.stats(f).dirty_bytes, 3 * kPage);
  ASSERT_TRUE(write_flags(fs, f, kPage, pattern(kPage, 'b'), O_DIRECT).has_value());
  EXPECT_EQ(fs.stats(f).dirty_bytes, 2 * kPage);
}

TEST(VolumeTime, DirectIoMustBeAlignedToTheLogicalBlockOnExt4) {
  Fs fs("ext4");
  ASSERT_EQ(fs.volume.profile().logical_block_size, 512u);
  const uint64_t f = fs.create_open("f");
  EXPECT_EQ(error_of(write_flags(fs, f, 100, pattern(512, 'a'), O_DIRECT)), Errno{EINVAL});
  EXPECT_EQ(error_of(write_flags(fs, f, 0, pattern(100, 'a'), O_DIRECT)), Errno{EINVAL});
  EXPECT_EQ(fs.attributes(f).size, 0u);  // the refused writes changed nothing
  ASSERT_TRUE(write_flags(fs, f, 512, pattern(1024, 'a'), O_DIRECT).has_value());
  EXPECT_EQ(fs.attributes(f).size, 1536u);

  EXPECT_EQ(error_of(read_flags(fs, f, 100, 512, O_DIRECT)), Errno{EINVAL});
  EXPECT_EQ(error_of(read_flags(fs, f, 0, 100, O_DIRECT)), Errno{EINVAL});
  auto read = read_flags(fs, f, 512, 1024, O_DIRECT);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(*read, 1024u);
  // Buffered I/O has no constraint.
  EXPECT_TRUE(write_flags(fs, f, 100, "x", 0).has_value());
  EXPECT_TRUE(read_flags(fs, f, 100, 1, 0).has_value());
}

TEST(VolumeTime, DirectIoOnNfsHasNoAlignment) {
  Fs fs("nfs");
  ASSERT_EQ(fs.volume.profile().logical_block_size, 1u);
  const uint64_t f = fs.create_open("f");
  EXPECT_TRUE(write_flags(fs, f, 100, pattern(77, 'a'), O_DIRECT).has_value());
  EXPECT_TRUE(write_flags(fs, f, 0, pattern(3, 'a'), O_DIRECT).has_value());
  EXPECT_TRUE(read_flags(fs, f, 101, 13, O_DIRECT).has_value());
  EXPECT_EQ(fs.read(f, 100, 77), pattern(77, 'a'));
}

TEST(VolumeTime, DirectReadPaysTheDeviceEveryTime) {
  Fs fs("ext4");
  const Profile& p = fs.volume.profile();
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(2 * kPage, 'a')).has_value());
  fs.fsync(f);
  fs.volume.reset_statistics();
  ASSERT_TRUE(read_flags(fs, f, 0, kPage, O_DIRECT).has_value());
  EXPECT_EQ(op_ns(fs, "read"), device_read_ns(p, kPage));
  ASSERT_TRUE(read_flags(fs, f, 0, kPage, O_DIRECT).has_value());
  EXPECT_EQ(op_ns(fs, "read"), 2 * device_read_ns(p, kPage));
}

TEST(VolumeTime, BufferedReadOfCachedPagesIsHostTimeOnly) {
  Fs fs("ext4");
  const Profile& p = fs.volume.profile();
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(2 * kPage, 'a')).has_value());  // written pages are cached
  fs.volume.reset_statistics();
  fs.read(f, 0, 2 * kPage);
  EXPECT_EQ(op_ns(fs, "read"), copy_ns(p, 2 * kPage));
}

TEST(VolumeTime, BufferedReadMissesEachPageOnceAfterACrash) {
  Fs fs("ext4");
  const Profile& p = fs.volume.profile();
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(2 * kPage, 'a')).has_value());
  fs.fsync(f);
  fs.volume.crash();  // empties the page cache
  fs.volume.reset_statistics();
  fs.read(f, 0, 2 * kPage);
  EXPECT_EQ(op_ns(fs, "read"), copy_ns(p, 2 * kPage) + device_read_ns(p, 2 * kPage));
  fs.read(f, 0, 2 * kPage);
  EXPECT_EQ(op_ns(fs, "read"), 2 * copy_ns(p, 2 * kPage) + device_read_ns(p, 2 * kPage));
}

TEST(VolumeTime, DsyncWriteIsWrittenBackAndCommitted) {
  for (std::string_view profile : {"ext4", "nfs"}) {
    Fs fs(profile);
    const Profile& p = fs.volume.profile();
    const uint64_t f = fs.create_open("f");
    fs.fsync(f);
    fs.volume.reset_statistics();
    ASSERT_TRUE(write_flags(fs, f, 0, pattern(10'000, 'a'), O_DSYNC).has_value());
    const uint64_t written_back = p.dirty_unit == 1 ? 10'000 : 3 * kPage;
    EXPECT_EQ(op_ns(fs, "write"),
              copy_ns(p, 10'000) + device_write_ns(p, written_back) + commit_ns(p))
        << profile;
    EXPECT_EQ(fs.stats(f).dirty_bytes, 0u) << profile;
    EXPECT_EQ(fs.stats(f).unsynced_bytes, 0u) << profile;
  }
}

// A file "f" of 64 KiB, written and synced: an overwrite of it is in place.
uint64_t synced_file(Fs& fs) {
  const uint64_t f = fs.create_open("f");
  write_big(fs, f, 0, 64 * kKiB);
  fs.fsync(f);
  return f;
}

// ext4's i_datasync_tid, xfs's ili_datasync_seq: an fdatasync (or O_DSYNC
// write) with only overwrites in place to make durable writes the data and
// flushes the cache; it commits no transaction. btrfs's overwrites are new
// blocks, so its fdatasync commits the log.
TEST(VolumeTime, FdatasyncOfOverwritesInPlaceIsACacheFlushNotACommit) {
  for (std::string_view profile : {"ext4", "xfs", "btrfs"}) {
    Fs fs(profile);
    const Profile& p = fs.volume.profile();
    ASSERT_LT(p.flush_ns, p.fsync_ns) << profile;
    const uint64_t f = synced_file(fs);
    const uint64_t in_place_commit = p.copy_on_write ? commit_ns(p) : flush_ns(p);
    fs.volume.reset_statistics();
    ASSERT_TRUE(fs.write(f, 16 * kKiB, pattern(16 * kKiB, 'o')).has_value());
    ASSERT_TRUE(fs.volume.fsync(f, /*datasync=*/true).has_value());
    const uint64_t written = device_write_ns(p, 16 * kKiB);
    // A copy-on-write overwrite lands apart from its neighbours: no more extents
    // in the request, but the write may fill between allocated blocks.
    EXPECT_GE(op_ns(fs, "fdatasync"), written + in_place_commit) << profile;
    EXPECT_LT(op_ns(fs, "fdatasync"), written + in_place_commit + p.extent_ns + p.gap_fill_ns + 1)
        << profile;

    // The same through O_DSYNC, charged to the write.
    fs.volume.reset_statistics();
    ASSERT_TRUE(write_flags(fs, f, 0, pattern(16 * kKiB, 'd'), O_DSYNC).has_value());
    EXPECT_GE(op_ns(fs, "write"), copy_ns(p, 16 * kKiB) + written + in_place_commit) << profile;
    EXPECT_LT(op_ns(fs, "write"),
              copy_ns(p, 16 * kKiB) + written + in_place_commit + p.extent_ns + p.gap_fill_ns + 1)
        << profile;

    // fsync (not fdatasync) of the same overwrite commits: the mtime changed.
    ASSERT_TRUE(fs.write(f, 16 * kKiB, pattern(16 * kKiB, 'p')).has_value());
    fs.volume.reset_statistics();
    ASSERT_TRUE(fs.volume.fsync(f, /*datasync=*/false).has_value());
    EXPECT_GE(op_ns(fs, "fsync"), written + commit_ns(p)) << profile;
  }
}

// A pending namespace change goes with the O_DSYNC write's sync: the journal
// commits, and the write pays a commit, not a flush.
TEST(VolumeTime, DsyncOverwriteWithAPendingCreateCommitsTheJournal) {
  Fs fs("ext4");
  const Profile& p = fs.volume.profile();
  const uint64_t f = synced_file(fs);
  fs.create_open("g");  // pending in the journal
  fs.volume.reset_statistics();
  ASSERT_TRUE(write_flags(fs, f, 0, pattern(16 * kKiB, 'd'), O_DSYNC).has_value());
  EXPECT_EQ(op_ns(fs, "write"),
            copy_ns(p, 16 * kKiB) + device_write_ns(p, 16 * kKiB) + commit_ns(p));
  // The create is durable now: the next in-place O_DSYNC write is a flush.
  fs.volume.reset_statistics();
  ASSERT_TRUE(write_flags(fs, f, 0, pattern(16 * kKiB, 'e'), O_DSYNC).has_value());
  EXPECT_EQ(op_ns(fs, "write"), copy_ns(p, 16 * kKiB) + device_write_ns(p, 16 * kKiB) + flush_ns(p));
}

TEST(VolumeTime, FdatasyncOfAnAppendCommits) {
  Fs fs("ext4");
  const Profile& p = fs.volume.profile();
  const uint64_t f = synced_file(fs);
  ASSERT_TRUE(fs.write(f, 64 * kKiB, pattern(16 * kKiB, 'a')).has_value());
  fs.volume.reset_statistics();
  ASSERT_TRUE(fs.volume.fsync(f, /*datasync=*/true).has_value());
  EXPECT_EQ(op_ns(fs, "fdatasync"), device_write_ns(p, 16 * kKiB) + commit_ns(p));
  EXPECT_EQ(op_ns(fs, "fsync"), 0u);
}

TEST(VolumeTime, DsyncWriteLeavesOtherRangesUnsynced) {
  Fs fs("nfs");
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(1000, 'a')).has_value());
  ASSERT_TRUE(write_flags(fs, f, 5000, pattern(1000, 'b'), O_DSYNC).has_value());
  EXPECT_EQ(fs.stats(f).unsynced_bytes, 1000u);
  EXPECT_EQ(fs.stats(f).dirty_bytes, 1000u);
}

TEST(VolumeTime, CloseOnNfsWritesBackAndCommits) {
  Fs fs("nfs");
  const Profile& p = fs.volume.profile();
  ASSERT_TRUE(p.flush_on_close);
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(10'000, 'a')).has_value());
  fs.volume.reset_statistics();
  fs.flush(f);
  EXPECT_EQ(op_ns(fs, "flush"), device_write_ns(p, 10'000) + commit_ns(p));
  EXPECT_EQ(fs.stats(f).unsynced_bytes, 0u);
  EXPECT_EQ(fs.stats(f).dirty_bytes, 0u);
  // Closing again, or a reader's close, has nothing to do.
  fs.flush(f);
  ASSERT_TRUE(fs.volume.flush(f, /*writer=*/false).has_value());
  EXPECT_EQ(op_ns(fs, "flush"), device_write_ns(p, 10'000) + commit_ns(p));
}

TEST(VolumeTime, CloseOnExt4WritesNothingBack) {
  Fs fs("ext4");
  ASSERT_FALSE(fs.volume.profile().flush_on_close);
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(10'000, 'a')).has_value());
  fs.volume.reset_statistics();
  fs.flush(f);
  EXPECT_EQ(op_ns(fs, "flush"), 0u);
  EXPECT_EQ(fs.stats(f).unsynced_bytes, 10'000u);
  EXPECT_EQ(fs.stats(f).dirty_bytes, 3 * kPage);
}

TEST(VolumeTime, PerOperationAndPerFileTimesAddUpToTheTotal) {
  for (std::string_view profile : {"nfs", "ext4"}) {
    Fs fs(profile);
    const uint64_t a = fs.create_open("a");
    const uint64_t b = fs.create_open("b");
    ASSERT_TRUE(fs.write(a, 0, pattern(50'000, 'a')).has_value());
    ASSERT_TRUE(fs.write(b, 3, pattern(7'000, 'b')).has_value());
    fs.read(a, 0, 50'000);
    fs.fsync(a);
    ASSERT_TRUE(fs.truncate(b, 1000).has_value());
    ASSERT_TRUE(write_flags(fs, b, 0, pattern(512, 'c'), O_DSYNC).has_value());
    fs.flush(a);
    fs.flush(b);

    const StatsSnapshot s = fs.volume.snapshot();
    uint64_t by_op = 0;
    for (const auto& [name, op] : s.ops) by_op += op.emulated_ns;
    uint64_t by_file = 0;
    for (const auto& [path, file] : s.files) by_file += file.emulated_ns;
    EXPECT_GT(s.clock.emulated_ns, 0u) << profile;
    EXPECT_EQ(by_op, s.clock.emulated_ns) << profile;
    EXPECT_EQ(by_file, s.clock.emulated_ns) << profile;  // every operation here has a file

    fs.volume.reset_statistics();
    const StatsSnapshot zero = fs.volume.snapshot();
    EXPECT_EQ(zero.clock.emulated_ns, 0u) << profile;
    EXPECT_EQ(fs.engine.cost().emulated_ns(), 0u) << profile;
    for (const auto& [name, op] : zero.ops) EXPECT_EQ(op.emulated_ns, 0u) << name;
    for (const auto& [path, file] : zero.files) EXPECT_EQ(file.emulated_ns, 0u) << path;
  }
}

TEST(VolumeTime, FillingHolesCostsTheDeviceMoreThanWritingOnce) {
  // Seed 000: posix_fallocate's fallback wrote a byte per 4 KiB on NFS; the
  // overwrite then fills every hole between those bytes on the server.
  constexpr uint64_t kRange = 4 * kMiB;
  auto overwrite_writeback = [&](bool sparse_first) {
    Fs fs("nfs");
    const uint64_t f = fs.create_open("f");
    if (sparse_first) {
      for (uint64_t offset = 0; offset < kRange; offset += kPage) {
        EXPECT_TRUE(fs.write(f, offset, "x").has_value());
      }
    }
    fs.fsync(f);
    fs.volume.reset_statistics();
    write_big(fs, f, 0, kRange);
    fs.fsync(f);
    // The server's work: a hole is filled when its allocation happens (at the
    // write on nfs, which allocates at once), the data goes out at the fsync.
    const Profile& p = fs.volume.profile();
    return op_ns(fs, "write") - kRange / kMiB * copy_ns(p, kMiB) + op_ns(fs, "fsync") -
           commit_ns(p);
  };
  const uint64_t filled = overwrite_writeback(true);
  const uint64_t once = overwrite_writeback(false);
  ::testing::Test::RecordProperty("writeback_ratio",
                                  std::to_string(static_cast<double>(filled) / once));
  EXPECT_GE(filled, 3 * once) << "filled " << filled << " ns, once " << once << " ns";
}

// Seed 004's table drop: a file with every other 8 KiB punched against a plain
// one, dropped (the unlink, and on xfs the background reclaim it queues). The
// seed measured 26 GiB plain against 16 GiB punched: xfs 9.3x, btrfs 7.9x, ext4
// 1.0x, and 8.8x on a disk (ext4-hdd). The model keeps each ratio within 30% at
// 64 MiB, 512 MiB (through the volume) and the seed's scale (the cost model).
struct Seed004Drop {
  std::string profile;
  double seed_ratio;
};

void PrintTo(const Seed004Drop& c, std::ostream* os) { *os << c.profile; }

struct DropCost {
  uint64_t unlink_ns = 0;   // the unlink itself
  uint64_t reclaim_ns = 0;  // the background task it queued (xfs)
  uint64_t total() const { return unlink_ns + reclaim_ns; }
};

// Writes `size` bytes of zeros (the memory store keeps none: only the layout
// matters), punches every other 8 KiB if asked, syncs, closes and unlinks.
DropCost drop(const Profile& profile, uint64_t size, bool punched) {
  const std::string name = profile.name;
  Fs fs(profile);
  const uint64_t f = fs.create_open("table");
  const std::string zeros(kMiB, '\0');
  for (uint64_t offset = 0; offset < size; offset += kMiB) {
    EXPECT_TRUE(fs.write(f, offset, zeros).has_value());
  }
  fs.fsync(f);
  if (punched) {
    for (uint64_t offset = 8 * kKiB; offset < size; offset += 16 * kKiB) {
      EXPECT_TRUE(fs.punch(f, offset, 8 * kKiB).has_value());
    }
    fs.fsync(f);
  }
  fs.flush(f);
  fs.volume.release(f);
  if (punched) {
    EXPECT_EQ(fs.stats(f).extents, size / (16 * kKiB)) << name;
  }
  fs.volume.reset_statistics();
  fs.remove("table", f);
  DropCost cost;
  cost.unlink_ns = op_ns(fs, "unlink");
  const StatsSnapshot s = fs.volume.snapshot();
  if (s.deferred.pending_tasks > 0) cost.reclaim_ns = s.deferred.last_due_ns - s.clock.emulated_ns;
  return cost;
}

class Seed004DropCost : public ::testing::TestWithParam<Seed004Drop> {};

TEST_P(Seed004DropCost, PunchedOverPlainHoldsAtEverySize) {
  const Seed004Drop& c = GetParam();
  for (const uint64_t size : {64 * kMiB, 512 * kMiB}) {
    const DropCost plain = drop(builtin(c.profile), size, false);
    const DropCost punched = drop(builtin(c.profile), size, true);
    ASSERT_GT(plain.total(), 0u);
    const double ratio = static_cast<double>(punched.total()) / plain.total();
    ::testing::Test::RecordProperty("ratio_" + std::to_string(size / kMiB) + "MiB",
                                    std::to_string(ratio));
    EXPECT_GE(ratio, 0.7 * c.seed_ratio) << c.profile << " at " << size / kMiB << " MiB";
    EXPECT_LE(ratio, 1.3 * c.seed_ratio) << c.profile << " at " << size / kMiB << " MiB";
  }
  // The seed's own scale, priced by the cost model: 26 GiB plain (in extents of
  // the longest length) against 16 GiB with every other 8 KiB punched.
  const Profile profile = builtin(c.profile);
  const CostModel costs(profile);
  const uint64_t plain_bytes = 26 * kGiB;
  const uint64_t longest = profile.max_extent_bytes != 0 ? profile.max_extent_bytes
                                                         : profile.cow_extent_max_bytes;
  const uint64_t plain_extents = longest == 0 ? 1 : (plain_bytes + longest - 1) / longest;
  const double seed_scale =
      static_cast<double>(costs.unlink(16 * kGiB / (16 * kKiB), 8 * kGiB).total()) /
      costs.unlink(plain_extents, plain_bytes).total();
  ::testing::Test::RecordProperty("ratio_seed_scale", std::to_string(seed_scale));
  EXPECT_GE(seed_scale, 0.7 * c.seed_ratio) << c.profile;
  EXPECT_LE(seed_scale, 1.3 * c.seed_ratio) << c.profile;
}

INSTANTIATE_TEST_SUITE_P(Profiles, Seed004DropCost,
                         ::testing::Values(Seed004Drop{"xfs", 9.3}, Seed004Drop{"btrfs", 7.9},
                                           Seed004Drop{"ext4", 1.0},
                                           Seed004Drop{"ext4-hdd", 8.8}),
                         [](const auto& info) {
                           std::string name = info.param.profile;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// xfs's inode inactivation workers (allocation.background_reclaim): the unlink
// of a punched file returns at about the plain cost, the freeing waits in the
// background and grows with the extents.
TEST(VolumeTime, XfsUnlinkReturnsAtThePlainCostAndReclaimsLater) {
  const Profile xfs = with("xfs", {"allocation.background_reclaim=true"});
  const DropCost plain = drop(xfs, 64 * kMiB, false);
  const DropCost punched = drop(xfs, 64 * kMiB, true);
  const DropCost bigger = drop(xfs, 128 * kMiB, true);
  EXPECT_LE(punched.unlink_ns, 2 * plain.unlink_ns);
  EXPECT_GT(punched.reclaim_ns, 5 * plain.reclaim_ns);
  EXPECT_GT(bigger.reclaim_ns, punched.reclaim_ns * 19 / 10);
  // The whole drop costs what it costs without the workers.
  EXPECT_EQ(punched.total(),
            drop(with("xfs", {"allocation.background_reclaim=false"}), 64 * kMiB, true).total());
}

TEST(VolumeTime, WriterPastTheDirtyLimitWritesBack) {
  Fs fs(with("ext4", {"page_cache.dirty_limit_bytes=8192"}));
  const Profile& p = fs.volume.profile();
  const uint64_t f = fs.create_open("f");
  fs.volume.reset_statistics();
  ASSERT_TRUE(fs.write(f, 0, pattern(kPage, 'a')).has_value());
  EXPECT_EQ(op_ns(fs, "write"), copy_ns(p, kPage));  // under the limit
  ASSERT_TRUE(fs.write(f, kPage, pattern(2 * kPage, 'b')).has_value());
  // 12 KiB dirty > 8 KiB: the writer writes the file's dirty pages back.
  EXPECT_EQ(op_ns(fs, "write"),
            copy_ns(p, kPage) + copy_ns(p, 2 * kPage) + device_write_ns(p, 3 * kPage));
  EXPECT_EQ(fs.stats(f).dirty_bytes, 0u);
  EXPECT_EQ(fs.stats(f).unsynced_bytes, 3 * kPage);  // written back is not durable
}

TEST(VolumeTime, WriterUnderTheDirtyLimitWritesNothingBack) {
  Fs fs(with("ext4", {"page_cache.dirty_limit_bytes=65536"}));
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(16 * kPage, 'a')).has_value());  // at the limit, not past
  EXPECT_EQ(fs.stats(f).dirty_bytes, 16 * kPage);
}

// --- crash

TEST(VolumeCrash, AppendedUnsyncedDataIsTruncatedAway) {
  for (std::string_view profile : {"nfs", "ext4", "xfs", "btrfs"}) {
    Fs fs(profile);
    const uint64_t f = fs.create_open("f");
    ASSERT_TRUE(fs.write(f, 0, pattern(5000, 'a')).has_value());
    fs.fsync(f);
    ASSERT_TRUE(fs.write(f, 5000, pattern(9000, 'b')).has_value());
    const CrashReport report = fs.volume.crash();
    EXPECT_EQ(report.restored_files, std::vector<uint64_t>{f}) << profile;
    EXPECT_EQ(fs.attributes(f).size, 5000u) << profile;
    EXPECT_EQ(fs.read(f, 0, 20'000), pattern(5000, 'a')) << profile;
    // Extending it again reads zeros where the lost data was.
    ASSERT_TRUE(fs.truncate(f, 14'000).has_value());
    EXPECT_EQ(fs.read(f, 5000, 9000), zeros(9000)) << profile;
  }
}

TEST(VolumeCrash, BytesOverwrittenAfterTheSyncComeBack) {
  for (std::string_view profile : {"nfs", "ext4", "xfs", "btrfs"}) {
    Fs fs(profile);
    const uint64_t f = fs.create_open("f");
    ASSERT_TRUE(fs.write(f, 0, pattern(3 * kPage, 'a')).has_value());
    fs.fsync(f);
    ASSERT_TRUE(fs.write(f, kPage - 10, pattern(100, 'z')).has_value());
    ASSERT_TRUE(write_flags(fs, f, 2 * kPage, pattern(kPage, 'y'), O_DIRECT).has_value());
    fs.volume.crash();
    EXPECT_EQ(fs.read(f, 0, 3 * kPage), pattern(3 * kPage, 'a')) << profile;
  }
}

TEST(VolumeCrash, TruncateAfterTheSyncIsUndone) {
  for (std::string_view profile : {"ext4", "xfs", "btrfs"}) {
    Fs fs(profile);
    const uint64_t f = fs.create_open("f");
    ASSERT_TRUE(fs.write(f, 0, pattern(10'000, 'a')).has_value());
    fs.fsync(f);
    ASSERT_TRUE(fs.truncate(f, 100).has_value());
    fs.volume.crash();
    EXPECT_EQ(fs.attributes(f).size, 10'000u) << profile;
    EXPECT_EQ(fs.read(f, 0, 10'000), pattern(10'000, 'a')) << profile;
  }
}

TEST(VolumeCrash, TruncateToZeroAfterTheSyncIsUndone) {
  Fs fs("ext4");
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(10'000, 'a')).has_value());
  fs.fsync(f);
  ASSERT_TRUE(fs.volume.open(f, O_RDWR | O_TRUNC).has_value());
  ASSERT_TRUE(fs.write(f, 0, pattern(20, 'b')).has_value());
  fs.volume.crash();
  EXPECT_EQ(fs.attributes(f).size, 10'000u);
  EXPECT_EQ(fs.read(f, 0, 10'000), pattern(10'000, 'a'));
}

// A truncate leaves the synced bytes it cuts where they are (the cut tail,
// regular_file.h): no page is saved for them, and a crash finds them there.
TEST(VolumeCrash, TruncateOfSyncedDataSavesNoPage) {
  for (std::string_view profile : {"ext4", "xfs", "btrfs", "ideal"}) {
    Fs fs(profile);
    const uint64_t f = fs.create_open("f");
    const std::string synced = pattern(64 * kPage + 123, 'a');
    ASSERT_TRUE(fs.write(f, 0, synced).has_value());
    fs.fsync(f);
    const uint64_t saved_before = FileDurability::saved_memory_bytes();
    ASSERT_TRUE(fs.truncate(f, 3 * kPage + 7).has_value());
    ASSERT_TRUE(fs.truncate(f, 100).has_value());  // cuts more of the same tail
    EXPECT_EQ(FileDurability::saved_memory_bytes(), saved_before) << profile;
    EXPECT_EQ(fs.read(f, 0, 200), synced.substr(0, 100)) << profile;
    fs.volume.crash();
    EXPECT_EQ(fs.attributes(f).size, synced.size()) << profile;
    EXPECT_EQ(fs.read(f, 0, synced.size()), synced) << profile;
    EXPECT_EQ(FileDurability::saved_memory_bytes(), saved_before) << profile;
  }
}

// The file written again from the start after an O_TRUNC (a log or a table
// rewritten whole): the memory store's whole segments of the cut tail are
// saved as they are, the rest copied, and a crash brings all of it back.
TEST(VolumeCrash, AFileRewrittenAfterOTruncIsBroughtBackWholeByACrash) {
  constexpr uint64_t kSegment = MemoryFileData::kSegmentSize;
  for (std::string_view profile : {"ext4", "xfs", "btrfs", "ideal"}) {
    Fs fs(profile);
    const uint64_t f = fs.create_open("f");
    const std::string synced = pattern(3 * kSegment + 5 * kPage + 11, 'a');
    ASSERT_TRUE(fs.write(f, 0, synced).has_value());
    fs.fsync(f);
    const uint64_t saved_before = FileDurability::saved_memory_bytes();
    ASSERT_TRUE(fs.volume.open(f, O_RDWR | O_TRUNC).has_value());
    const std::string again = pattern(synced.size() + kPage, 'b');
    for (uint64_t at = 0; at < again.size(); at += kSegment / 2) {
      ASSERT_TRUE(fs.write(f, at, std::string_view(again).substr(at, kSegment / 2)).has_value());
    }
    EXPECT_GE(FileDurability::saved_memory_bytes(), saved_before + synced.size() - kPage)
        << profile;
    EXPECT_EQ(fs.read(f, 0, again.size()), again) << profile;
    fs.volume.crash();
    EXPECT_EQ(fs.attributes(f).size, synced.size()) << profile;
    EXPECT_EQ(fs.read(f, 0, synced.size()), synced) << profile;
    EXPECT_EQ(FileDurability::saved_memory_bytes(), saved_before) << profile;
  }
}

// Once a sync makes the truncate durable, the cut bytes are gone for good:
// the file grown again reads zeros, before a crash and after.
TEST(VolumeCrash, ASyncedTruncateGrownAgainReadsZeros) {
  for (std::string_view profile : {"ext4", "xfs", "btrfs", "nfs"}) {
    Fs fs(profile);
    const uint64_t f = fs.create_open("f");
    ASSERT_TRUE(fs.write(f, 0, pattern(16 * kPage, 'a')).has_value());
    fs.fsync(f);
    ASSERT_TRUE(fs.truncate(f, 1000).has_value());
    fs.fsync(f);
    ASSERT_TRUE(fs.truncate(f, 16 * kPage).has_value());
    const std::string expected = pattern(16 * kPage, 'a').substr(0, 1000) + zeros(16 * kPage - 1000);
    EXPECT_EQ(fs.read(f, 0, 16 * kPage), expected) << profile;
    fs.fsync(f);
    fs.volume.crash();
    EXPECT_EQ(fs.read(f, 0, 16 * kPage), expected) << profile;
  }
}

// The file growing over the cut bytes before a sync (a write past the size, a
// truncate up, fallocate) reads zeros there, and a crash still brings back
// the synced contents, the pages the growth overwrote too.
TEST(VolumeCrash, GrowingOverTheCutReadsZerosAndACrashUndoesBoth) {
  for (std::string_view profile : {"ext4", "xfs", "btrfs"}) {
    for (const std::string_view growth : {"write", "truncate", "fallocate"}) {
      Fs fs(profile);
      const uint64_t f = fs.create_open("f");
      const std::string synced = pattern(32 * kPage, 'a');
      ASSERT_TRUE(fs.write(f, 0, synced).has_value());
      fs.fsync(f);
      ASSERT_TRUE(fs.truncate(f, 2 * kPage + 10).has_value());
      if (growth == "write") {
        ASSERT_TRUE(fs.write(f, 20 * kPage, "bbbb").has_value());
        EXPECT_EQ(fs.read(f, 2 * kPage + 10, 18 * kPage), zeros(18 * kPage - 10) + "bbbb")
            << profile;
      } else if (growth == "truncate") {
        ASSERT_TRUE(fs.truncate(f, 20 * kPage).has_value());
        EXPECT_EQ(fs.read(f, 2 * kPage + 10, 18 * kPage), zeros(18 * kPage - 10)) << profile;
      } else {
        ASSERT_TRUE(fs.volume.fallocate(f, 0, 4 * kPage, 16 * kPage).has_value());
        EXPECT_EQ(fs.read(f, 2 * kPage + 10, 18 * kPage), zeros(18 * kPage - 10)) << profile;
      }
      fs.volume.crash();
      EXPECT_EQ(fs.attributes(f).size, synced.size()) << profile << " " << growth;
      EXPECT_EQ(fs.read(f, 0, synced.size()), synced) << profile << " " << growth;
    }
  }
}

TEST(VolumeCrash, PunchAfterTheSyncIsUndone) {
  for (std::string_view profile : {"ext4", "xfs", "btrfs"}) {
    Fs fs(profile);
    const uint64_t f = fs.create_open("f");
    ASSERT_TRUE(fs.write(f, 0, pattern(4 * kPage, 'a')).has_value());
    fs.fsync(f);
    const FileStats synced = fs.stats(f);
    ASSERT_TRUE(fs.punch(f, kPage, 2 * kPage).has_value());
    ASSERT_LT(fs.stats(f).allocated_bytes, synced.allocated_bytes) << profile;
    fs.volume.crash();
    EXPECT_EQ(fs.read(f, 0, 4 * kPage), pattern(4 * kPage, 'a')) << profile;
    EXPECT_EQ(fs.stats(f).holes, 0u) << profile;
  }
}

// NFS: a size change writes the file back and commits it first (nfs_setattr),
// and the server's SETATTR is stable before it replies.
TEST(VolumeCrash, OnNfsATruncateIsDurableWithEverythingBeforeIt) {
  Fs fs("nfs");
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(10'000, 'a')).has_value());
  fs.fsync(f);
  ASSERT_TRUE(fs.write(f, 0, pattern(100, 'b')).has_value());
  const uint64_t commits_before = fs.stats(f).unsynced_bytes;
  ASSERT_EQ(commits_before, 100u);
  ASSERT_TRUE(fs.truncate(f, 5000).has_value());
  EXPECT_EQ(fs.stats(f).unsynced_bytes, 0u);
  EXPECT_EQ(fs.stats(f).dirty_bytes, 0u) << "written back first";
  fs.volume.crash();
  EXPECT_EQ(fs.attributes(f).size, 5000u);
  EXPECT_EQ(fs.read(f, 0, 5000), pattern(100, 'b') + pattern(10'000, 'a').substr(100, 4900));
}

// NFS 4.2: DEALLOCATE is sent after the client writes the file back; ALLOCATE
// is not, and the data written before it stays unsynced. The server commits both.
TEST(VolumeCrash, OnNfs42AllocateAndDeallocateAreDurableAtOnce) {
  Fs fs("nfs42");
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(4 * kPage, 'a')).has_value());
  fs.fsync(f);
  ASSERT_TRUE(fs.write(f, 4 * kPage, pattern(kPage, 'u')).has_value());  // unsynced append
  ASSERT_TRUE(fs.volume.fallocate(f, 0, 2 * kPage, kPage).has_value());  // inside: no size
  fs.volume.crash();
  EXPECT_EQ(fs.attributes(f).size, 4 * kPage) << "the append never reached the server";

  ASSERT_TRUE(fs.write(f, 4 * kPage, pattern(kPage, 'u')).has_value());
  ASSERT_TRUE(fs.volume.fallocate(f, 0, 8 * kPage, 8 * kPage).has_value());
  EXPECT_EQ(fs.stats(f).unsynced_bytes, kPage);
  fs.volume.crash();
  EXPECT_EQ(fs.attributes(f).size, 16 * kPage) << "the ALLOCATE's size is the server's";
  EXPECT_EQ(fs.read(f, 4 * kPage, kPage), zeros(kPage)) << "the append was never committed";

  ASSERT_TRUE(fs.write(f, 0, pattern(kPage, 'c')).has_value());
  ASSERT_TRUE(fs.punch(f, 2 * kPage, kPage).has_value());
  fs.volume.crash();
  EXPECT_EQ(fs.read(f, 0, kPage), pattern(kPage, 'c')) << "written back before DEALLOCATE";
  EXPECT_EQ(fs.read(f, 2 * kPage, kPage), zeros(kPage));
  EXPECT_EQ(fs.volume.seek(f, 0, SEEK_HOLE), 2 * kPage) << "the punched block is durable";
}

// An unsynced overwrite a truncate then cut, in a block the file keeps: the
// part of it that persists before the power cut is the zeros the truncate left.
TEST(VolumeCrash, APersistedOverwriteATruncateCutReadsAsZeros) {
  Fs fs("ext4-hdd");
  const uint64_t f = fs.create_open("t.ibd");
  ASSERT_TRUE(fs.write(f, 0, pattern(4 * kPage, 'o')).has_value());
  fs.fsync(f);
  ASSERT_TRUE(fs.write(f, 0, pattern(4 * kPage, 'n')).has_value());
  ASSERT_TRUE(fs.truncate(f, 100).has_value());
  EXPECT_EQ(fs.volume.write_back_at_random(1.0, 7), kPage) << "the block the file keeps";
  fs.volume.crash();
  EXPECT_EQ(fs.attributes(f).size, 4 * kPage) << "the truncate was never committed";
  EXPECT_EQ(fs.read(f, 0, 4 * kPage), pattern(4 * kPage, 'n').substr(0, 100) +
                                          zeros(kPage - 100) +
                                          pattern(4 * kPage, 'o').substr(kPage, 3 * kPage));
}

// Torn and reordered writes: before the power cut part of the unsynced in-place
// overwrites reached the device, in atomic units; appends never do, and a
// copy-on-write volume never tears.
TEST(VolumeCrash, PartOfTheUnsyncedOverwritesPersistInAtomicUnits) {
  Fs fs("ext4-hdd");
  ASSERT_EQ(fs.volume.profile().atomic_write_bytes, 512u);
  const uint64_t f = fs.create_open("t.ibd");
  ASSERT_TRUE(fs.write(f, 0, pattern(4 * kPage, 'o')).has_value());
  fs.fsync(f);
  ASSERT_TRUE(fs.write(f, 0, pattern(4 * kPage, 'n')).has_value());      // an overwrite
  ASSERT_TRUE(fs.write(f, 4 * kPage, pattern(kPage, 'a')).has_value());  // an append
  const uint64_t persisted = fs.volume.write_back_at_random(0.5, 7);
  EXPECT_GT(persisted, 0u);
  EXPECT_LT(persisted, 4 * kPage);
  EXPECT_EQ(persisted % 512, 0u);
  fs.volume.crash();
  const std::string after = fs.read(f, 0, 5 * kPage);
  ASSERT_EQ(after.size(), 4 * kPage) << "the append's size was never committed";
  uint64_t new_bytes = 0;
  for (uint64_t sector = 0; sector < 4 * kPage; sector += 512) {
    const std::string piece = after.substr(sector, 512);
    const bool is_new = piece == pattern(4 * kPage, 'n').substr(sector, 512);
    EXPECT_TRUE(is_new || piece == pattern(4 * kPage, 'o').substr(sector, 512))
        << "sector " << sector << " is neither the old nor the new data";
    if (is_new) new_bytes += 512;
  }
  EXPECT_EQ(new_bytes, persisted);

  Fs same("ext4-hdd");
  const uint64_t g = same.create_open("t.ibd");
  ASSERT_TRUE(same.write(g, 0, pattern(4 * kPage, 'o')).has_value());
  same.fsync(g);
  ASSERT_TRUE(same.write(g, 0, pattern(4 * kPage, 'n')).has_value());
  ASSERT_TRUE(same.write(g, 4 * kPage, pattern(kPage, 'a')).has_value());
  EXPECT_EQ(same.volume.write_back_at_random(0.5, 7), persisted) << "the seed decides";

  Fs cow("btrfs");
  const uint64_t h = cow.create_open("t.ibd");
  ASSERT_TRUE(cow.write(h, 0, pattern(4 * kPage, 'o')).has_value());
  cow.fsync(h);
  ASSERT_TRUE(cow.write(h, 0, pattern(4 * kPage, 'n')).has_value());
  EXPECT_EQ(cow.volume.write_back_at_random(1.0, 7), 0u) << "copy-on-write never tears";
}

// An unlink not yet committed is undone by a crash: the file comes back with
// its synced contents. Its blocks were free meanwhile (another file may have
// taken them: it gets new ones); a commit makes the unlink durable.
TEST(VolumeCrash, AnUncommittedUnlinkIsUndone) {
  for (std::string_view profile : {"ext4", "xfs", "btrfs"}) {
    SCOPED_TRACE(profile);
    Fs fs(with(profile, {"allocation.background_reclaim=false"}));
    const uint64_t f = fs.create_open("t.ibd");
    ASSERT_TRUE(fs.write(f, 0, pattern(64 * kKiB, 's')).has_value());
    fs.fsync(f);
    fs.flush(f);
    fs.volume.release(f);
    const uint64_t synced_device = fs.device_allocated();
    ASSERT_TRUE(fs.volume.unlink(kRoot, "t.ibd").has_value());
    EXPECT_LT(fs.device_allocated(), synced_device) << "its blocks are free at once";
    const uint64_t other = fs.create_open("other");  // may take them
    ASSERT_TRUE(fs.write(other, 0, pattern(64 * kKiB, 'o')).has_value());
    fs.fsync(other);  // commits the journal on ext4 and xfs, not on btrfs
    if (profile == "btrfs") {
      const CrashReport report = fs.volume.crash();
      EXPECT_TRUE(exists(fs, "t.ibd"));
      EXPECT_EQ(fs.read(fs.inode_of("t.ibd"), 0, 64 * kKiB + 1), pattern(64 * kKiB, 's'));
      EXPECT_EQ(fs.read(other, 0, 64 * kKiB), pattern(64 * kKiB, 'o'));
      EXPECT_FALSE(report.removed_entries.empty()) << "the kernel must forget the negative entry";
    } else {
      fs.volume.crash();
      EXPECT_FALSE(exists(fs, "t.ibd")) << "the other file's fsync committed the unlink";
    }
  }
  Fs ext4("ext4");
  const uint64_t g = ext4.create_open("g");
  ASSERT_TRUE(ext4.write(g, 0, pattern(8 * kKiB, 'g')).has_value());
  ext4.fsync(g);
  ASSERT_TRUE(ext4.volume.unlink(kRoot, "g").has_value());
  ext4.volume.crash();
  ASSERT_TRUE(exists(ext4, "g"));
  EXPECT_EQ(ext4.read(g, 0, 8 * kKiB + 1), pattern(8 * kKiB, 'g'));
  EXPECT_EQ(ext4.attributes(g).nlink, 1u);
}

// Undone removals in their corners: a file with two links removed twice (with
// background reclaim, whose task must not free what the crash brought back),
// and a file whose directory was removed too (it cannot come back there; its
// storage goes, nothing leaks).
TEST(VolumeCrash, UndoneRemovalsKeepTheDeviceExact) {
  Fs xfs(with("xfs", {"allocation.background_reclaim=true"}));
  const uint64_t a = xfs.create_open("a");
  ASSERT_TRUE(xfs.write(a, 0, pattern(64 * kKiB, 'a')).has_value());
  xfs.fsync(a);
  xfs.flush(a);
  xfs.volume.release(a);
  const uint64_t synced_device = xfs.device_allocated();
  ASSERT_TRUE(xfs.volume.link(a, kRoot, "c").has_value());
  ASSERT_TRUE(xfs.volume.unlink(kRoot, "a").has_value());
  ASSERT_TRUE(xfs.volume.unlink(kRoot, "c").has_value());
  xfs.volume.crash();
  ASSERT_TRUE(exists(xfs, "a"));
  EXPECT_FALSE(exists(xfs, "c"));
  EXPECT_EQ(xfs.read(a, 0, 64 * kKiB + 1), pattern(64 * kKiB, 'a'));
  EXPECT_EQ(xfs.device_allocated(), synced_device);

  Fs btrfs("btrfs");
  const uint64_t before = btrfs.device_allocated();
  const uint64_t d = btrfs.mkdir("D");
  const uint64_t f = btrfs.create_open("f", d);
  ASSERT_TRUE(btrfs.write(f, 0, pattern(16 * kKiB, 'f')).has_value());
  btrfs.fsync(f);
  btrfs.flush(f);
  btrfs.volume.release(f);
  ASSERT_TRUE(btrfs.volume.lookup(kRoot, "D").has_value());  // a reference keeps D's inode
  ASSERT_TRUE(btrfs.volume.unlink(d, "f").has_value());
  ASSERT_TRUE(btrfs.volume.rmdir(kRoot, "D").has_value());
  btrfs.fsync(kRoot);  // commits D's removal; f's stays pending
  btrfs.volume.crash();
  EXPECT_FALSE(exists(btrfs, "D"));
  EXPECT_EQ(btrfs.device_allocated(), before) << "f's storage went with it";
}

// The atomic-replace pattern without the directory fsync: write a temporary,
// fsync it, rename it over the target. A crash before a commit undoes the
// rename and brings the old target back.
TEST(VolumeCrash, AnUncommittedRenameOverAFileIsUndone) {
  Fs fs("ext4");
  const uint64_t old_file = fs.create_open("state");
  ASSERT_TRUE(fs.write(old_file, 0, "version 1").has_value());
  fs.fsync(old_file);
  const uint64_t new_file = fs.create_open("state.tmp");
  ASSERT_TRUE(fs.write(new_file, 0, "version 2").has_value());
  fs.fsync(new_file);  // commits state.tmp's creation
  ASSERT_TRUE(fs.volume.rename(kRoot, "state.tmp", kRoot, "state", 0).has_value());
  fs.volume.crash();
  EXPECT_EQ(fs.read(fs.inode_of("state"), 0, 100), "version 1");
  EXPECT_EQ(fs.read(fs.inode_of("state.tmp"), 0, 100), "version 2");

  ASSERT_TRUE(fs.volume.rename(kRoot, "state.tmp", kRoot, "state", 0).has_value());
  fs.fsync(kRoot);  // the directory fsync the pattern needs
  fs.volume.crash();
  EXPECT_EQ(fs.read(fs.inode_of("state"), 0, 100), "version 2");
  EXPECT_FALSE(exists(fs, "state.tmp"));
}

// btrfs: the renamed file's fsync logs its new name, which replaces the old
// target for good; NFS: an unlink is the server's at once.
TEST(VolumeCrash, RemovalsCommittedByTheirOwnRules) {
  Fs btrfs("btrfs");
  const uint64_t a = btrfs.create_open("a");
  ASSERT_TRUE(btrfs.write(a, 0, "new").has_value());
  const uint64_t b = btrfs.create_open("b");
  ASSERT_TRUE(btrfs.write(b, 0, "old").has_value());
  btrfs.fsync(b);
  ASSERT_TRUE(btrfs.volume.rename(kRoot, "a", kRoot, "b", 0).has_value());
  btrfs.fsync(a);
  btrfs.volume.crash();
  EXPECT_EQ(btrfs.read(btrfs.inode_of("b"), 0, 10), "new");
  EXPECT_FALSE(exists(btrfs, "a"));

  // The server's REMOVE (the client's silly rename would keep the open file).
  Fs nfs(with("nfs", {"client.silly_rename=false"}));
  const uint64_t f = nfs.create_open("f");
  ASSERT_TRUE(nfs.write(f, 0, "data").has_value());
  nfs.fsync(f);
  ASSERT_TRUE(nfs.volume.unlink(kRoot, "f").has_value());
  nfs.volume.crash();
  EXPECT_FALSE(exists(nfs, "f"));
}

TEST(VolumeCrash, FileCreatedSinceTheLastCommitDisappearsOnAJournal) {
  Fs fs("ext4");
  ASSERT_EQ(fs.volume.profile().metadata_durability, "journal");
  const uint64_t old_file = fs.create_open("old");
  fs.fsync(old_file);
  const uint64_t new_file = fs.create_open("new");
  ASSERT_TRUE(fs.write(new_file, 0, "data").has_value());
  const CrashReport report = fs.volume.crash();
  EXPECT_TRUE(exists(fs, "old"));
  EXPECT_FALSE(exists(fs, "new"));
  ASSERT_EQ(report.removed_entries.size(), 1u);
  EXPECT_EQ(report.removed_entries[0].first, kRoot);
  EXPECT_EQ(report.removed_entries[0].second, "new");
  EXPECT_FALSE(fs.volume.snapshot().files.contains("/new"));
}

TEST(VolumeCrash, FileCreatedOnNfsStays) {
  Fs fs("nfs");
  ASSERT_EQ(fs.volume.profile().metadata_durability, "synchronous");
  const uint64_t f = fs.create_open("new");
  ASSERT_TRUE(fs.write(f, 0, "data").has_value());
  const CrashReport report = fs.volume.crash();
  EXPECT_TRUE(report.removed_entries.empty());
  EXPECT_TRUE(exists(fs, "new"));
  EXPECT_EQ(fs.attributes(f).size, 0u);  // its data was never synced
}

TEST(VolumeCrash, AnyFsyncCommitsTheNamespace) {
  Fs fs("ext4");
  const uint64_t a = fs.create_open("a");
  fs.create_open("b");
  const uint64_t dir = fs.mkdir("dir");
  fs.create_open("c", dir);
  fs.fsync(a);  // one journal: b, dir and dir/c commit with a
  fs.volume.crash();
  EXPECT_TRUE(exists(fs, "a"));
  EXPECT_TRUE(exists(fs, "b"));
  EXPECT_TRUE(exists(fs, "dir"));
  EXPECT_TRUE(exists(fs, "c", dir));
}

TEST(VolumeCrash, DirectoryFsyncCommitsTheNamespace) {
  Fs fs("ext4");
  fs.create_open("a");
  fs.fsync(kRoot);
  fs.volume.crash();
  EXPECT_TRUE(exists(fs, "a"));
}

TEST(VolumeCrash, RenameSinceTheLastCommitIsUndone) {
  Fs fs("ext4");
  const uint64_t f = fs.create_open("a");
  ASSERT_TRUE(fs.write(f, 0, "contents").has_value());
  fs.fsync(f);
  ASSERT_TRUE(fs.volume.rename(kRoot, "a", kRoot, "b", 0).has_value());
  fs.volume.crash();
  EXPECT_EQ(fs.inode_of("a"), f);
  EXPECT_FALSE(exists(fs, "b"));
  EXPECT_EQ(fs.read(f, 0, 100), "contents");
}

TEST(VolumeCrash, CommittedRenameStays) {
  Fs fs("ext4");
  const uint64_t f = fs.create_open("a");
  fs.fsync(f);
  ASSERT_TRUE(fs.volume.rename(kRoot, "a", kRoot, "b", 0).has_value());
  fs.fsync(kRoot);
  fs.volume.crash();
  EXPECT_FALSE(exists(fs, "a"));
  EXPECT_EQ(fs.inode_of("b"), f);
}

TEST(VolumeCrash, DsyncDataSurvives) {
  for (std::string_view profile : {"nfs", "ext4", "xfs", "btrfs"}) {
    Fs fs(profile);
    const uint64_t f = fs.create_open("f");
    fs.fsync(f);
    ASSERT_TRUE(write_flags(fs, f, 0, pattern(6000, 'a'), O_DSYNC).has_value());
    ASSERT_TRUE(fs.write(f, 6000, pattern(3000, 'b')).has_value());  // not synced
    fs.volume.crash();
    EXPECT_EQ(fs.attributes(f).size, 6000u) << profile;
    EXPECT_EQ(fs.read(f, 0, 10'000), pattern(6000, 'a')) << profile;
  }
}

TEST(VolumeCrash, DsyncOverwriteSurvivesAndTheRestOfThePageComesBack) {
  for (std::string_view profile : {"nfs", "ext4", "btrfs"}) {
    Fs fs(profile);
    const uint64_t f = fs.create_open("f");
    ASSERT_TRUE(fs.write(f, 0, pattern(2 * kPage, 'a')).has_value());
    fs.fsync(f);
    ASSERT_TRUE(fs.write(f, 0, pattern(2 * kPage, 'b')).has_value());  // not synced
    ASSERT_TRUE(write_flags(fs, f, 100, pattern(10, 'c'), O_DSYNC).has_value());
    fs.volume.crash();
    // An overwrite in place: ext4's O_DSYNC commits no transaction (the
    // page written back in place is not tracked: docs/time.md).
    std::string expected = pattern(2 * kPage, 'a');
    expected.replace(100, 10, pattern(10, 'c'));
    EXPECT_EQ(fs.read(f, 0, 2 * kPage), expected) << profile;
  }
}

TEST(VolumeCrash, DsyncIntoASyncedHoleKeepsTheRestOfThePageZero) {
  // The synced file has a hole at page 0; unsynced bytes fill it, then an
  // O_DSYNC write makes ten of them durable: only those ten survive, or on a
  // journal the whole page its writeback wrote.
  for (std::string_view profile : {"nfs", "ext4", "xfs", "btrfs"}) {
    Fs fs(profile);
    const uint64_t f = fs.create_open("f");
    ASSERT_TRUE(fs.write(f, kPage, pattern(kPage, 'a')).has_value());
    fs.fsync(f);
    ASSERT_TRUE(fs.write(f, 0, pattern(kPage, 'b')).has_value());
    ASSERT_TRUE(write_flags(fs, f, 100, pattern(10, 'c'), O_DSYNC).has_value());
    fs.volume.crash();
    const bool journal = profile == "ext4" || profile == "xfs";
    std::string expected = (journal ? pattern(kPage, 'b') : zeros(kPage)) + pattern(kPage, 'a');
    expected.replace(100, 10, pattern(10, 'c'));
    EXPECT_EQ(fs.read(f, 0, 2 * kPage), expected) << profile;
  }
}

TEST(VolumeCrash, DsyncWriteToANewFileCommitsItsEntryOnAJournal) {
  // O_DSYNC is a write and an fdatasync: on ext4 a size change commits the
  // running transaction, and the file's entry with it.
  Fs fs("ext4");
  const uint64_t f = fs.create_open("new");
  ASSERT_TRUE(write_flags(fs, f, 0, pattern(5000, 'a'), O_DSYNC).has_value());
  fs.volume.crash();
  EXPECT_EQ(fs.inode_of("new"), f);
  EXPECT_EQ(fs.read(f, 0, 5000), pattern(5000, 'a'));
}

TEST(VolumeCrash, DirectWriteIsLostWithoutASync) {
  Fs fs("ext4");
  const uint64_t f = fs.create_open("f");
  fs.fsync(f);
  ASSERT_TRUE(write_flags(fs, f, 0, pattern(kPage, 'a'), O_DIRECT).has_value());
  fs.volume.crash();
  EXPECT_EQ(fs.attributes(f).size, 0u);
}

TEST(VolumeCrash, DirectDsyncWriteIsDurable) {
  // O_DIRECT | O_DSYNC: the device's cache is flushed after the write.
  Fs fs("ext4");
  const Profile& p = fs.volume.profile();
  const uint64_t f = fs.create_open("f");
  fs.fsync(f);
  fs.volume.reset_statistics();
  ASSERT_TRUE(write_flags(fs, f, 0, pattern(kPage, 'a'), O_DIRECT | O_DSYNC).has_value());
  EXPECT_EQ(op_ns(fs, "write"), device_write_ns(p, kPage) + commit_ns(p));
  EXPECT_EQ(fs.stats(f).unsynced_bytes, 0u);
  fs.volume.crash();
  EXPECT_EQ(fs.read(f, 0, kPage), pattern(kPage, 'a'));
}

TEST(VolumeCrash, CloseOnNfsMakesDataDurable) {
  Fs fs("nfs");
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(5000, 'a')).has_value());
  fs.flush(f);
  fs.volume.crash();
  EXPECT_EQ(fs.read(f, 0, 5000), pattern(5000, 'a'));
}

TEST(VolumeCrash, UnsyncedAndDirtyBytesGoToZero) {
  for (std::string_view profile : {"nfs", "ext4"}) {
    Fs fs(profile);
    const uint64_t a = fs.create_open("a");
    const uint64_t b = fs.create_open("b");
    fs.fsync(a);
    ASSERT_TRUE(fs.write(a, 0, pattern(5000, 'a')).has_value());
    ASSERT_TRUE(fs.write(b, 100, pattern(5000, 'b')).has_value());
    fs.volume.crash();
    for (const auto& [path, file] : fs.volume.snapshot().files) {
      EXPECT_EQ(file.unsynced_bytes, 0u) << profile << " " << path;
      EXPECT_EQ(file.dirty_bytes, 0u) << profile << " " << path;
    }
    EXPECT_TRUE(fs.volume.crash().restored_files.empty()) << profile;  // nothing left
  }
}

// Writes, overwrites, punches and truncates a synced 64 KiB file, then crashes.
// Returns the device's allocated bytes at the sync.
uint64_t change_synced_file_and_crash(Fs& fs, std::string_view profile) {
  const uint64_t f = fs.create_open("f");
  EXPECT_TRUE(fs.write(f, 0, pattern(64 * kKiB, 'a')).has_value());
  fs.fsync(f);
  fs.flush(f);  // xfs trims its speculative preallocation
  const uint64_t synced_device = fs.device_allocated();
  const FileStats synced = fs.stats(f);

  EXPECT_TRUE(fs.write(f, 64 * kKiB, pattern(64 * kKiB, 'b')).has_value());
  EXPECT_TRUE(fs.write(f, 8 * kKiB, pattern(8 * kKiB, 'c')).has_value());
  if (fs.volume.profile().supports(FallocateMode::kPunchHole)) {
    EXPECT_TRUE(fs.punch(f, 32 * kKiB, 16 * kKiB).has_value());
  }
  EXPECT_TRUE(fs.truncate(f, 20 * kKiB).has_value());
  fs.fsync(kRoot);  // a namespace commit is no data sync
  fs.volume.crash();

  const FileStats after = fs.stats(f);
  EXPECT_EQ(after.size, synced.size) << profile;
  EXPECT_EQ(after.allocated_bytes, synced.allocated_bytes) << profile;
  EXPECT_EQ(after.delayed_bytes, 0u) << profile;  // synced data is on the device
  EXPECT_EQ(fs.read(f, 0, 64 * kKiB), pattern(64 * kKiB, 'a')) << profile;
  return synced_device;
}

TEST(VolumeCrash, AllocationGoesBackToTheSyncedState) {
  for (std::string_view profile : {"ideal", "ext4", "xfs"}) {
    Fs fs(profile);
    const uint64_t synced_device = change_synced_file_and_crash(fs, profile);
    EXPECT_EQ(fs.device_allocated(), synced_device) << profile;
  }
}

// On btrfs an overwrite since the sync moved blocks (their old data extent stays
// allocated as a bookend): the crash maps the old blocks again and frees the new.
TEST(VolumeCrash, AllocationGoesBackToTheSyncedStateOnBtrfs) {
  Fs fs("btrfs");
  const uint64_t synced_device = change_synced_file_and_crash(fs, "btrfs");
  EXPECT_EQ(fs.device_allocated(), synced_device);
}

TEST(VolumeCrash, FallocateAfterTheSyncIsUndone) {
  for (std::string_view profile : {"ext4", "xfs", "btrfs"}) {
    Fs fs(profile);
    const uint64_t f = fs.create_open("f");
    ASSERT_TRUE(fs.write(f, 0, pattern(kPage, 'a')).has_value());
    ASSERT_TRUE(fs.write(f, 16 * kPage, pattern(kPage, 'a')).has_value());
    fs.fsync(f);
    fs.flush(f);
    const uint64_t synced_device = fs.device_allocated();
    const FileStats synced = fs.stats(f);
    // Into the hole between the two pages: not durable until a sync.
    ASSERT_TRUE(fs.volume.fallocate(f, 0, 2 * kPage, 8 * kPage).has_value());
    fs.volume.crash();
    EXPECT_EQ(fs.stats(f).allocated_bytes, synced.allocated_bytes) << profile;
    EXPECT_EQ(fs.device_allocated(), synced_device) << profile;
  }
}

// Blocks fallocated past EOF (FALLOC_FL_KEEP_SIZE) since the sync go, although
// the size did not change: the allocation at the sync is kept, not only the size.
TEST(VolumeCrash, FallocatePastTheEndAfterTheSyncIsUndone) {
  Fs fs("ext4");
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(kPage, 'a')).has_value());
  fs.fsync(f);
  fs.flush(f);
  const uint64_t synced_device = fs.device_allocated();
  ASSERT_TRUE(fs.volume.fallocate(f, FALLOC_FL_KEEP_SIZE, kPage, kMiB).has_value());
  fs.volume.crash();
  EXPECT_EQ(fs.stats(f).preallocated_bytes, 0u);
  EXPECT_EQ(fs.device_allocated(), synced_device);
}

TEST(VolumeCrash, SyncedKeepSizePreallocationSurvives) {
  Fs fs("ext4");
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(kPage, 'a')).has_value());
  ASSERT_TRUE(fs.volume.fallocate(f, FALLOC_FL_KEEP_SIZE, kPage, kMiB).has_value());
  fs.fsync(f);
  ASSERT_TRUE(fs.volume.fallocate(f, FALLOC_FL_KEEP_SIZE, 4 * kMiB, kMiB).has_value());
  fs.volume.crash();
  EXPECT_EQ(fs.stats(f).preallocated_bytes, kMiB);
  EXPECT_EQ(fs.stats(f).size, kPage);
}

// Blocks a file punched since its sync may go to another file before the crash:
// the restored file gets new blocks for them, its data and the other file's intact.
TEST(VolumeCrash, BlocksTakenByAnotherFileSinceTheSyncAreReplaced) {
  // f's blocks, punched and not synced, go to g, which is synced. btrfs's log
  // tree makes g durable without the punch, so the crash gives f new blocks
  // for its data; on one journal the commit that carries g carries the punch.
  for (std::string_view profile : {"btrfs", "ext4"}) {
    Fs fs(profile);
    const bool journal = profile == "ext4";
    const uint64_t f = fs.create_open("f");
    ASSERT_TRUE(fs.write(f, 0, pattern(64 * kKiB, 'a')).has_value());
    fs.fsync(f);
    fs.flush(f);
    const FileStats synced = fs.stats(f);
    ASSERT_TRUE(fs.punch(f, 0, 64 * kKiB).has_value());
    const uint64_t g = fs.create_open("g");
    ASSERT_TRUE(fs.write(g, 0, pattern(64 * kKiB, 'g')).has_value());
    fs.fsync(g);
    fs.flush(g);
    const uint64_t before_crash = fs.device_allocated();
    fs.volume.crash();
    EXPECT_EQ(fs.stats(f).allocated_bytes, journal ? 0u : synced.allocated_bytes) << profile;
    EXPECT_EQ(fs.read(f, 0, 64 * kKiB), journal ? zeros(64 * kKiB) : pattern(64 * kKiB, 'a'))
        << profile;
    EXPECT_EQ(fs.read(g, 0, 64 * kKiB), pattern(64 * kKiB, 'g')) << profile;
    EXPECT_EQ(fs.device_allocated(), before_crash + (journal ? 0 : synced.allocated_bytes))
        << profile;
    // No block is mapped twice.
    std::vector<Extent> all = *fs.volume.file_extents(f);
    const std::vector<Extent> of_g = *fs.volume.file_extents(g);
    all.insert(all.end(), of_g.begin(), of_g.end());
    std::sort(all.begin(), all.end(),
              [](const Extent& a, const Extent& b) { return a.physical < b.physical; });
    for (size_t i = 1; i < all.size(); ++i) {
      EXPECT_LE(all[i - 1].physical_end(), all[i].physical) << profile;
    }
  }
}

// A crash frees what every file gained since its sync before any file takes
// back what it had: on a full device, the order of the files does not matter.
TEST(VolumeCrash, EveryFileLosesItsUnsyncedBlocksBeforeAnyTakesBackItsSyncedOnes) {
  for (const bool synced_file_first : {true, false}) {
    Fs fs(small("ext4", kMiB));
    const uint64_t first = fs.create_open("first");
    const uint64_t second = fs.create_open("second");
    const uint64_t synced = synced_file_first ? first : second;
    const uint64_t unsynced = synced_file_first ? second : first;
    ASSERT_TRUE(fs.write(synced, 0, pattern(512 * kKiB, 's')).has_value());
    fs.fsync(synced);
    ASSERT_TRUE(fs.truncate(synced, 0).has_value());                           // not durable
    ASSERT_TRUE(fs.write(unsynced, 0, pattern(250 * 4096, 'u')).has_value());  // delayed
    fs.volume.crash();
    EXPECT_EQ(fs.read(synced, 0, 512 * kKiB), pattern(512 * kKiB, 's')) << synced_file_first;
    EXPECT_EQ(fs.stats(synced).allocated_bytes, 512 * kKiB) << synced_file_first;
    EXPECT_EQ(fs.stats(unsynced).size, 0u) << synced_file_first;
  }
}

// --- faults

// On a local profile: an NFS client's write would return and report the
// error later (nfs_client_layer_test.cc).
TEST(VolumeFaults, NthWriteToAMatchingPathFails) {
  Fs fs("ext4");
  const uint64_t a1 = fs.create_open("a1");
  const uint64_t b = fs.create_open("b");
  ASSERT_TRUE(fs.engine.faults().add("op=write,path=/a*,error=EIO,nth=2").has_value());
  EXPECT_TRUE(fs.write(b, 0, "b1").has_value());
  EXPECT_TRUE(fs.write(a1, 0, "first").has_value());
  EXPECT_TRUE(fs.write(b, 2, "b2").has_value());
  EXPECT_EQ(error_of(fs.write(a1, 5, "second")), Errno{EIO});
  EXPECT_TRUE(fs.write(a1, 5, "third").has_value());
  EXPECT_TRUE(fs.write(b, 4, "b3").has_value());
  EXPECT_EQ(fs.read(a1, 0, 100), "firstthird");
  EXPECT_EQ(fs.read(b, 0, 100), "b1b2b3");
  EXPECT_EQ(fs.volume.snapshot().ops.at("write").errors.at("EIO"), 1u);
}

TEST(VolumeFaults, ErrorFaultChangesNothing) {
  Fs fs("ext4");
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(5000, 'a')).has_value());
  fs.fsync(f);
  const FileStats before = fs.stats(f);
  fs.volume.reset_statistics();
  ASSERT_TRUE(fs.engine.faults().add("op=write|truncate|punch|fsync,error=ENOSPC").has_value());
  EXPECT_EQ(error_of(fs.write(f, 100, pattern(9000, 'b'))), Errno{ENOSPC});
  EXPECT_EQ(error_of(fs.truncate(f, 10)), Errno{ENOSPC});
  EXPECT_EQ(error_of(fs.punch(f, 0, kPage)), Errno{ENOSPC});
  EXPECT_EQ(error_of(fs.volume.fsync(f, false)), Errno{ENOSPC});
  const FileStats after = fs.stats(f);
  EXPECT_EQ(after.size, before.size);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.dirty_bytes, 0u);
  EXPECT_EQ(after.unsynced_bytes, 0u);
  EXPECT_EQ(fs.read(f, 0, 10'000), pattern(5000, 'a'));
  EXPECT_EQ(fs.engine.cost().emulated_ns(), fs.stats(f).emulated_ns);  // the read only
  EXPECT_EQ(op_ns(fs, "write") + op_ns(fs, "truncate") + op_ns(fs, "punch") + op_ns(fs, "fsync"),
            0u);
}

TEST(VolumeFaults, LatencyFaultAddsExactlyItsLatency) {
  Fs fs("ext4");
  const uint64_t f = fs.create_open("f");
  ASSERT_TRUE(fs.write(f, 0, pattern(5000, 'a')).has_value());
  fs.fsync(f);
  fs.volume.reset_statistics();
  ASSERT_TRUE(fs.engine.faults().add("op=fsync,path=/f,latency=7ms").has_value());
  fs.fsync(f);  // a clean file: the fsync itself costs nothing
  EXPECT_EQ(op_ns(fs, "fsync"), 7'000'000u);
  EXPECT_EQ(fs.engine.cost().emulated_ns(), 7'000'000u);
  EXPECT_EQ(fs.stats(f).emulated_ns, 7'000'000u);

  // On a write it adds to the write's own cost.
  ASSERT_TRUE(fs.engine.faults().add("op=write,latency=250us").has_value());
  fs.volume.reset_statistics();
  ASSERT_TRUE(fs.write(f, 0, pattern(100, 'b')).has_value());
  EXPECT_EQ(op_ns(fs, "write"), copy_ns(fs.volume.profile(), 100) + 250'000u);
}

TEST(VolumeFaults, FaultsAppearInTheSnapshotWithTheirCounts) {
  Fs fs("nfs");
  const uint64_t a1 = fs.create_open("a1");
  const uint64_t b = fs.create_open("b");
  ASSERT_TRUE(fs.engine.faults().add("op=write,path=/a*,error=EIO,nth=2").has_value());
  ASSERT_TRUE(fs.engine.faults().add("op=fsync,latency=1ms").has_value());
  for (int i = 0; i < 3; ++i) (void)fs.write(a1, 0, "x");
  (void)fs.write(b, 0, "x");
  fs.fsync(b);
  const nlohmann::json faults = fs.volume.snapshot().faults;
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(faults[0]["rule"], "op=write,path=/a*,error=EIO,nth=2");
  EXPECT_EQ(faults[0]["matched"], 3);
  EXPECT_EQ(faults[0]["fired"], 1);
  EXPECT_EQ(faults[1]["rule"], "op=fsync,latency=1ms");
  EXPECT_EQ(faults[1]["matched"], 1);
  EXPECT_EQ(faults[1]["fired"], 1);
  EXPECT_EQ(to_json(fs.volume.snapshot())["faults"], faults);
}

TEST(VolumeFaults, FaultOnCreateNamesTheNewPath) {
  Fs fs("ext4");
  const uint64_t dir = fs.mkdir("db");
  ASSERT_TRUE(fs.engine.faults().add("op=create,path=/db/*.ibd,error=EDQUOT").has_value());
  EXPECT_EQ(error_of(fs.volume.create(dir, "t.ibd", S_IFREG | 0644, 0, Owner{})), Errno{EDQUOT});
  EXPECT_FALSE(exists(fs, "t.ibd", dir));
  EXPECT_TRUE(fs.volume.create(dir, "t.frm", S_IFREG | 0644, 0, Owner{}).has_value());
}

}  // namespace
}  // namespace mimicfs
