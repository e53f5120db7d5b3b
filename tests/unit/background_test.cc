// SPDX-License-Identifier: Apache-2.0
// The kernel's own threads in emulated time (FileSystem::background, run by the
// CostLayer as the clock passes each interval): the flusher writes back files
// dirty for longer than page_cache.dirty_expire_ns, and the filesystem commits
// every durability.commit_interval_ns, which makes the namespace and every file
// but its dirty pages durable. The clock moves by a latency rule on reads of
// /clock, so nothing else is synced or committed along the way.
#include <gtest/gtest.h>
#include <linux/fs.h>

#include <string>

#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using namespace volume_fixture;

constexpr uint64_t kSecond = 1'000'000'000;

struct Clocked : Fs {
  explicit Clocked(std::string_view profile) : Fs(profile) {
    clock_file = create_open("clock");
    fsync(kRoot);
    EXPECT_TRUE(engine.faults().add("op=read,path=/clock,latency=100ms"));
  }
  uint64_t now() { return engine.cost().emulated_ns(); }
  // Moves the clock to `seconds` (in steps of 100 ms, so each wake is passed by
  // an operation of its own).
  void advance_to(double seconds) {
    while (now() < static_cast<uint64_t>(seconds * kSecond)) read(clock_file, 0, 1);
  }
  BackgroundStats background() { return volume.snapshot().background; }
  uint64_t clock_file = 0;
};

TEST(Background, Ext4CommitsTheNamespaceEveryFiveSeconds) {
  Clocked fs("ext4");
  const uint64_t file = fs.create_open("created");
  ASSERT_TRUE(fs.write(file, 0, "unsynced"));
  fs.advance_to(4.9);
  EXPECT_EQ(fs.background().commits, 0u);
  EXPECT_EQ(fs.background().next_commit_ns, 5 * kSecond);
  fs.advance_to(5.0);
  EXPECT_EQ(fs.background().commits, 1u);
  EXPECT_EQ(fs.background().next_commit_ns, 10 * kSecond);
  fs.volume.crash();
  // The name was committed; the data, still in the page cache, was not.
  const uint64_t after = fs.inode_of("created");
  ASSERT_NE(after, 0u);
  EXPECT_EQ(fs.stats(after).size, 0u);
}

TEST(Background, XfsCommitsEveryThirtySeconds) {
  Clocked fs("xfs");
  fs.create_open("created");
  fs.advance_to(29.9);
  EXPECT_EQ(fs.background().commits, 0u);
  EXPECT_EQ(fs.background().flusher_runs, 5u);  // 5, 10, ... 25 s
  fs.volume.crash();
  EXPECT_EQ(fs.inode_of("created"), 0u);

  fs.create_open("again");
  fs.advance_to(30.0);
  EXPECT_EQ(fs.background().commits, 1u);
  fs.volume.crash();
  EXPECT_NE(fs.inode_of("again"), 0u);
}

TEST(Background, TheFlusherWritesBackAFileDirtyForMoreThanThirtySeconds) {
  Clocked fs("ext4");
  const uint64_t file = fs.create_open("data");
  fs.fsync(file);
  fs.advance_to(0.5);
  ASSERT_TRUE(fs.write(file, 0, std::string(8192, 'x')));  // dirtied after the wake at 0
  fs.advance_to(30.0);
  EXPECT_EQ(fs.stats(file).dirty_bytes, 8192u) << "dirty for 29.5 s";
  const uint64_t file_ns = fs.stats(file).emulated_ns;
  EXPECT_EQ(fs.stats(file).allocated_bytes, 0u) << "delayed allocation";
  fs.advance_to(35.0);  // the first wake more than 30 s after: as the kernel's
  EXPECT_EQ(fs.stats(file).dirty_bytes, 0u);
  EXPECT_EQ(fs.stats(file).allocated_bytes, 8192u);
  EXPECT_EQ(fs.stats(file).unsynced_bytes, 0u) << "the commit at the same wake";
  const BackgroundStats b = fs.background();
  EXPECT_EQ(b.files_written_back, 1u);
  EXPECT_EQ(b.bytes_written_back, 8192u);
  EXPECT_EQ(b.files_committed, 1u);
  EXPECT_EQ(fs.stats(file).emulated_ns, file_ns) << "background work charges no operation";
  fs.volume.crash();
  EXPECT_EQ(fs.read(file, 0, 8193), std::string(8192, 'x'));
}

TEST(Background, AFileKeptDirtyIsWrittenBackOnceItsFirstDirtyPageExpires) {
  // The age counts from the first dirty page since the file was clean
  // (inode->dirtied_when), so a log appended to every second still gets
  // written back and committed.
  Clocked fs("ext4");
  const uint64_t log = fs.create_open("log");
  fs.fsync(log);
  for (int second = 1; second <= 36; ++second) {
    ASSERT_TRUE(fs.append(log, "record\n"));
    fs.advance_to(second);
  }
  // Written back at 35 s (dirtied at 1 s, after the wake at 0); the record
  // appended since is dirty again.
  EXPECT_EQ(fs.background().files_written_back, 1u);
  EXPECT_EQ(fs.stats(log).dirty_bytes, 4096u);
  fs.volume.crash();
  EXPECT_EQ(fs.stats(log).size, 35u * 7);
}

TEST(Background, AJournalCommitMakesTruncatesAndPunchesOfCleanFilesDurable) {
  Clocked fs("ext4");
  const uint64_t file = fs.create_open("table");
  ASSERT_TRUE(fs.write(file, 0, std::string(64 * kKiB, 'd')));
  fs.fsync(file);
  ASSERT_TRUE(fs.punch(file, 0, 16 * kKiB));
  ASSERT_TRUE(fs.truncate(file, 32 * kKiB));
  fs.advance_to(5.0);
  fs.volume.crash();
  EXPECT_EQ(fs.stats(file).size, 32 * kKiB);
  EXPECT_EQ(fs.read(file, 0, 32 * kKiB), zeros(16 * kKiB) + std::string(16 * kKiB, 'd'));
  EXPECT_EQ(fs.stats(file).allocated_bytes, 16 * kKiB);
}

// A file synced with 8 KiB of 'o', truncated to `size` and rewritten with 8 KiB
// of 'n' without fsync (closed after when `close`); returns its inode.
uint64_t truncate_and_rewrite(Clocked& fs, uint64_t size, bool close) {
  const uint64_t file = fs.create_open("state");
  EXPECT_TRUE(fs.write(file, 0, std::string(8 * kKiB, 'o')));
  fs.fsync(file);
  EXPECT_TRUE(fs.truncate(file, size));
  EXPECT_TRUE(fs.write(file, 0, std::string(8 * kKiB, 'n')));
  if (close) fs.flush(file);
  return file;
}

TEST(Background, ACommitMakesTheTruncateOfADirtyFileDurableNotItsRewrite) {
  // The notorious zero-length file: the truncate is in the journal, the new
  // data still in the page cache, and the commit carries the one without the
  // other.
  Clocked fs("ext4");
  const uint64_t file = truncate_and_rewrite(fs, 0, /*close=*/false);
  fs.advance_to(5.0);
  EXPECT_EQ(fs.stats(file).dirty_bytes, 8 * kKiB);
  fs.volume.crash();
  EXPECT_EQ(fs.stats(file).size, 0u);
}

TEST(Background, Ext4WritesBackAtCloseAFileTruncatedToZero) {
  // auto_da_alloc: ext4_release_file writes back a file truncated to 0, so the
  // commit that carries the truncate carries the rewrite too.
  Clocked fs("ext4");
  const uint64_t file = truncate_and_rewrite(fs, 0, /*close=*/true);
  EXPECT_EQ(fs.stats(file).dirty_bytes, 0u);
  fs.advance_to(5.0);
  fs.volume.crash();
  EXPECT_EQ(fs.read(file, 0, 16 * kKiB), std::string(8 * kKiB, 'n'));
}

TEST(Background, OnlyXfsWritesBackAtCloseAFileTruncatedButNotToZero) {
  {
    // XFS_ITRUNCATED: any truncate down.
    Clocked fs("xfs");
    const uint64_t file = truncate_and_rewrite(fs, 4 * kKiB, /*close=*/true);
    fs.advance_to(30.0);
    fs.volume.crash();
    EXPECT_EQ(fs.read(file, 0, 16 * kKiB), std::string(8 * kKiB, 'n'));
  }
  {
    // ext4 marks only a truncate to 0: the commit takes the truncate's size,
    // and the dirty page keeps what the device holds.
    Clocked fs("ext4");
    const uint64_t file = truncate_and_rewrite(fs, 4 * kKiB, /*close=*/true);
    EXPECT_EQ(fs.stats(file).dirty_bytes, 8 * kKiB);
    fs.advance_to(5.0);
    fs.volume.crash();
    EXPECT_EQ(fs.read(file, 0, 16 * kKiB), std::string(4 * kKiB, 'o'));
  }
}

TEST(Background, ACommitMakesTheWrittenBackPartOfADirtyFileDurable) {
  // xfs writes back at 35 s what was dirtied at 0.5 s; an append at 36 s is
  // still dirty at the commit at 60 s, which commits the rest, at the size the
  // writeback reached.
  Clocked fs("xfs");
  const uint64_t log = fs.create_open("log");
  fs.fsync(log);
  fs.advance_to(0.5);
  ASSERT_TRUE(fs.write(log, 0, std::string(8 * kKiB, 'w')));
  fs.advance_to(36.0);
  EXPECT_EQ(fs.stats(log).dirty_bytes, 0u);
  ASSERT_TRUE(fs.append(log, "appended"));
  fs.advance_to(60.0);
  EXPECT_EQ(fs.stats(log).dirty_bytes, 4096u);
  EXPECT_EQ(fs.background().files_committed, 1u);
  fs.volume.crash();
  EXPECT_EQ(fs.read(log, 0, 16 * kKiB), std::string(8 * kKiB, 'w'));
}

TEST(Background, ADirtyPageKeepsTheContentsOfTheLastCommit) {
  // An overwrite still in the page cache: the commit takes the punch beside
  // it, and the page reads as it was durable before.
  Clocked fs("ext4");
  const uint64_t file = fs.create_open("table");
  ASSERT_TRUE(fs.write(file, 0, std::string(16 * kKiB, 'o')));
  fs.fsync(file);
  ASSERT_TRUE(fs.write(file, 0, std::string(4 * kKiB, 'n')));
  ASSERT_TRUE(fs.punch(file, 8 * kKiB, 4 * kKiB));
  fs.advance_to(5.0);
  fs.volume.crash();
  EXPECT_EQ(fs.read(file, 0, 32 * kKiB),
            std::string(8 * kKiB, 'o') + zeros(4 * kKiB) + std::string(4 * kKiB, 'o'));
  EXPECT_EQ(fs.stats(file).allocated_bytes, 12 * kKiB);
}

TEST(Background, ADirtyPageKeepsTheZerosOfACommittedTruncate) {
  // Truncated to 1 byte and extended again: the commit makes the truncate
  // durable, so the dirty page's old bytes past the first are zeros.
  Clocked fs("xfs");
  const uint64_t file = fs.create_open("table");
  ASSERT_TRUE(fs.write(file, 0, std::string(8 * kKiB, 'o')));
  fs.fsync(file);
  ASSERT_TRUE(fs.truncate(file, 1));
  ASSERT_TRUE(fs.truncate(file, 8 * kKiB));
  ASSERT_TRUE(fs.write(file, 100, std::string(100, 'n')));
  fs.advance_to(30.0);
  fs.volume.crash();
  EXPECT_EQ(fs.read(file, 0, 16 * kKiB), "o" + zeros(8 * kKiB - 1));
}

TEST(Background, BlocksAllocatedPastTheDiskSizeGoBackAtACrash) {
  // ext4 allocates the delayed blocks at close; the data is still dirty, so
  // the commit keeps the size at 0 and the blocks are not the file's after a crash.
  Clocked fs("ext4");
  const uint64_t file = fs.create_open("big");
  ASSERT_TRUE(fs.write(file, 0, std::string(kMiB, 'b')));
  fs.flush(file);
  fs.volume.release(file);
  fs.advance_to(5.0);
  fs.volume.crash();
  EXPECT_EQ(fs.stats(file).size, 0u);
  EXPECT_EQ(fs.stats(file).allocated_bytes, 0u);
}

TEST(Background, AFileSyncCarriesTheOtherFilesChangesOnAJournal) {
  // ext4's fsync commits the running transaction: another file's truncate is
  // in it, and its rewrite, still dirty, is not. btrfs's log tree logs the
  // synced file alone.
  for (const char* profile : {"ext4", "xfs", "btrfs"}) {
    SCOPED_TRACE(profile);
    Clocked fs(profile);
    const uint64_t other = fs.create_open("other");
    fs.fsync(other);  // its name, on every profile
    const uint64_t state = truncate_and_rewrite(fs, 0, /*close=*/false);
    ASSERT_TRUE(fs.write(other, 0, "synced"));
    fs.fsync(other);
    fs.volume.crash();
    EXPECT_EQ(fs.read(other, 0, 100), "synced");
    EXPECT_EQ(fs.stats(state).size, std::string(profile) == "btrfs" ? 8 * kKiB : 0u);
  }
}

TEST(Background, AnFdatasyncOfOverwritesInPlaceCommitsNoOtherFile) {
  // ext4's i_datasync_tid: overwriting written blocks changes nothing the
  // journal holds, so fdatasync flushes the data and commits no transaction;
  // an append does commit, and another file's truncate goes with it.
  for (const bool append : {false, true}) {
    SCOPED_TRACE(append ? "append" : "overwrite");
    Clocked fs("ext4");
    const uint64_t log = fs.create_open("log");
    ASSERT_TRUE(fs.write(log, 0, std::string(8 * kKiB, 'l')));
    fs.fsync(log);
    const uint64_t state = truncate_and_rewrite(fs, 0, /*close=*/false);
    ASSERT_TRUE(fs.write(log, append ? 8 * kKiB : 0, "record"));
    ASSERT_TRUE(fs.volume.fsync(log, /*datasync=*/true));
    fs.volume.crash();
    EXPECT_EQ(fs.read(log, append ? 8 * kKiB : 0, 6), "record");
    EXPECT_EQ(fs.stats(state).size, append ? 0u : 8 * kKiB);
  }
}

TEST(Background, NfsCommitsWhatTheFlusherWroteBack) {
  Clocked fs("nfs");
  const uint64_t file = fs.create_open("remote");
  fs.advance_to(0.5);
  ASSERT_TRUE(fs.write(file, 0, "over the wire"));
  fs.advance_to(34.9);
  EXPECT_EQ(fs.stats(file).dirty_bytes, 13u);
  fs.advance_to(35.0);
  EXPECT_EQ(fs.stats(file).dirty_bytes, 0u);
  fs.volume.crash();
  EXPECT_EQ(fs.read(file, 0, 100), "over the wire");
}

TEST(Background, AStatisticsResetDoesNotRestartTheSchedule) {
  Clocked fs("ext4");
  fs.advance_to(3.0);
  const uint64_t uptime = fs.now();
  fs.volume.reset_statistics();
  EXPECT_EQ(fs.background().next_commit_ns, 5 * kSecond - uptime) << "5 s of uptime";
  fs.create_open("after-reset");
  fs.advance_to(2.0);
  EXPECT_EQ(fs.background().commits, 1u);
  fs.volume.crash();
  EXPECT_NE(fs.inode_of("after-reset"), 0u);
}

TEST(Background, AVolumeWithoutPowerHasNoThreads) {
  LayerOverVolume<FaultLayer> stack("ext4");
  ASSERT_TRUE(stack.layer.create(kRoot, "pending", S_IFREG | 0644, 0, Owner{1000, 100}));
  Work work;
  stack.layer.power_off(/*freeze=*/false);
  EXPECT_FALSE(stack.layer.background(10 * kSecond, true, true, work).committed);
  stack.layer.power_on();
  EXPECT_TRUE(stack.layer.background(10 * kSecond, true, true, work).committed)
      << "the creation was still pending";
}

// ext4 (auto_da_alloc) and btrfs write a file back when it is renamed over
// another, so replacing a file by rename without fsync leaves the new contents
// once the rename is committed; xfs does not, and leaves an empty file.
// Replaces a synced "config" by a "config.tmp" written without fsync; returns
// the new file's inode.
uint64_t replace_by_rename(Clocked& fs) {
  const uint64_t target = fs.create_open("config");
  EXPECT_TRUE(fs.write(target, 0, "old"));
  fs.fsync(target);
  const uint64_t temporary = fs.create_open("config.tmp");
  EXPECT_TRUE(fs.write(temporary, 0, "new"));
  EXPECT_TRUE(fs.volume.rename(kRoot, "config.tmp", kRoot, "config", 0));
  return temporary;
}

TEST(Background, Ext4WritesBackAFileRenamedOverAnother) {
  Clocked fs("ext4");
  replace_by_rename(fs);
  fs.advance_to(5.0);
  fs.volume.crash();
  const uint64_t config = fs.inode_of("config");
  ASSERT_NE(config, 0u);
  EXPECT_EQ(fs.read(config, 0, 10), "new");
}

TEST(Background, Ext4KeepsTheDataOfARenameAnyCommitMadeDurable) {
  // The rename commits with a directory fsync, not a periodic commit: the data
  // goes with it (data=ordered).
  Clocked fs("ext4");
  const uint64_t temporary = replace_by_rename(fs);
  EXPECT_EQ(fs.stats(temporary).dirty_bytes, 0u);
  fs.fsync(kRoot);
  EXPECT_EQ(fs.background().commits, 0u);
  fs.volume.crash();
  EXPECT_EQ(fs.read(fs.inode_of("config"), 0, 10), "new");
}

TEST(Background, AnExchangeOrANoReplaceRenameWritesNothingBack) {
  Clocked fs("ext4");
  const uint64_t a = fs.create_open("a");
  const uint64_t b = fs.create_open("b");
  ASSERT_TRUE(fs.write(a, 0, "a data"));
  ASSERT_TRUE(fs.write(b, 0, "b data"));
  ASSERT_TRUE(fs.volume.rename(kRoot, "a", kRoot, "b", RENAME_EXCHANGE));
  EXPECT_EQ(error_of(fs.volume.rename(kRoot, "a", kRoot, "b", RENAME_NOREPLACE)),
            Errno{EEXIST});
  EXPECT_GT(fs.stats(a).dirty_bytes, 0u);
  EXPECT_GT(fs.stats(b).dirty_bytes, 0u);
}

TEST(Background, XfsLeavesAFileRenamedOverAnotherEmpty) {
  Clocked fs("xfs");
  replace_by_rename(fs);
  fs.advance_to(30.0);
  fs.volume.crash();
  const uint64_t config = fs.inode_of("config");
  ASSERT_NE(config, 0u);
  EXPECT_EQ(fs.read(config, 0, 10), "") << "the rename committed, the data still dirty";
}

TEST(Background, IntervalsOfZeroTurnTheThreadsOff) {
  Fs fs(with("ext4", {"page_cache.writeback_interval_ns=0", "durability.commit_interval_ns=0",
                      "cost.metadata_ns=10000000000"}));
  fs.create_open("never-committed");  // 10 s
  fs.create_open("nor-this");         // 20 s
  const BackgroundStats b = fs.volume.snapshot().background;
  EXPECT_EQ(b.flusher_runs + b.commits, 0u);
  EXPECT_EQ(b.next_flush_ns + b.next_commit_ns, 0u);
  fs.volume.crash();
  EXPECT_EQ(fs.inode_of("never-committed"), 0u);
}

}  // namespace
}  // namespace mimicfs
