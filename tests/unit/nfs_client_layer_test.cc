// SPDX-License-Identifier: Apache-2.0
// NfsClientLayer's edge cases, on the engine a mount uses: the silly names,
// their counter, what a close during a rename or a power cut leaves behind.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using volume_fixture::Fs;
using volume_fixture::kRoot;

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

}  // namespace
}  // namespace mimicfs
