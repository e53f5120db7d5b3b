// SPDX-License-Identifier: Apache-2.0
// NfsClientLayer's edge cases, on the engine a mount uses: the silly names,
// their counter, what a close during a rename or a power cut leaves behind.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using volume_fixture::Fs;
using volume_fixture::kRoot;
using volume_fixture::as_bytes;
using volume_fixture::error_of;

std::string silly_name(uint64_t inode, uint32_t counter) {
  return fmt::format(".nfs{:016x}{:08x}", inode, counter);
}

std::vector<std::string> names(FileSystem& fs, uint64_t dir = kRoot) {
  std::vector<std::string> out;
  const auto entries = fs.read_directory(dir);
  EXPECT_TRUE(entries.has_value());
  if (!entries) return out;
  for (const auto& entry : *entries) {
    if (entry.name != "." && entry.name != "..") out.push_back(entry.name);
  }
  return out;
}

// The RELEASE of a close(2) that has returned, reaching the daemon 50 ms late.
std::thread release_later(Fs& fs, uint64_t file) {
  return std::thread([&fs, file] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fs.volume.release(file);
  });
}

TEST(NfsClientLayer, AnOpenFileIsRenamedToTheFirstFreeSillyName) {
  Fs fs("nfs");
  const uint64_t file = fs.create_open("t1.ibd");
  // The counter's first name is taken: nfs_sillyrename tries the next one.
  fs.create(silly_name(file, 1));
  ASSERT_TRUE(fs.volume.unlink(kRoot, "t1.ibd").has_value());
  EXPECT_EQ(fs.inode_of(silly_name(file, 2)), file);
  EXPECT_EQ(fs.inode_of("t1.ibd"), 0u);

  EXPECT_EQ(volume_fixture::error_of(fs.volume.unlink(kRoot, silly_name(file, 2))).value, EBUSY);
  const StatsSnapshot stats = fs.volume.snapshot();
  ASSERT_TRUE(stats.client.has_value());
  EXPECT_EQ(stats.client->silly_renames, 1u);
  EXPECT_EQ(stats.client->silly_renamed_open, 1u);

  fs.volume.release(file);
  EXPECT_EQ(fs.inode_of(silly_name(file, 2)), 0u) << "the last close removes it";
  EXPECT_EQ(fs.volume.snapshot().client->silly_renamed_open, 0u);
}

TEST(NfsClientLayer, AFileWithAnotherLinkIsRemovedAsItIs) {
  Fs fs("nfs");
  const uint64_t file = fs.create_open("a");
  ASSERT_TRUE(fs.volume.link(file, kRoot, "b").has_value());
  fs.volume.forget(file, 1);
  ASSERT_TRUE(fs.volume.unlink(kRoot, "a").has_value());
  EXPECT_EQ(names(fs.volume), std::vector<std::string>{"b"});
  EXPECT_EQ(fs.volume.snapshot().client->silly_renames, 0u);
  fs.volume.release(file);
}

TEST(NfsClientLayer, OnlyTheLastOfSeveralHandlesRemovesTheSillyName) {
  Fs fs("nfs");
  const uint64_t file = fs.create_open("f");
  fs.open(file);
  ASSERT_TRUE(fs.volume.unlink(kRoot, "f").has_value());
  fs.volume.release(file);
  EXPECT_EQ(fs.inode_of(silly_name(file, 1)), file);
  fs.volume.release(file);
  EXPECT_TRUE(names(fs.volume).empty());
}

// close(2) returned (FLUSH) but RELEASE is late: the unlink waits for it and
// removes the file, with no silly rename.
TEST(NfsClientLayer, AnUnlinkWaitsForTheReleaseOfAFlushedFile) {
  Fs fs("nfs");
  const uint64_t file = fs.create_open("f");
  fs.flush(file);
  std::thread late_release = release_later(fs, file);
  ASSERT_TRUE(fs.volume.unlink(kRoot, "f").has_value());
  late_release.join();
  EXPECT_TRUE(names(fs.volume).empty());
  EXPECT_EQ(fs.volume.snapshot().client->silly_renames, 0u);
}

// A flushed descriptor that stays open (a dup's close): after the grace the
// file is silly-renamed all the same.
TEST(NfsClientLayer, AFlushedFileStillOpenAfterTheGraceIsRenamed) {
  Fs fs("nfs");
  const uint64_t file = fs.create_open("f");
  fs.flush(file);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(fs.volume.unlink(kRoot, "f").has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - start, NfsClientLayer::kCloseGrace);
  EXPECT_EQ(fs.inode_of(silly_name(file, 1)), file);
  fs.volume.release(file);
  EXPECT_TRUE(names(fs.volume).empty());
}

// The FLUSH was a dup's close, long ago: no close is under way any more.
TEST(NfsClientLayer, AFlushOlderThanTheGraceIsNoCloseAnyMore) {
  Fs fs("nfs");
  const uint64_t file = fs.create_open("f");
  fs.flush(file);
  std::this_thread::sleep_for(NfsClientLayer::kCloseGrace);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(fs.volume.unlink(kRoot, "f").has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  EXPECT_EQ(fs.inode_of(silly_name(file, 1)), file);
  fs.volume.release(file);
}

// A program run from the mount is opened with __FMODE_EXEC and never flushed:
// its RELEASE, late after the program's exit, is waited for all the same.
TEST(NfsClientLayer, AnExecutedFileIsWaitedForWithoutAFlush) {
  Fs fs("nfs");
  const uint64_t file = fs.create("tool");
  ASSERT_TRUE(fs.volume.open(file, O_RDONLY | 0x20).has_value());
  std::thread late_release = release_later(fs, file);
  ASSERT_TRUE(fs.volume.unlink(kRoot, "tool").has_value());
  late_release.join();
  EXPECT_TRUE(names(fs.volume).empty());
  EXPECT_EQ(fs.volume.snapshot().client->silly_renames, 0u);
  fs.volume.forget(file, 1);
}

// An rmdir right after the last close of its silly-renamed file succeeds,
// however late that close's RELEASE (nfs_rmdir waits for the silly delete).
TEST(NfsClientLayer, AnRmdirWaitsForTheSillyDeleteOfAClosedFile) {
  Fs fs("nfs");
  const uint64_t dir = fs.mkdir("db");
  const uint64_t file = fs.create_open("t1.ibd", dir);
  ASSERT_TRUE(fs.volume.unlink(dir, "t1.ibd").has_value());
  EXPECT_EQ(volume_fixture::error_of(fs.volume.rmdir(kRoot, "db")).value, ENOTEMPTY);
  fs.flush(file);  // close(2)
  std::thread late_release = release_later(fs, file);
  EXPECT_TRUE(fs.volume.rmdir(kRoot, "db").has_value());
  late_release.join();
}

TEST(NfsClientLayer, ARenameOntoAnOpenFileKeepsItUnderASillyName) {
  Fs fs("nfs");
  const uint64_t old_file = fs.create_open("db");
  ASSERT_TRUE(fs.write(old_file, 0, "old").has_value());
  const uint64_t new_file = fs.create("db.new");
  ASSERT_TRUE(fs.volume.rename(kRoot, "db.new", kRoot, "db", 0).has_value());
  EXPECT_EQ(fs.inode_of("db"), new_file);
  EXPECT_EQ(fs.inode_of(silly_name(old_file, 1)), old_file);
  EXPECT_EQ(fs.read(old_file, 0, 3), "old");
  fs.volume.release(old_file);
  EXPECT_EQ(names(fs.volume), std::vector<std::string>{"db"});
}

TEST(NfsClientLayer, APowerCutLeavesTheSillyRenamedFileBehind) {
  Fs fs("nfs");
  const uint64_t file = fs.create_open("f");
  ASSERT_TRUE(fs.write(file, 0, "data").has_value());
  fs.fsync(file);
  ASSERT_TRUE(fs.volume.unlink(kRoot, "f").has_value());
  fs.engine.crash(PowerCut{});
  fs.volume.release(file);  // the descriptor from before the cut goes
  EXPECT_EQ(fs.inode_of(silly_name(file, 1)), file) << "nobody removes it now";
  EXPECT_EQ(fs.read(file, 0, 4), "data");
  // An ordinary file now: nothing has it open.
  ASSERT_TRUE(fs.volume.unlink(kRoot, silly_name(file, 1)).has_value());
  EXPECT_TRUE(names(fs.volume).empty());
}

TEST(NfsClientLayer, LocalProfilesHaveNoClient) {
  Fs fs("ext4");
  const uint64_t file = fs.create_open("f");
  ASSERT_TRUE(fs.volume.unlink(kRoot, "f").has_value());
  EXPECT_TRUE(names(fs.volume).empty());
  EXPECT_FALSE(fs.volume.snapshot().client.has_value());
  fs.volume.release(file);
}

// Write-back errors (NfsClientLayer::write_back): a buffered write the server
// refuses returns its count, its data is lost, and the file's next writer
// close, fsync or ENOSPC-class write reports it.
TEST(NfsClientLayer, AWriteTheServerRefusesIsLostAndReportedAtTheClose) {
  Fs fs("nfs");
  const uint64_t file = fs.create_open("f");
  ASSERT_TRUE(fs.write(file, 0, "kept").has_value());
  ASSERT_TRUE(fs.engine.faults().add("op=write,error=ENOSPC").has_value());
  auto written = fs.write(file, 4, "lost");
  ASSERT_TRUE(written.has_value()) << "into the page cache";
  EXPECT_EQ(*written, 4u);
  EXPECT_EQ(fs.volume.snapshot().client->deferred_write_errors, 1u);
  EXPECT_TRUE(fs.volume.flush(file, /*writer=*/false).has_value()) << "a reader's close: nothing";
  EXPECT_EQ(error_of(fs.volume.flush(file, true)).value, ENOSPC) << "its writeback failed under it";
  EXPECT_TRUE(fs.volume.flush(file, true).has_value()) << "a close reports its own writeback only";
  EXPECT_EQ(error_of(fs.volume.fsync(file, false)).value, ENOSPC) << "not yet told to an fsync";
  EXPECT_TRUE(fs.volume.fsync(file, false).has_value()) << "once";
  fs.engine.faults().clear();
  EXPECT_EQ(fs.read(file, 0, 16), "kept");
  fs.volume.release(file);
}

TEST(NfsClientLayer, TheNextWriteReportsEnospcAndAnFsyncEio) {
  Fs fs("nfs");
  const uint64_t file = fs.create_open("f");
  ASSERT_TRUE(fs.engine.faults().add("op=write,error=ENOSPC").has_value());
  ASSERT_TRUE(fs.write(file, 0, "one").has_value());
  EXPECT_EQ(error_of(fs.write(file, 3, "two")).value, ENOSPC) << "nfs_file_write";
  EXPECT_TRUE(fs.write(file, 6, "six").has_value()) << "reported, both writebacks with it";
  EXPECT_EQ(error_of(fs.volume.fsync(file, false)).value, ENOSPC) << "the third's";
  fs.engine.faults().clear();

  ASSERT_TRUE(fs.engine.faults().add("op=write,error=EIO").has_value());
  ASSERT_TRUE(fs.write(file, 0, "one").has_value());
  EXPECT_TRUE(fs.write(file, 3, "two").has_value()) << "a write reports ENOSPC and EDQUOT only";
  EXPECT_EQ(error_of(fs.volume.fsync(file, false)).value, EIO);
  EXPECT_TRUE(fs.volume.fsync(file, false).has_value());
  fs.engine.faults().clear();
  EXPECT_EQ(fs.volume.snapshot().client->deferred_write_errors, 5u);
  EXPECT_EQ(fs.stats(file).size, 0u) << "nothing reached the server";
  fs.volume.release(file);
}

// An EIO is not a write's to report (nfs_file_write reports ENOSPC, EDQUOT
// and EFBIG): it waits for the close, whose writeback it is.
TEST(NfsClientLayer, AnEioWaitsForTheCloseThroughLaterWrites) {
  Fs fs("nfs");
  const uint64_t file = fs.create_open("f");
  ASSERT_TRUE(fs.engine.faults().add("op=write,error=EIO,nth=1").has_value());
  ASSERT_TRUE(fs.write(file, 0, "lost").has_value());
  EXPECT_TRUE(fs.write(file, 4, "kept").has_value()) << "the server took it";
  EXPECT_EQ(error_of(fs.volume.flush(file, true)).value, EIO);
  fs.volume.release(file);
}

TEST(NfsClientLayer, ASynchronousWriteFailsAtOnce) {
  Fs fs("nfs");
  const uint64_t file = fs.create_open("f");
  ASSERT_TRUE(fs.engine.faults().add("op=write,error=EIO").has_value());
  EXPECT_EQ(error_of(fs.volume.write(file, 0, as_bytes("x"), O_SYNC)).value, EIO);
  EXPECT_EQ(error_of(fs.volume.write(file, 0, as_bytes("x"), O_DIRECT)).value, EIO);
  ASSERT_TRUE(fs.write(file, 0, "buffered").has_value());
  fs.engine.faults().clear();
  // An O_DIRECT write leaves it (no fsync follows it); the next O_SYNC
  // write's fsync reports it.
  EXPECT_TRUE(fs.volume.write(file, 0, as_bytes("x"), O_DIRECT).has_value());
  EXPECT_EQ(error_of(fs.volume.write(file, 0, as_bytes("x"), O_SYNC)).value, EIO);
  EXPECT_TRUE(fs.volume.fsync(file, false).has_value());
  EXPECT_EQ(fs.volume.snapshot().client->deferred_write_errors, 1u);
  fs.volume.release(file);
}

// A full server: the write that found it full returns, its data lost, and the
// next one fails; what fit stays.
TEST(NfsClientLayer, AWritePastAFullServerIsLostAndTheNextOneFails) {
  Fs fs(volume_fixture::small("nfs", 64 << 10));
  const uint64_t file = fs.create_open("f");
  const std::string data = volume_fixture::pattern(128 << 10, 3);
  constexpr size_t kChunk = 4 << 10;
  size_t returned = 0;
  int error = 0;
  while (error == 0 && returned < data.size()) {
    auto written = fs.write(file, returned, std::string_view(data).substr(returned, kChunk));
    if (written) {
      returned += *written;
    } else {
      error = written.error().value;
    }
  }
  EXPECT_EQ(error, ENOSPC);
  const uint64_t size = fs.stats(file).size;
  EXPECT_GT(size, 0u);
  EXPECT_EQ(size + kChunk, returned) << "the last write that returned was lost";
  EXPECT_EQ(fs.read(file, 0, data.size()), data.substr(0, size));
  EXPECT_TRUE(fs.volume.flush(file, true).has_value()) << "reported already";
  fs.volume.release(file);
}

TEST(NfsClientLayer, LocalProfilesFailTheWriteAtOnce) {
  Fs fs("ext4");
  const uint64_t file = fs.create_open("f");
  ASSERT_TRUE(fs.engine.faults().add("op=write,error=ENOSPC").has_value());
  EXPECT_EQ(error_of(fs.write(file, 0, "x")).value, ENOSPC);
  fs.engine.faults().clear();
  EXPECT_TRUE(fs.volume.flush(file, true).has_value());
  fs.volume.release(file);
}

// Waits, at most 10 s, until `n` requests wait for the server.
void wait_for_waiters(Fs& fs, int n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (fs.volume.snapshot().server["waiting"] != n &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Server outages (FaultLayer::wait_for_server): a soft mount's request fails
// after the major timeout, 60 s x (2 + 1) of emulated time; a buffered write
// is lost and reported later, as any writeback error.
TEST(NfsServerOutage, ASoftMountFailsAfterTheMajorTimeout) {
  Fs fs(volume_fixture::with("nfs", {"client.timeout_mode=soft"}));
  const uint64_t file = fs.create_open("f");
  ASSERT_TRUE(fs.engine.set_server_up(false));
  const uint64_t before = fs.engine.cost().emulated_ns();
  std::byte buffer[4];
  EXPECT_EQ(error_of(fs.volume.read(file, 0, buffer)).value, EIO);
  EXPECT_GE(fs.engine.cost().emulated_ns() - before, 180'000'000'000u);
  EXPECT_EQ(error_of(fs.volume.create(kRoot, "g", S_IFREG | 0644, 0, Owner{})).value, EIO);
  ASSERT_TRUE(fs.write(file, 0, "lost").has_value()) << "into the page cache";
  ASSERT_TRUE(fs.engine.set_server_up(true));
  EXPECT_EQ(error_of(fs.volume.fsync(file, false)).value, EIO) << "its writeback timed out";
  EXPECT_EQ(fs.stats(file).size, 0u);
  const StatsSnapshot stats = fs.volume.snapshot();
  EXPECT_EQ(stats.server["outages"], 1);
  EXPECT_EQ(stats.server["major_timeouts"], 3);
  EXPECT_EQ(stats.server["retransmissions"], 6);
  fs.volume.release(file);
}

TEST(NfsServerOutage, SofterrSaysEtimedout) {
  Fs fs(volume_fixture::with("nfs", {"client.timeout_mode=softerr"}));
  const uint64_t file = fs.create_open("f");
  ASSERT_TRUE(fs.engine.set_server_up(false));
  std::byte buffer[4];
  EXPECT_EQ(error_of(fs.volume.read(file, 0, buffer)).value, ETIMEDOUT);
  ASSERT_TRUE(fs.engine.set_server_up(true));
  EXPECT_TRUE(fs.volume.read(file, 0, buffer).has_value());
  fs.volume.release(file);
}

// A hard mount's request waits for the server, however long, and is charged
// the emulated time that passed meanwhile.
TEST(NfsServerOutage, AHardMountWaitsForTheServer) {
  Fs fs("nfs");
  const uint64_t file = fs.create_open("f");
  ASSERT_TRUE(fs.write(file, 0, "data").has_value());
  ASSERT_TRUE(fs.engine.set_server_up(false));
  std::atomic<bool> done{false};
  Result<size_t> read = fail(EINVAL);
  std::thread reader([&] {
    std::byte buffer[4];
    read = fs.volume.read(file, 0, buffer);
    done = true;
  });
  wait_for_waiters(fs, 1);
  EXPECT_EQ(fs.volume.snapshot().server["waiting"], 1);
  EXPECT_FALSE(done) << "it waits";
  EXPECT_TRUE(fs.volume.flush(file, true).has_value()) << "a close does not wait";
  const uint64_t before = fs.engine.cost().emulated_ns();
  Work work;
  fs.engine.cost().advance(400'000'000'000, work);  // 400 s
  ASSERT_TRUE(fs.engine.set_server_up(true));
  reader.join();
  ASSERT_TRUE(read.has_value()) << read.error().value;
  EXPECT_EQ(*read, 4u);
  const StatsSnapshot stats = fs.volume.snapshot();
  EXPECT_EQ(stats.server["waiting"], 0);
  EXPECT_EQ(stats.server["major_timeouts"], 2) << "400 s: two cycles of 180 s";
  EXPECT_EQ(stats.server["retransmissions"], 4);
  const uint64_t passed = fs.engine.cost().emulated_ns() - before;
  EXPECT_GE(passed, 400'000'000'000u);
  EXPECT_LT(passed, 401'000'000'000u) << "the outage is not charged twice";
  fs.volume.release(file);
}

// The RPC layer never waits longer than 600 s for one try (NFS_MAX_TCP_TIMEOUT).
TEST(NfsServerOutage, TheMajorTimeoutStopsAtTenMinutes) {
  Fs fs(volume_fixture::with("nfs", {"client.timeout_mode=soft", "client.retrans=20"}));
  ASSERT_TRUE(fs.engine.set_server_up(false));
  const uint64_t before = fs.engine.cost().emulated_ns();
  EXPECT_EQ(error_of(fs.volume.mkdir(kRoot, "d", 0755, Owner{})).value, EIO);
  EXPECT_EQ(fs.engine.cost().emulated_ns() - before, 600'000'000'000u);
}

// A request that waited through an outage in which the volume lost its power
// ends as one sent before the cut.
TEST(NfsServerOutage, APowerCutDuringTheWaitEndsTheRequest) {
  Fs fs("nfs");
  ASSERT_TRUE(fs.engine.set_server_up(false));
  Result<Attributes> made = fail(EINVAL);
  std::thread maker([&] { made = fs.volume.mkdir(kRoot, "d", 0755, Owner{}); });
  wait_for_waiters(fs, 1);
  fs.volume.crash();
  ASSERT_TRUE(fs.engine.set_server_up(true));
  maker.join();
  EXPECT_EQ(error_of(made).value, EIO);
  EXPECT_EQ(fs.inode_of("d"), 0u);
}

// A LOCK goes to the server: it waits through a hard outage and fails with
// EIO on a soft mount; a lock client.local_lock keeps needs no server.
TEST(NfsServerOutage, ALockWaitsForTheServerOrTimesOut) {
  Fs fs("nfs");
  NfsClientLayer& client = *fs.engine.nfs_client(fs.volume);
  const uint64_t file = fs.create_open("f");
  RecordLock lock;
  lock.owner.id = 1;
  ASSERT_TRUE(fs.engine.set_server_up(false));
  std::atomic<bool> done{false};
  Result<void> taken = fail(EINVAL);
  std::thread locker([&] {
    Work work;
    taken = client.set_lock(file, lock, NfsClientLayer::LockKind::kPosix, nullptr, work);
    done = true;
  });
  wait_for_waiters(fs, 1);
  EXPECT_FALSE(done) << "it waits";
  ASSERT_TRUE(fs.engine.set_server_up(true));
  locker.join();
  EXPECT_TRUE(taken.has_value());
  fs.volume.release(file);

  Fs soft(volume_fixture::with("nfs", {"client.timeout_mode=soft"}));
  NfsClientLayer& soft_client = *soft.engine.nfs_client(soft.volume);
  const uint64_t soft_file = soft.create_open("f");
  ASSERT_TRUE(soft.engine.set_server_up(false));
  Work work;
  EXPECT_EQ(error_of(soft_client.set_lock(soft_file, lock, NfsClientLayer::LockKind::kPosix,
                                          nullptr, work)).value,
            EIO);
  EXPECT_EQ(error_of(soft_client.test_lock(soft_file, lock, work)).value, EIO);

  Fs local(volume_fixture::with("nfs", {"client.local_lock=all"}));
  NfsClientLayer& local_client = *local.engine.nfs_client(local.volume);
  const uint64_t local_file = local.create_open("f");
  ASSERT_TRUE(local.engine.set_server_up(false));
  EXPECT_TRUE(local_client.set_lock(local_file, lock, NfsClientLayer::LockKind::kPosix, nullptr,
                                    work).has_value())
      << "kept on the client";
  ASSERT_TRUE(local.engine.set_server_up(true));
  local.volume.release(local_file);
  ASSERT_TRUE(soft.engine.set_server_up(true));
  soft.volume.release(soft_file);
}

TEST(NfsServerOutage, ALocalProfileHasNoServer) {
  Fs fs("ext4");
  EXPECT_FALSE(fs.engine.set_server_up(false));
  EXPECT_TRUE(fs.volume.snapshot().server.empty());
}

// Until a lock request waits, within 10 s.
void wait_for_a_lock_waiter(const NfsClientLayer& client) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (client.lock_waiters() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A server restart (FaultLayer::server_restart): nfs4_delay's retries, 100 ms
// doubling to 15 s, until the first one past the grace period's end.
TEST(NfsServerRestart, GraceRetriesFollowNfs4Delay) {
  EXPECT_EQ(FaultLayer::grace_retry_ns(0), 0u);
  EXPECT_EQ(FaultLayer::grace_retry_ns(1), 100'000'000u);
  EXPECT_EQ(FaultLayer::grace_retry_ns(10'000'000'000), 12'700'000'000u);
  // 0.1 + 0.2 + ... + 12.8 = 25.5 s, then 15 s each: 100.5 s passes 90 s.
  EXPECT_EQ(FaultLayer::grace_retry_ns(90'000'000'000), 100'500'000'000u);
}

// In the grace period an OPEN, a REMOVE and a RENAME are refused and retried
// (nfsd4_open, nfsd4_remove, nfsd4_rename); a read or a mkdir is not.
TEST(NfsServerRestart, OpensWaitOutTheGracePeriod) {
  Fs fs("nfs");
  const uint64_t file = fs.create_open("f");
  ASSERT_TRUE(fs.engine.restart_server(10'000'000'000));  // --grace 10s
  std::byte buffer[4];
  uint64_t before = fs.engine.cost().emulated_ns();
  ASSERT_TRUE(fs.volume.read(file, 0, buffer).has_value());
  ASSERT_TRUE(fs.volume.mkdir(kRoot, "d", 0755, Owner{}).has_value());
  EXPECT_LT(fs.engine.cost().emulated_ns() - before, 1'000'000'000u) << "not held";
  before = fs.engine.cost().emulated_ns();
  ASSERT_TRUE(fs.volume.open(file, O_RDWR).has_value());
  const uint64_t open_ns = fs.engine.cost().emulated_ns() - before;
  EXPECT_GE(open_ns, 12'700'000'000u) << "retried until past the grace";
  EXPECT_LT(open_ns, 12'800'000'000u);
  before = fs.engine.cost().emulated_ns();
  ASSERT_TRUE(fs.volume.rmdir(kRoot, "d").has_value());
  EXPECT_LT(fs.engine.cost().emulated_ns() - before, 1'000'000'000u) << "the grace is over";
  const StatsSnapshot stats = fs.volume.snapshot();
  EXPECT_EQ(stats.server["restarts"], 1);
  EXPECT_EQ(stats.server["grace_waits"], 1);
  EXPECT_EQ(stats.server["in_grace"], false);
  fs.volume.release(file);
  fs.volume.release(file);
}

// A fault rule restarts the server before its operation (crashtest
// --event server-restart), which then meets the grace period.
TEST(NfsServerRestart, ARuleRestartsTheServer) {
  Fs fs("nfs");
  const uint64_t file = fs.create("f");
  ASSERT_TRUE(fs.engine.faults().add("op=open,nth=1,server=restart"));
  const uint64_t before = fs.engine.cost().emulated_ns();
  ASSERT_TRUE(fs.volume.open(file, O_RDWR).has_value());
  EXPECT_GE(fs.engine.cost().emulated_ns() - before, FaultLayer::grace_retry_ns(90'000'000'000));
  EXPECT_EQ(fs.volume.snapshot().server["restarts"], 1);
  ASSERT_TRUE(fs.volume.open(file, O_RDWR).has_value());
  EXPECT_EQ(fs.volume.snapshot().server["restarts"], 1) << "once";
  fs.volume.release(file);
  fs.volume.release(file);
  FaultInjector check;
  EXPECT_FALSE(check.add("op=open,server=reboot"));
  EXPECT_FALSE(check.add("op=open,server=restart,error=EIO"));
}

// Two clients: A holds a lock when the server restarts; B asks for it.
struct RestartedLocks {
  explicit RestartedLocks(std::vector<std::string> keys = {})
      : fs(volume_fixture::with("nfs", std::move(keys))),
        a(*fs.engine.nfs_client(fs.volume)),
        b_fs(fs.engine.add_client("/b")),
        b(*fs.engine.nfs_client(b_fs)) {
    file = fs.create_open("db");
    EXPECT_TRUE(b_fs.open(file, O_RDWR).has_value());
    lock.owner.id = 1;
    lock.handle = 7;
    Work work;
    EXPECT_TRUE(a.set_lock(file, lock, NfsClientLayer::LockKind::kPosix, nullptr, work));
  }
  ~RestartedLocks() {
    fs.volume.release(file);
    b_fs.release(file);
  }
  Result<void> b_locks(uint64_t* waited_ns = nullptr) {
    RecordLock other = lock;
    other.owner.id = 2;
    other.handle = 8;
    Work work;
    const uint64_t before = fs.engine.cost().emulated_ns();
    auto result = b.set_lock(file, other, NfsClientLayer::LockKind::kPosix, nullptr, work);
    if (waited_ns != nullptr) *waited_ns = fs.engine.cost().emulated_ns() - before;
    return result;
  }
  Fs fs;
  NfsClientLayer& a;
  FileSystem& b_fs;
  NfsClientLayer& b;
  uint64_t file = 0;
  RecordLock lock;
};

// A client renews its lease within two thirds of it (60 s): inside the
// default grace period (90 s), so it reclaims its lock, and B, whose LOCK
// waited out the grace, is refused.
TEST(NfsServerRestart, ALockReclaimedInTheGracePeriodStays) {
  RestartedLocks locks;
  ASSERT_TRUE(locks.fs.engine.restart_server(std::nullopt));
  uint64_t waited = 0;
  EXPECT_EQ(error_of(locks.b_locks(&waited)).value, EAGAIN);
  EXPECT_EQ(waited, FaultLayer::grace_retry_ns(90'000'000'000)) << "retried through the grace";
  EXPECT_FALSE(locks.a.lock_lost(locks.file, 7));
  EXPECT_EQ(locks.a.client_stats().lost_locks, 0u);
}

// A grace period shorter than the renewal: A, silent, learns of the restart
// too late. Its lock is lost and B takes it; A's reads and writes through it
// fail until A unlocks.
TEST(NfsServerRestart, ALockNotReclaimedInTimeIsLost) {
  RestartedLocks locks;
  ASSERT_TRUE(locks.fs.engine.restart_server(10'000'000'000));
  EXPECT_TRUE(locks.b_locks().has_value()) << "A's lock went at the grace's end";
  EXPECT_TRUE(locks.a.lock_lost(locks.file, 7));
  EXPECT_FALSE(locks.a.lock_lost(locks.file, 9)) << "another open file of A";
  EXPECT_EQ(locks.a.client_stats().lost_locks, 1u);
  EXPECT_EQ(locks.b.client_stats().lost_locks, 0u);

  FileSystem& a = locks.fs.volume;
  EXPECT_EQ(error_of(a.write(locks.file, 0, as_bytes("sync"), O_RDWR | O_SYNC | kLockLost)).value,
            EIO);
  auto written = a.write(locks.file, 0, as_bytes("lost"), O_RDWR | kLockLost);
  ASSERT_TRUE(written.has_value()) << "into the page cache";
  EXPECT_EQ(*written, 4u);
  EXPECT_EQ(error_of(a.fsync(locks.file, false)).value, EIO) << "its writeback failed";
  std::byte buffer[4];
  EXPECT_EQ(locks.fs.volume.read(locks.file, 0, buffer).value_or(99), 0u) << "never sent";

  RecordLock unlock = locks.lock;
  unlock.type = LockType::kUnlock;
  Work work;
  ASSERT_TRUE(locks.a.set_lock(locks.file, unlock, NfsClientLayer::LockKind::kPosix, nullptr, work));
  EXPECT_FALSE(locks.a.lock_lost(locks.file, 7)) << "given back";
}

// A learns of the restart through its own read, after the grace: that read
// is already refused (nfs4_set_rw_stateid), with nobody else settling first.
TEST(NfsServerRestart, TheFirstReadAfterALateLearningFails) {
  RestartedLocks locks;
  ASSERT_TRUE(locks.fs.engine.restart_server(10'000'000'000));
  Work work;
  locks.fs.engine.cost().advance(20'000'000'000, work);  // time passes, nothing settles it
  EXPECT_TRUE(locks.a.lock_lost(locks.file, 7));
}

// A statistics reset sets the emulated clock back; the grace period keeps
// its length.
TEST(NfsServerRestart, AResetDoesNotStretchTheGracePeriod) {
  RestartedLocks locks;
  Work work;
  locks.fs.engine.cost().advance(500'000'000'000, work);
  ASSERT_TRUE(locks.fs.engine.restart_server(10'000'000'000));
  locks.fs.volume.reset_statistics();
  const uint64_t before = locks.fs.engine.cost().emulated_ns();
  ASSERT_TRUE(locks.fs.volume.open(locks.file, O_RDWR).has_value());
  EXPECT_LT(locks.fs.engine.cost().emulated_ns() - before, 13'000'000'000u);
  locks.fs.volume.release(locks.file);
}

// The lost lock's state goes once its owner has unlocked all of it.
TEST(NfsServerRestart, APartialUnlockLeavesTheRestLost) {
  RestartedLocks locks;
  ASSERT_TRUE(locks.fs.engine.restart_server(0));
  ASSERT_TRUE(locks.b_locks().has_value());
  ASSERT_TRUE(locks.a.lock_lost(locks.file, 7));
  RecordLock unlock = locks.lock;
  unlock.type = LockType::kUnlock;
  unlock.end = 49;
  Work work;
  ASSERT_TRUE(locks.a.set_lock(locks.file, unlock, NfsClientLayer::LockKind::kPosix, nullptr, work));
  EXPECT_TRUE(locks.a.lock_lost(locks.file, 7)) << "50 to the end is still lost";
  unlock.start = 50;
  unlock.end = RecordLock::kToEnd;
  ASSERT_TRUE(locks.a.set_lock(locks.file, unlock, NfsClientLayer::LockKind::kPosix, nullptr, work));
  EXPECT_FALSE(locks.a.lock_lost(locks.file, 7));
}

// B waited for A's lock before the restart; A never reclaims it, and once
// the grace period is over B's wait ends with the lock (it polls: nfs4_retry_setlk).
TEST(NfsServerRestart, AWaiterFromBeforeTheRestartGetsTheLostLock) {
  RestartedLocks locks;
  RecordLock other = locks.lock;
  other.owner.id = 2;
  other.handle = 8;
  LockWait wait;
  Result<void> taken = fail(EINVAL);
  std::thread waiter([&] {
    Work work;
    taken = locks.b.set_lock(locks.file, other, NfsClientLayer::LockKind::kPosix, &wait, work);
  });
  wait_for_a_lock_waiter(locks.b);
  ASSERT_TRUE(locks.fs.engine.restart_server(10'000'000'000));
  Work work;
  locks.fs.engine.cost().advance(20'000'000'000, work);  // its poll settles it
  waiter.join();
  EXPECT_TRUE(wait.waited);
  EXPECT_TRUE(taken.has_value());
  EXPECT_TRUE(locks.a.lock_lost(locks.file, 7));
}

// A request of A's in the grace period tells it of the restart in time.
TEST(NfsServerRestart, ARequestInTheGracePeriodReclaims) {
  RestartedLocks locks;
  ASSERT_TRUE(locks.fs.engine.restart_server(10'000'000'000));
  ASSERT_TRUE(locks.fs.volume.getattr(locks.file).has_value());
  EXPECT_EQ(error_of(locks.b_locks()).value, EAGAIN);
  EXPECT_FALSE(locks.a.lock_lost(locks.file, 7));
}

// nfs.recover_lost_locks: the lock is asked for again after the grace, and
// kept when nobody holds it.
TEST(NfsServerRestart, RecoverLostLocksAsksAgain) {
  RestartedLocks locks({"client.recover_lost_locks=true"});
  ASSERT_TRUE(locks.fs.engine.restart_server(0));
  EXPECT_EQ(error_of(locks.b_locks()).value, EAGAIN);
  EXPECT_FALSE(locks.a.lock_lost(locks.file, 7));
}

// A power cut of everything after a restart: nothing is left to reclaim.
TEST(NfsServerRestart, APowerCutEndsTheRecovery) {
  RestartedLocks locks;
  ASSERT_TRUE(locks.fs.engine.restart_server(0));
  locks.fs.volume.crash();
  EXPECT_TRUE(locks.b_locks().has_value());
  EXPECT_EQ(locks.a.client_stats().lost_locks, 0u);
}

TEST(NfsServerRestart, ALocalProfileHasNoServer) {
  Fs fs("ext4");
  EXPECT_FALSE(fs.engine.restart_server(std::nullopt));
}

// One client's crash (Engine::crash_client): B's machine goes down and
// reboots; A and the server go on.
struct CrashedClient {
  CrashedClient()
      : fs("nfs"), b_fs(fs.engine.add_client("/b")), b(*fs.engine.nfs_client(b_fs)) {}
  std::string read_on_a(uint64_t file, size_t length) { return fs.read(file, 0, length); }
  Fs fs;
  FileSystem& b_fs;
  NfsClientLayer& b;
};

// What B wrote since the file's last sync never reached the server; what it
// synced (fsync, a close) did. A's own unsynced file is not touched.
TEST(NfsClientCrash, LosesWhatItHadNotWrittenBack) {
  CrashedClient c;
  const uint64_t synced = c.fs.create("synced");
  const uint64_t closed = c.fs.create("closed");
  const uint64_t mine = c.fs.create_open("mine");
  ASSERT_TRUE(c.fs.write(mine, 0, "A's").has_value());
  for (const uint64_t file : {synced, closed}) {
    ASSERT_TRUE(c.b_fs.open(file, O_RDWR).has_value());
    ASSERT_TRUE(c.b_fs.write(file, 0, as_bytes("kept"), O_RDWR).has_value());
  }
  ASSERT_TRUE(c.b_fs.fsync(synced, false).has_value());
  ASSERT_TRUE(c.b_fs.write(synced, 4, as_bytes("+lost"), O_RDWR).has_value());
  ASSERT_TRUE(c.b_fs.flush(closed, true).has_value());
  const uint64_t boot = c.b_fs.crashes();
  ASSERT_TRUE(c.fs.engine.crash_client(c.b_fs, false, 0));
  EXPECT_EQ(c.b_fs.crashes(), boot + 1) << "B's descriptors are from before its crash";
  EXPECT_EQ(c.fs.volume.crashes(), 0u) << "A's are not";
  c.fs.open(synced);
  EXPECT_EQ(c.read_on_a(synced, 16), "kept");
  c.fs.open(closed);
  EXPECT_EQ(c.read_on_a(closed, 16), "kept");
  EXPECT_EQ(c.read_on_a(mine, 16), "A's");
  EXPECT_EQ(c.b.client_stats().crashes, 1u);
  for (const uint64_t file : {synced, closed, mine}) c.fs.volume.release(file);
}

// A file A also wrote since its last sync keeps B's writes too: which
// pages were whose is not known (docs/nfs.md).
TEST(NfsClientCrash, AFileAnotherClientWroteKeepsItsData) {
  CrashedClient c;
  const uint64_t file = c.fs.create_open("shared");
  ASSERT_TRUE(c.fs.write(file, 0, "aaaa").has_value());
  ASSERT_TRUE(c.b_fs.open(file, O_RDWR).has_value());
  ASSERT_TRUE(c.b_fs.write(file, 4, as_bytes("bbbb"), O_RDWR).has_value());
  ASSERT_TRUE(c.fs.engine.crash_client(c.b_fs, false, 0));
  EXPECT_EQ(c.read_on_a(file, 16), "aaaabbbb");
  c.fs.volume.release(file);
}

// B's locks stay on the server until its lease expires, or until its next
// boot's first request.
TEST(NfsClientCrash, ItsLocksStayUntilItsLeaseExpires) {
  CrashedClient c;
  NfsClientLayer& a = *c.fs.engine.nfs_client(c.fs.volume);
  const uint64_t file = c.fs.create_open("db");
  ASSERT_TRUE(c.b_fs.open(file, O_RDWR).has_value());
  RecordLock lock;
  lock.owner.id = 1;
  Work work;
  ASSERT_TRUE(c.b.set_lock(file, lock, NfsClientLayer::LockKind::kPosix, nullptr, work));
  ASSERT_TRUE(c.fs.engine.crash_client(c.b_fs, true, 0));
  EXPECT_EQ(error_of(a.set_lock(file, lock, NfsClientLayer::LockKind::kPosix, nullptr, work)).value,
            EAGAIN);
  std::byte buffer[4];
  EXPECT_EQ(error_of(c.b_fs.read(file, 0, buffer, O_RDWR)).value, EIO) << "held down";
  c.fs.engine.advance(89'000'000'000, work);
  EXPECT_EQ(error_of(a.set_lock(file, lock, NfsClientLayer::LockKind::kPosix, nullptr, work)).value,
            EAGAIN);
  c.fs.engine.advance(1'000'000'000, work);  // the 90 s lease
  EXPECT_TRUE(a.set_lock(file, lock, NfsClientLayer::LockKind::kPosix, nullptr, work));
  EXPECT_TRUE(c.fs.engine.restart_client(c.b_fs));
  EXPECT_FALSE(c.fs.engine.restart_client(c.b_fs)) << "up already";
  EXPECT_TRUE(c.b_fs.read(file, 0, buffer, O_RDWR).has_value());
  c.fs.volume.release(file);
  c.b_fs.release(file);
}

// A client back at once mounts with a new verifier: its old locks go then;
// one held down gives them back when it comes back.
TEST(NfsClientCrash, ItsOldLocksGoWhenItComesBack) {
  CrashedClient c;
  NfsClientLayer& a = *c.fs.engine.nfs_client(c.fs.volume);
  const uint64_t file = c.fs.create_open("db");
  RecordLock lock;
  lock.owner.id = 1;
  Work work;
  ASSERT_TRUE(c.b.set_lock(file, lock, NfsClientLayer::LockKind::kPosix, nullptr, work));
  ASSERT_TRUE(c.fs.engine.crash_client(c.b_fs, false, 0));
  EXPECT_TRUE(a.set_lock(file, lock, NfsClientLayer::LockKind::kPosix, nullptr, work));
  RecordLock unlock = lock;
  unlock.type = LockType::kUnlock;
  ASSERT_TRUE(a.set_lock(file, unlock, NfsClientLayer::LockKind::kPosix, nullptr, work));

  ASSERT_TRUE(c.b.set_lock(file, lock, NfsClientLayer::LockKind::kPosix, nullptr, work));
  ASSERT_TRUE(c.fs.engine.crash_client(c.b_fs, true, 0));
  EXPECT_EQ(error_of(a.set_lock(file, lock, NfsClientLayer::LockKind::kPosix, nullptr, work)).value,
            EAGAIN);
  ASSERT_TRUE(c.fs.engine.restart_client(c.b_fs));
  EXPECT_TRUE(a.set_lock(file, lock, NfsClientLayer::LockKind::kPosix, nullptr, work));
  c.fs.volume.release(file);
}

// A lock request waiting when the power goes ends with EIO and holds nothing.
TEST(NfsClientCrash, AWaitingLockEndsAtACrash) {
  CrashedClient c;
  NfsClientLayer& a = *c.fs.engine.nfs_client(c.fs.volume);
  const uint64_t file = c.fs.create_open("db");
  RecordLock lock;
  lock.owner.id = 1;
  Work work;
  ASSERT_TRUE(a.set_lock(file, lock, NfsClientLayer::LockKind::kPosix, nullptr, work));
  RecordLock other = lock;
  other.owner.id = 2;
  LockWait wait;
  Result<void> taken = fail(EINVAL);
  std::thread waiter([&] {
    Work own;
    taken = c.b.set_lock(file, other, NfsClientLayer::LockKind::kPosix, &wait, own);
  });
  wait_for_a_lock_waiter(c.b);
  ASSERT_TRUE(c.fs.engine.crash_client(c.b_fs, false, 0));
  waiter.join();
  EXPECT_EQ(error_of(taken).value, EIO);
  RecordLock unlock = lock;
  unlock.type = LockType::kUnlock;
  ASSERT_TRUE(a.set_lock(file, unlock, NfsClientLayer::LockKind::kPosix, nullptr, work));
  EXPECT_TRUE(a.set_lock(file, lock, NfsClientLayer::LockKind::kPosix, nullptr, work))
      << "B holds nothing";
  c.fs.volume.release(file);
}

TEST(NfsClientCrash, ALocalProfileHasNoClient) {
  Fs fs("ext4");
  EXPECT_FALSE(fs.engine.crash_client(fs.volume, false, 0));
}

// Two clients of one server (NfsClients): B has a file open that A removes.
// The server forgets it at once; every request B sends for it gets ESTALE, a
// buffered write is lost and reported at the close, an O_SYNC one at once.
TEST(NfsClients, AFileRemovedByAnotherClientIsStaleWhereItIsOpen) {
  Fs fs("nfs");
  FileSystem& a = fs.volume;
  FileSystem& b = fs.engine.add_client("/b");
  const uint64_t file = fs.create("f");
  ASSERT_TRUE(fs.write(file, 0, "data").has_value());
  ASSERT_TRUE(b.open(file, O_RDWR).has_value());
  ASSERT_TRUE(a.unlink(kRoot, "f").has_value()) << "not open on A: removed, not renamed";
  EXPECT_TRUE(names(a).empty());

  std::byte buffer[4];
  EXPECT_EQ(error_of(b.read(file, 0, buffer, O_RDWR)).value, ESTALE);
  EXPECT_EQ(error_of(b.getattr(file)).value, ESTALE);
  auto written = b.write(file, 0, as_bytes("lost"), O_RDWR);
  ASSERT_TRUE(written.has_value()) << "into the page cache";
  EXPECT_EQ(*written, 4u);
  EXPECT_TRUE(b.flush(file, /*writer=*/false).has_value()) << "a reader's close: nothing";
  EXPECT_EQ(error_of(b.flush(file, /*writer=*/true)).value, ESTALE) << "a writer's close reports it";
  EXPECT_TRUE(b.flush(file, true).has_value()) << "once";
  EXPECT_EQ(error_of(b.write(file, 0, as_bytes("sync"), O_RDWR | O_SYNC)).value, ESTALE);
  EXPECT_TRUE(b.fsync(file, false).has_value()) << "nothing to write back";
  ASSERT_TRUE(b.write(file, 0, as_bytes("lost"), O_RDWR).has_value());
  EXPECT_EQ(error_of(b.fsync(file, false)).value, ESTALE) << "a lost write";
  b.release(file);

  const StatsSnapshot stats = a.snapshot();
  ASSERT_EQ(stats.clients.size(), 2u);
  EXPECT_EQ(stats.clients[1].mount, "/b");
  EXPECT_EQ(stats.clients[1].stale_handles, 6u);  // read, getattr, 2 writes, O_SYNC write, fsync
  EXPECT_EQ(stats.clients[0].stale_handles, 0u);
  EXPECT_EQ(stats.open.handles, 0u);
  EXPECT_EQ(stats.open.unlinked_files, 0u) << "freed at B's close";
  fs.engine.remove_client(b);
  EXPECT_EQ(a.snapshot().clients.size(), 1u);
}

// A silly rename is one client's own: to another client the `.nfs` file is an
// ordinary one, which it may remove (nfs_sillyrename protects the renaming
// client's dentry only); the renaming client's handle is stale then.
TEST(NfsClients, AnotherClientMayRemoveASillyRenamedFile) {
  Fs fs("nfs");
  FileSystem& a = fs.volume;
  FileSystem& b = fs.engine.add_client("/b");
  const uint64_t file = fs.create("f");
  ASSERT_TRUE(b.open(file, O_RDWR).has_value());
  ASSERT_TRUE(b.unlink(kRoot, "f").has_value());
  EXPECT_EQ(names(a), std::vector<std::string>{silly_name(file, 1)});
  EXPECT_EQ(error_of(b.unlink(kRoot, silly_name(file, 1))).value, EBUSY);
  ASSERT_TRUE(a.unlink(kRoot, silly_name(file, 1)).has_value());
  EXPECT_TRUE(names(b).empty());
  EXPECT_EQ(error_of(b.getattr(file)).value, ESTALE);
  b.release(file);  // its REMOVE finds no name: nothing else goes
  EXPECT_TRUE(names(a).empty());
  EXPECT_EQ(a.snapshot().open.handles, 0u);
}

// Close-to-open: an open after another client changed the data drops the
// pages cached; after this client's own change it keeps them.
TEST(NfsClients, AnOpenAfterAnotherClientsWriteDropsTheCachedPages) {
  Fs fs("nfs");
  FileSystem& a = fs.volume;
  FileSystem& b = fs.engine.add_client("/b");
  const uint64_t file = fs.create("f");
  auto open_on = [file](FileSystem& client) {
    Work work;
    EXPECT_TRUE(client.open(file, O_RDWR, work).has_value());
    client.release(file);
    return work.drop_cached_pages;
  };
  EXPECT_FALSE(open_on(b));
  ASSERT_TRUE(a.write(file, 0, as_bytes("new"), O_RDWR).has_value());
  EXPECT_TRUE(open_on(b)) << "A wrote since";
  EXPECT_FALSE(open_on(b)) << "once";
  EXPECT_FALSE(open_on(a)) << "its own write";
  AttributeChanges truncate;
  truncate.size = 1;
  ASSERT_TRUE(b.setattr(file, truncate).has_value());
  EXPECT_TRUE(open_on(a)) << "B truncated it";
}

// A power cut reboots every client: none removes its silly-renamed files.
TEST(NfsClients, APowerCutRebootsEveryClient) {
  Fs fs("nfs");
  FileSystem& b = fs.engine.add_client("/b");
  const uint64_t file = fs.create("f");
  ASSERT_TRUE(fs.volume.fsync(file, false).has_value());
  ASSERT_TRUE(b.open(file, O_RDWR).has_value());
  ASSERT_TRUE(b.unlink(kRoot, "f").has_value());
  fs.engine.crash(PowerCut{});
  b.release(file);
  EXPECT_EQ(fs.inode_of(silly_name(file, 1)), file) << "nobody removes it now";
}

// Lets `ns` of idle time pass on the emulated clock (`ctl time advance`).
void pass(Fs& fs, uint64_t ns) {
  Work work;
  fs.engine.cost().advance(ns, work);
}

constexpr uint64_t kSecond = 1'000'000'000;

uint64_t size_on(FileSystem& client, uint64_t inode) {
  auto attributes = client.getattr(inode);
  EXPECT_TRUE(attributes.has_value());
  return attributes ? attributes->size : ~uint64_t{0};
}

// nfs_attribute_cache_expired: B answers stat with what it had from the
// server until acregmin (3 s) has passed since; then it asks again.
TEST(NfsClients, AnotherClientsChangeShowsWhenTheAttributeCacheExpires) {
  Fs fs("nfs");
  FileSystem& a = fs.volume;
  FileSystem& b = fs.engine.add_client("/b");
  const uint64_t file = fs.create("f");
  EXPECT_EQ(size_on(b, file), 0u);
  ASSERT_TRUE(a.write(file, 0, as_bytes("grown"), O_RDWR).has_value());
  EXPECT_EQ(size_on(a, file), 5u) << "the writer sees its own write";
  EXPECT_EQ(size_on(b, file), 0u) << "B's cache is younger than acregmin";
  pass(fs, 2 * kSecond);
  EXPECT_EQ(size_on(b, file), 0u) << "2 s";
  pass(fs, kSecond);
  EXPECT_EQ(size_on(b, file), 5u) << "3 s: B asked the server";
  EXPECT_EQ(a.snapshot().clients.at(1).stale_attributes, 2u);
  EXPECT_EQ(a.snapshot().clients.at(0).stale_attributes, 0u);
}

// nfs_update_inode: attributes found unchanged double attrtimeo, up to
// acregmax; a change brings it back to acregmin.
TEST(NfsClients, TheAttributeCacheTimeDoublesWhileTheFileStaysTheSame) {
  Fs fs("nfs");
  FileSystem& a = fs.volume;
  FileSystem& b = fs.engine.add_client("/b");
  const uint64_t file = fs.create("f");
  // B revalidates at 0, 3, 9 and 21 s: attrtimeo 3, 6, 12, then 24 s.
  EXPECT_EQ(size_on(b, file), 0u);
  for (const uint64_t wait : {3, 6, 12}) {
    pass(fs, wait * kSecond);
    EXPECT_EQ(size_on(b, file), 0u);
  }
  ASSERT_TRUE(a.write(file, 0, as_bytes("x"), O_RDWR).has_value());
  pass(fs, 23 * kSecond);
  EXPECT_EQ(size_on(b, file), 0u) << "23 s of a 24 s attrtimeo";
  pass(fs, kSecond);
  EXPECT_EQ(size_on(b, file), 1u);
  ASSERT_TRUE(a.write(file, 1, as_bytes("y"), O_RDWR).has_value());
  pass(fs, 3 * kSecond);
  EXPECT_EQ(size_on(b, file), 2u) << "changed: back to acregmin";
}

// A directory's attributes: acdirmin (30 s); a name another client adds
// changes its mtime.
TEST(NfsClients, ADirectoryIsCachedForAcdirmin) {
  Fs fs("nfs");
  FileSystem& b = fs.engine.add_client("/b");
  auto mtime_on = [](FileSystem& client) { return client.getattr(kRoot)->mtime.tv_sec; };
  const auto before = mtime_on(b);
  fs.clock.set({1'700'000'100, 0});
  fs.create("new");
  EXPECT_EQ(mtime_on(fs.volume), 1'700'000'100);
  pass(fs, 29 * kSecond);
  EXPECT_EQ(mtime_on(b), before);
  pass(fs, kSecond);
  EXPECT_EQ(mtime_on(b), 1'700'000'100);
}

// A revalidation that finds new data drops B's pages (NFS_INO_INVALID_DATA);
// one that finds the same data, or B's own change, keeps them.
TEST(NfsClients, ARevalidationThatFindsNewDataDropsThePages) {
  Fs fs("nfs");
  FileSystem& a = fs.volume;
  FileSystem& b = fs.engine.add_client("/b");
  const uint64_t file = fs.create("f");
  auto revalidate = [&] {
    Work work;
    EXPECT_TRUE(b.getattr(file, work).has_value());
    return work.drop_cached_pages;
  };
  EXPECT_FALSE(revalidate());
  fs.clock.set({1'700'000'100, 0});
  ASSERT_TRUE(a.write(file, 0, as_bytes("v1"), O_RDWR).has_value());
  EXPECT_FALSE(revalidate()) << "cached: B does not know yet";
  pass(fs, 3 * kSecond);
  EXPECT_TRUE(revalidate()) << "new size and mtime";
  pass(fs, 6 * kSecond);
  EXPECT_FALSE(revalidate()) << "unchanged";
  fs.clock.set({1'700'000'150, 0});
  ASSERT_TRUE(b.write(file, 0, as_bytes("v2"), O_RDWR).has_value());
  pass(fs, 12 * kSecond);
  EXPECT_FALSE(revalidate()) << "B's own write";
  // A's change, then B's own before B revalidated: B's pages may hold
  // neither (Linux sees the pre-change attributes differ from its cache).
  fs.clock.set({1'700'000'160, 0});
  ASSERT_TRUE(a.write(file, 0, as_bytes("v3"), O_RDWR).has_value());
  ASSERT_TRUE(b.write(file, 1, as_bytes("4"), O_RDWR).has_value());
  EXPECT_TRUE(revalidate()) << "A's write before B's";
  Work lookup;
  fs.clock.set({1'700'000'200, 0});
  ASSERT_TRUE(a.write(file, 0, as_bytes("v5"), O_RDWR).has_value());
  pass(fs, 3 * kSecond);
  ASSERT_TRUE(b.lookup(kRoot, "f", lookup).has_value());
  EXPECT_TRUE(lookup.drop_cached_pages) << "a lookup revalidates too";
}

// Close-to-open: an open brings the server's attributes, cached or not.
TEST(NfsClients, AnOpenRevalidatesTheAttributes) {
  Fs fs("nfs");
  FileSystem& b = fs.engine.add_client("/b");
  const uint64_t file = fs.create("f");
  EXPECT_EQ(size_on(b, file), 0u);
  ASSERT_TRUE(fs.write(file, 0, "data").has_value());
  EXPECT_EQ(size_on(b, file), 0u);
  ASSERT_TRUE(b.open(file, O_RDONLY).has_value());
  EXPECT_EQ(size_on(b, file), 4u);
  b.release(file);
}

// noac, and a client alone: every stat asks the server.
TEST(NfsClients, NoacAndASingleClientCacheNothing) {
  Fs noac(volume_fixture::with("nfs", {"client.noac=true"}));
  FileSystem& b = noac.engine.add_client("/b");
  const uint64_t file = noac.create("f");
  EXPECT_EQ(size_on(b, file), 0u);
  ASSERT_TRUE(noac.write(file, 0, "data").has_value());
  EXPECT_EQ(size_on(b, file), 4u);

}

// A directory another client removed is stale where the kernel still has it
// (a working directory): every request with its handle gets ESTALE, until the
// kernel forgets it. A removed file B never opened likewise.
TEST(NfsClients, ADirectoryRemovedByAnotherClientIsStaleThere) {
  Fs fs("nfs");
  FileSystem& a = fs.volume;
  FileSystem& b = fs.engine.add_client("/b");
  auto dir = b.mkdir(kRoot, "d", 0755, {});
  ASSERT_TRUE(dir.has_value());
  const uint64_t file = fs.create("f");
  const uint64_t moved = fs.create("m");
  ASSERT_TRUE(b.lookup(kRoot, "f").has_value());
  ASSERT_TRUE(a.rmdir(kRoot, "d").has_value());
  ASSERT_TRUE(a.unlink(kRoot, "f").has_value());

  EXPECT_EQ(error_of(b.lookup(dir->inode, "x")).value, ESTALE);
  EXPECT_EQ(error_of(b.create(dir->inode, "x", S_IFREG | 0644, 0, {}, false)).value, ESTALE);
  EXPECT_EQ(error_of(b.read_directory(dir->inode)).value, ESTALE);
  EXPECT_EQ(error_of(b.rename(kRoot, "m", dir->inode, "m", 0)).value, ESTALE);
  EXPECT_EQ(fs.inode_of("m"), moved) << "not moved into the removed directory";
  EXPECT_TRUE(b.getattr(file).has_value()) << "B's attribute cache";
  pass(fs, 3 * kSecond);
  EXPECT_EQ(error_of(b.getattr(file)).value, ESTALE);
  EXPECT_EQ(error_of(a.lookup(dir->inode, "x")).value, ENOENT) << "A's kernel knows it is dead";
  EXPECT_EQ(error_of(a.create(dir->inode, "x", S_IFREG | 0644, 0, {}, false)).value, ENOENT);
  EXPECT_EQ(a.snapshot().clients.at(1).stale_handles, 5u);
  b.forget(dir->inode, 1);
  EXPECT_EQ(error_of(b.lookup(dir->inode, "x")).value, ENOENT) << "forgotten";
}

// Only what the server removed is stale: not a file that kept another name,
// nor one that a silly-renamed name's removal leaves linked elsewhere.
TEST(NfsClients, AFileWithAnotherNameIsNotStaleElsewhere) {
  Fs fs("nfs");
  FileSystem& a = fs.volume;
  FileSystem& b = fs.engine.add_client("/b");
  const uint64_t file = fs.create("f");
  ASSERT_TRUE(a.link(file, kRoot, "f2").has_value());
  ASSERT_TRUE(b.lookup(kRoot, "f").has_value());
  ASSERT_TRUE(a.unlink(kRoot, "f").has_value());
  pass(fs, 3 * kSecond);
  EXPECT_TRUE(b.getattr(file).has_value());

  const uint64_t held = fs.create("h");
  ASSERT_TRUE(b.lookup(kRoot, "h").has_value());
  ASSERT_TRUE(a.open(held, O_RDONLY).has_value());
  ASSERT_TRUE(a.unlink(kRoot, "h").has_value());  // silly-renamed on A
  ASSERT_TRUE(a.link(held, kRoot, "h2").has_value());
  a.release(held);  // A removes the .nfs name: the file keeps h2
  pass(fs, 3 * kSecond);
  EXPECT_TRUE(b.getattr(held).has_value());
  EXPECT_EQ(fs.inode_of("h2"), held);
}

// A client alone caches nothing: what it changed while alone shows to it
// when another client mounts again (NfsClients::add forgets the caches).
TEST(NfsClients, AClientSeesItsOwnChangesAcrossAnotherClientsMountAndUnmount) {
  Fs fs("nfs");
  FileSystem& a = fs.volume;
  FileSystem& b = fs.engine.add_client("/b");
  const uint64_t file = fs.create("f");
  EXPECT_EQ(size_on(a, file), 0u);
  ASSERT_TRUE(b.write(file, 0, as_bytes("b"), O_RDWR).has_value());
  EXPECT_EQ(size_on(a, file), 0u) << "B's write, within acregmin";
  fs.engine.remove_client(b);
  ASSERT_TRUE(a.write(file, 0, as_bytes("alone"), O_RDWR).has_value());
  FileSystem& c = fs.engine.add_client("/c");
  EXPECT_EQ(size_on(a, file), 5u) << "A's own write";
  EXPECT_EQ(size_on(c, file), 5u);
}

TEST(NfsClients, LocalProfilesHaveNone) {
  Fs fs("ext4");
  EXPECT_FALSE(fs.engine.has_clients());
  EXPECT_TRUE(fs.volume.snapshot().clients.empty());
}

}  // namespace
}  // namespace mimicfs
