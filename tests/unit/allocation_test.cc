// SPDX-License-Identifier: Apache-2.0
// Volume allocation behaviour per profile: delayed allocation, ext4's inode
// windows, xfs's speculative preallocation, the shared cursor, btrfs's
// copy-on-write bookends, extent length limits, punch, and a seeded model check.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/volume.h"
#include "engine/data/memory_data_store.h"
#include "engine/space/mkfs_geometry.h"
#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using namespace volume_fixture;

constexpr uint64_t kBlock = 4096;  // the allocation unit of ext4, xfs and btrfs

std::string profile_name(const testing::TestParamInfo<std::string>& info) { return info.param; }

// --- delayed allocation (ext4, xfs, btrfs)

class DelayedAllocation : public testing::TestWithParam<std::string> {};

// A write only reserves: no extent yet, but st_blocks and statfs already count
// it, as on the real filesystems (du sees the file at once, df the space gone).
TEST_P(DelayedAllocation, WriteReservesButAllocatesNothing) {
  Fs fs(GetParam());
  const uint64_t file = fs.create_open("file");
  const uint64_t used = fs.used_bytes();
  const uint64_t free_blocks = fs.statfs_free();
  const std::string data = pattern(3 * kBlock, 1);
  ASSERT_TRUE(fs.write(file, 0, data).has_value());

  const FileStats s = fs.stats(file);
  EXPECT_EQ(s.extents, 0u);
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.delayed_bytes, 3 * kBlock);
  EXPECT_EQ(s.holes, 0u);  // delayed blocks are not holes
  EXPECT_EQ(fs.attributes(file).blocks, 3 * kBlock / 512);
  EXPECT_EQ(fs.statfs_free(), free_blocks - 3);
  EXPECT_EQ(fs.used_bytes(), used);
  EXPECT_EQ(fs.device().reserved_bytes, 3 * kBlock);
  EXPECT_EQ(fs.read(file, 0, data.size() + 1), data);
}

// An O_SYNC/O_DSYNC write is a write and an fdatasync of its range: the
// range's delayed blocks are allocated (written back), the rest stay delayed.
TEST_P(DelayedAllocation, ODsyncWriteAllocatesItsRangeOnly) {
  Fs fs(GetParam());
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(2 * kBlock, 1)).has_value());
  ASSERT_TRUE(fs.volume.write(file, 4 * kBlock, as_bytes(pattern(kBlock, 2)), O_DSYNC));
  const FileStats s = fs.stats(file);
  EXPECT_EQ(s.allocated_bytes, kBlock);
  EXPECT_EQ(s.delayed_bytes, 2 * kBlock);
  EXPECT_EQ(s.unsynced_bytes, 2 * kBlock);
  EXPECT_EQ(s.dirty_bytes, 2 * kBlock);
}

// fdatasync of a file with nothing unsynced finds no transaction to commit, so
// it does not commit others' namespace changes either; fsync of a directory does.
TEST_P(DelayedAllocation, FdatasyncOfACleanFileCommitsNothing) {
  Fs fs(GetParam());
  const uint64_t file = fs.create_open("file");
  fs.fsync(file);
  fs.create("other");
  fs.volume.reset_statistics();
  ASSERT_TRUE(fs.volume.fsync(file, /*datasync=*/true).has_value());
  EXPECT_EQ(fs.volume.snapshot().clock.emulated_ns, 0u);
  fs.volume.crash();
  EXPECT_EQ(fs.inode_of("other"), 0u) << "the new name was not committed";
  // A new, empty file's fdatasync commits its own creation (and the journal with it).
  const uint64_t fresh = fs.create_open("fresh");
  ASSERT_TRUE(fs.volume.fsync(fresh, /*datasync=*/true).has_value());
  fs.volume.crash();
  EXPECT_NE(fs.inode_of("fresh"), 0u);
  fs.create("other");
  ASSERT_TRUE(fs.volume.fsync(kRoot, /*datasync=*/true).has_value());
  EXPECT_GT(fs.volume.snapshot().clock.emulated_ns, 0u);
  fs.volume.crash();
  EXPECT_NE(fs.inode_of("other"), 0u);
}

// fsync allocates the delayed blocks out of their reservation.
TEST_P(DelayedAllocation, FsyncAllocates) {
  Fs fs(GetParam());
  const uint64_t file = fs.create_open("file");
  const uint64_t free_blocks = fs.statfs_free();
  ASSERT_TRUE(fs.write(file, 0, pattern(3 * kBlock, 2)).has_value());
  fs.fsync(file);

  const FileStats s = fs.stats(file);
  EXPECT_EQ(s.delayed_bytes, 0u);
  EXPECT_GE(s.extents, 1u);
  EXPECT_GE(s.allocated_bytes, 3 * kBlock);  // xfs maps more past EOF
  EXPECT_EQ(fs.device().reserved_bytes, 0u);
  EXPECT_EQ(fs.used_bytes(), s.allocated_bytes);  // a first window is just the request
  EXPECT_EQ(fs.attributes(file).blocks * 512, s.allocated_bytes);
  EXPECT_EQ(fs.statfs_free(), free_blocks - fs.used_bytes() / kBlock);
  EXPECT_EQ(fs.read(file, 0, 3 * kBlock), pattern(3 * kBlock, 2));
}

// close(2) (FUSE flush) allocates, whether or not it is the last handle.
TEST_P(DelayedAllocation, FlushAllocates) {
  Fs fs(GetParam());
  const uint64_t shared = fs.create_open("shared");
  fs.open(shared);  // a second descriptor: this flush is not the last close
  ASSERT_TRUE(fs.write(shared, 0, pattern(3 * kBlock, 3)).has_value());
  fs.flush(shared);
  EXPECT_EQ(fs.stats(shared).delayed_bytes, 0u);
  EXPECT_GE(fs.stats(shared).allocated_bytes, 3 * kBlock);

  const uint64_t single = fs.create_open("single");
  ASSERT_TRUE(fs.write(single, 0, pattern(3 * kBlock, 4)).has_value());
  fs.flush(single);  // the last close
  const FileStats s = fs.stats(single);
  EXPECT_EQ(s.delayed_bytes, 0u);
  EXPECT_EQ(s.allocated_bytes, 3 * kBlock);  // anything past EOF is trimmed at last close
  EXPECT_EQ(fs.device().reserved_bytes, 0u);
}

// Writeback starts on its own once a file has writeback_bytes of delayed data.
TEST_P(DelayedAllocation, WritebackAllocatesAtTheThreshold) {
  Fs fs(with(GetParam(), {"allocation.writeback_bytes=65536"}));
  const uint64_t file = fs.create_open("file");
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(fs.append(file, pattern(8 * kKiB, 5)).has_value());
  EXPECT_EQ(fs.stats(file).delayed_bytes, 56 * kKiB);
  EXPECT_EQ(fs.stats(file).extents, 0u);
  ASSERT_TRUE(fs.append(file, pattern(8 * kKiB, 5)).has_value());  // 64 KiB delayed
  const FileStats s = fs.stats(file);
  EXPECT_EQ(s.delayed_bytes, 0u);
  EXPECT_GE(s.allocated_bytes, 64 * kKiB);
  EXPECT_EQ(fs.device().reserved_bytes, 0u);
}

// SEEK_DATA and SEEK_HOLE see delayed blocks as data: they hold written bytes.
TEST_P(DelayedAllocation, SeekTreatsDelayedBlocksAsData) {
  Fs fs(GetParam());
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.write(file, 2 * kBlock, pattern(kBlock, 6)).has_value());  // block 2
  ASSERT_TRUE(fs.write(file, 5 * kBlock, pattern(100, 7)).has_value());     // block 5, to EOF
  const uint64_t size = 5 * kBlock + 100;
  ASSERT_EQ(fs.stats(file).delayed_bytes, 2 * kBlock);
  ASSERT_EQ(fs.stats(file).extents, 0u);

  EXPECT_EQ(fs.volume.seek(file, 0, SEEK_DATA), 2 * kBlock);
  EXPECT_EQ(fs.volume.seek(file, 2 * kBlock + 7, SEEK_DATA), 2 * kBlock + 7);
  EXPECT_EQ(fs.volume.seek(file, 3 * kBlock, SEEK_DATA), 5 * kBlock);
  EXPECT_EQ(fs.volume.seek(file, 0, SEEK_HOLE), 0u);
  EXPECT_EQ(fs.volume.seek(file, 2 * kBlock, SEEK_HOLE), 3 * kBlock);
  EXPECT_EQ(fs.volume.seek(file, 5 * kBlock, SEEK_HOLE), size);  // EOF is a hole
}

// A data run made of delayed, allocated and delayed blocks is one run for SEEK_HOLE.
TEST_P(DelayedAllocation, SeekJoinsDelayedAndAllocatedBlocks) {
  Fs fs(GetParam());
  const uint64_t file = fs.create_open("file");
  // Block 1 allocated (fallocate, then written in place), blocks 0 and 2 delayed.
  ASSERT_TRUE(fs.volume.fallocate(file, 0, kBlock, kBlock).has_value());
  ASSERT_TRUE(fs.write(file, kBlock, pattern(kBlock, 8)).has_value());
  ASSERT_TRUE(fs.write(file, 0, pattern(kBlock, 9)).has_value());
  ASSERT_TRUE(fs.write(file, 2 * kBlock, pattern(kBlock, 10)).has_value());
  ASSERT_TRUE(fs.truncate(file, 5 * kBlock).has_value());
  ASSERT_EQ(fs.stats(file).delayed_bytes, 2 * kBlock);
  ASSERT_EQ(fs.stats(file).extents, 1u);

  EXPECT_EQ(fs.volume.seek(file, 0, SEEK_DATA), 0u);
  EXPECT_EQ(fs.volume.seek(file, 0, SEEK_HOLE), 3 * kBlock);
  EXPECT_EQ(fs.volume.seek(file, kBlock + 1, SEEK_HOLE), 3 * kBlock);
  EXPECT_EQ(fs.volume.seek(file, 3 * kBlock, SEEK_HOLE), 3 * kBlock);
  EXPECT_EQ(error_of(fs.volume.seek(file, 3 * kBlock, SEEK_DATA)), Errno{ENXIO});
}

// Truncate and punch drop delayed blocks and give their reservation back.
TEST_P(DelayedAllocation, TruncateAndPunchGiveTheReservationBack) {
  Fs fs(GetParam());
  const uint64_t file = fs.create_open("file");
  const uint64_t free_blocks = fs.statfs_free();
  const std::string data = pattern(4 * kBlock, 11);
  ASSERT_TRUE(fs.write(file, 0, data).has_value());
  ASSERT_EQ(fs.device().reserved_bytes, 4 * kBlock);

  ASSERT_TRUE(fs.truncate(file, kBlock + 10).has_value());  // keeps blocks 0 and 1
  EXPECT_EQ(fs.stats(file).delayed_bytes, 2 * kBlock);
  EXPECT_EQ(fs.device().reserved_bytes, 2 * kBlock);
  EXPECT_EQ(fs.statfs_free(), free_blocks - 2);

  ASSERT_TRUE(fs.punch(file, 0, kBlock).has_value());
  EXPECT_EQ(fs.stats(file).delayed_bytes, kBlock);
  EXPECT_EQ(fs.device().reserved_bytes, kBlock);
  EXPECT_EQ(fs.statfs_free(), free_blocks - 1);
  EXPECT_EQ(fs.attributes(file).blocks, kBlock / 512);
  EXPECT_EQ(fs.read(file, 0, 3 * kBlock), zeros(kBlock) + data.substr(kBlock, 10));
  EXPECT_EQ(fs.volume.seek(file, 0, SEEK_DATA), kBlock);

  fs.fsync(file);
  const FileStats s = fs.stats(file);
  EXPECT_EQ(s.delayed_bytes, 0u);
  EXPECT_EQ(fs.device().reserved_bytes, 0u);
  EXPECT_EQ(s.allocated_bytes - s.preallocated_bytes, kBlock);  // xfs maps more past EOF
  EXPECT_EQ(fs.volume.seek(file, 0, SEEK_DATA), kBlock);
}

// A write whose reservation cannot be made fails at once with ENOSPC and changes
// nothing: delayed allocation never fails later, at writeback.
TEST_P(DelayedAllocation, EnospcAtWriteTimeChangesNothing) {
  Fs fs(small(GetParam(), 64 * kKiB));  // 16 blocks
  const uint64_t file = fs.create_open("file");
  const uint64_t other = fs.create_open("other");
  const std::string data = pattern(12 * kBlock, 12);
  ASSERT_TRUE(fs.write(file, 0, data).has_value());

  EXPECT_EQ(error_of(fs.write(file, 12 * kBlock, pattern(5 * kBlock, 13))), Errno{ENOSPC});
  EXPECT_EQ(error_of(fs.write(other, 0, pattern(5 * kBlock, 14))), Errno{ENOSPC});
  EXPECT_EQ(fs.attributes(file).size, 12 * kBlock);
  EXPECT_EQ(fs.attributes(other).size, 0u);
  EXPECT_EQ(fs.stats(file).delayed_bytes, 12 * kBlock);
  EXPECT_EQ(fs.stats(other).delayed_bytes, 0u);
  EXPECT_EQ(fs.device().reserved_bytes, 12 * kBlock);
  EXPECT_EQ(fs.read(file, 0, data.size() + 1), data);

  // What fits still fits, and allocating it needs no more space than was reserved.
  ASSERT_TRUE(fs.write(other, 0, pattern(4 * kBlock, 15)).has_value());
  EXPECT_EQ(fs.statfs_free(), 0u);
  fs.fsync(file);
  fs.fsync(other);
  EXPECT_EQ(fs.device().free_bytes, 0u);
  EXPECT_EQ(fs.device().reserved_bytes, 0u);
  EXPECT_EQ(fs.read(file, 0, data.size()), data);
  EXPECT_EQ(fs.read(other, 0, 4 * kBlock), pattern(4 * kBlock, 15));
}

// Deleting a file with delayed blocks gives their reservation back.
TEST_P(DelayedAllocation, DeletingAFileGivesItsReservationBack) {
  Fs fs(GetParam());
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(3 * kBlock, 16)).has_value());
  fs.remove("file", file);
  EXPECT_EQ(fs.device().reserved_bytes, 0u);
  EXPECT_EQ(fs.used_bytes(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Profiles, DelayedAllocation, testing::Values("ext4", "xfs", "btrfs"),
                         profile_name);

// --- ext4: per-inode preallocation windows

// Appends each file 128 MiB in 32 KiB writes, each followed by fsync, taking
// turns between `files`.
void append_in_turns(Fs& fs, const std::vector<uint64_t>& files) {
  const std::string chunk = zeros(32 * kKiB);  // zeros: MemoryDataStore keeps no pages
  for (uint64_t written = 0; written < 128 * kMiB; written += chunk.size()) {
    for (uint64_t file : files) {
      ASSERT_TRUE(fs.append(file, chunk).has_value());
      fs.fsync(file);
    }
  }
}

// Two files appended in turns interleave in windows that double up to 8 MiB
// (seed 003): a couple of dozen extents each, not one per write.
TEST(Ext4InodeWindows, TwoFilesAppendedInTurnsGetFewExtents) {
  Fs fs("ext4");
  const uint64_t a = fs.create_open("a");
  const uint64_t b = fs.create_open("b");
  ASSERT_NO_FATAL_FAILURE(append_in_turns(fs, {a, b}));
  for (uint64_t file : {a, b}) {
    const FileStats s = fs.stats(file);
    EXPECT_EQ(s.size, 128 * kMiB);
    EXPECT_GE(s.extents, 20u) << "file " << file;
    EXPECT_LE(s.extents, 24u) << "file " << file;
    for (const Extent& e : fs.extents(file)) EXPECT_LE(e.length * kBlock, 8 * kMiB);
  }
}

// One file appended the same way stays contiguous: one extent, or two where it
// crosses a block group's metadata.
TEST(Ext4InodeWindows, OneFileAppendedAloneIsOneOrTwoExtents) {
  Fs fs("ext4");
  const uint64_t file = fs.create_open("file");
  ASSERT_NO_FATAL_FAILURE(append_in_turns(fs, {file}));
  const FileStats s = fs.stats(file);
  EXPECT_GE(s.extents, 1u);
  EXPECT_LE(s.extents, 2u);
}

// A streaming file holds a window of blocks not yet mapped: counted as the file's
// preallocation and as used on the device.
uint64_t stream_until_window(Fs& fs, uint64_t file) {
  for (int i = 0; i < 4 && fs.stats(file).preallocated_bytes == 0; ++i) {
    EXPECT_TRUE(fs.append(file, pattern(32 * kKiB, 17)).has_value());
    fs.fsync(file);
  }
  const FileStats s = fs.stats(file);
  EXPECT_GT(s.preallocated_bytes, 0u);
  EXPECT_EQ(s.allocated_bytes, s.size);  // the window is not mapped
  EXPECT_EQ(fs.used_bytes(), s.allocated_bytes + s.preallocated_bytes);
  return s.allocated_bytes;
}

// The last close (flush with one handle) gives the window back.
TEST(Ext4InodeWindows, LastFlushGivesTheWindowBack) {
  Fs fs("ext4");
  const uint64_t file = fs.create_open("file");
  const uint64_t allocated = stream_until_window(fs, file);
  fs.flush(file);
  EXPECT_EQ(fs.stats(file).preallocated_bytes, 0u);
  EXPECT_EQ(fs.used_bytes(), allocated);
}

// release of the last handle gives the window back; an earlier release does not.
TEST(Ext4InodeWindows, LastReleaseGivesTheWindowBack) {
  Fs fs("ext4");
  const uint64_t file = fs.create_open("file");
  fs.open(file);
  const uint64_t allocated = stream_until_window(fs, file);
  fs.volume.release(file);
  EXPECT_GT(fs.stats(file).preallocated_bytes, 0u);
  fs.volume.release(file);
  EXPECT_EQ(fs.stats(file).preallocated_bytes, 0u);
  EXPECT_EQ(fs.used_bytes(), allocated);
}

// Truncate ends the stream: the window goes back to free space.
TEST(Ext4InodeWindows, TruncateGivesTheWindowBack) {
  Fs fs("ext4");
  const uint64_t file = fs.create_open("file");
  const uint64_t allocated = stream_until_window(fs, file);
  ASSERT_TRUE(fs.truncate(file, allocated / 2).has_value());
  EXPECT_EQ(fs.stats(file).preallocated_bytes, 0u);
  EXPECT_EQ(fs.used_bytes(), allocated / 2);
}

// --- xfs: speculative preallocation past EOF

// fsync of a growing file maps blocks past EOF, up to the next power of two of
// its size (st_blocks shows them); further appends land in them without a new
// allocation.
TEST(XfsSpeculativePreallocation, FsyncOfAnAppendedFileMapsBlocksPastEof) {
  Fs fs("xfs");
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.append(file, pattern(160 * kKiB, 18)).has_value());  // 40 blocks
  fs.fsync(file);
  FileStats s = fs.stats(file);
  EXPECT_GT(s.allocated_bytes, s.size);
  EXPECT_EQ(s.preallocated_bytes, 96 * kKiB);  // to 64 blocks
  EXPECT_EQ(s.allocated_bytes, s.size + s.preallocated_bytes);
  EXPECT_EQ(s.extents, 1u);
  EXPECT_EQ(fs.attributes(file).blocks * 512, s.allocated_bytes);
  EXPECT_EQ(fs.used_bytes(), s.allocated_bytes);

  const uint64_t used = fs.used_bytes();
  ASSERT_TRUE(fs.append(file, pattern(96 * kKiB, 19)).has_value());
  fs.fsync(file);
  s = fs.stats(file);
  EXPECT_EQ(s.delayed_bytes, 0u);
  EXPECT_EQ(fs.used_bytes(), used);  // written into the preallocation
  EXPECT_EQ(s.extents, 1u);
}

// A file smaller than allocsize (64 KiB) gets no speculative preallocation.
TEST(XfsSpeculativePreallocation, SmallFileGetsNone) {
  Fs fs("xfs");
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.append(file, pattern(40 * kKiB, 20)).has_value());
  fs.fsync(file);
  EXPECT_EQ(fs.stats(file).preallocated_bytes, 0u);
  EXPECT_EQ(fs.stats(file).allocated_bytes, 40 * kKiB);
}

// The last close (flush with one handle) trims the preallocation back to the size.
TEST(XfsSpeculativePreallocation, LastFlushTrimsToTheSize) {
  Fs fs("xfs");
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.append(file, pattern(160 * kKiB, 21)).has_value());
  fs.fsync(file);
  ASSERT_GT(fs.stats(file).preallocated_bytes, 0u);
  fs.flush(file);
  const FileStats s = fs.stats(file);
  EXPECT_EQ(s.preallocated_bytes, 0u);
  EXPECT_EQ(s.allocated_bytes, 160 * kKiB);
  EXPECT_EQ(fs.attributes(file).blocks * 512, 160 * kKiB);
  EXPECT_EQ(fs.used_bytes(), 160 * kKiB);
}

// Only the release of the last handle trims; a flush with another handle open
// does not.
TEST(XfsSpeculativePreallocation, LastReleaseTrimsToTheSize) {
  Fs fs("xfs");
  const uint64_t file = fs.create_open("file");
  fs.open(file);
  ASSERT_TRUE(fs.append(file, pattern(160 * kKiB + 5, 22)).has_value());
  fs.flush(file);  // two handles: allocates, does not trim
  EXPECT_GT(fs.stats(file).preallocated_bytes, 0u);
  fs.volume.release(file);
  EXPECT_GT(fs.stats(file).preallocated_bytes, 0u);
  fs.volume.release(file);
  const FileStats s = fs.stats(file);
  EXPECT_EQ(s.preallocated_bytes, 0u);
  EXPECT_EQ(s.allocated_bytes, 41 * kBlock);  // the partial last block stays
  EXPECT_EQ(fs.used_bytes(), 41 * kBlock);
}

// A file that was fallocated past EOF keeps those blocks on close (xfs's
// PREALLOC flag): they were asked for, not speculative.
TEST(XfsSpeculativePreallocation, FallocatedFileKeepsItsBlocksOnClose) {
  Fs fs("xfs");
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(10 * kKiB, 22)).has_value());
  ASSERT_TRUE(fs.volume.fallocate(file, FALLOC_FL_KEEP_SIZE, 0, 64 * kKiB).has_value());
  fs.flush(file);
  fs.volume.release(file);
  const FileStats s = fs.stats(file);
  EXPECT_EQ(s.size, 10 * kKiB);
  EXPECT_EQ(s.allocated_bytes, 64 * kKiB);
  EXPECT_EQ(s.preallocated_bytes, 64 * kKiB - 12 * kKiB);
  EXPECT_EQ(fs.used_bytes(), 64 * kKiB);
}

// As xfs since Linux 6.12 (and IDIRTY_RELEASE before): only the first close
// trims. A file opened, appended and closed over and over keeps its
// preallocation after that, so it does not fragment one extent per close; a
// truncate makes the next close trim again.
TEST(XfsSpeculativePreallocation, OnlyTheFirstCloseTrims) {
  Fs fs("xfs");
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.append(file, pattern(160 * kKiB, 23)).has_value());
  fs.flush(file);
  fs.volume.release(file);
  ASSERT_EQ(fs.stats(file).preallocated_bytes, 0u) << "the first close trims";

  fs.open(file);
  ASSERT_TRUE(fs.append(file, pattern(40 * kKiB, 24)).has_value());
  fs.flush(file);
  fs.volume.release(file);
  EXPECT_GT(fs.stats(file).preallocated_bytes, 0u) << "later closes keep it";

  fs.open(file);
  ASSERT_TRUE(fs.truncate(file, 100 * kKiB).has_value());
  ASSERT_TRUE(fs.append(file, pattern(100 * kKiB, 25)).has_value());
  fs.flush(file);
  fs.volume.release(file);
  EXPECT_EQ(fs.stats(file).preallocated_bytes, 0u) << "a truncated file is trimmed again";
}

// Closing a descriptor opened read-only changes nothing: no allocation, no trim.
TEST(XfsSpeculativePreallocation, ReadOnlyCloseChangesNothing) {
  Fs fs("xfs");
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.append(file, pattern(160 * kKiB, 26)).has_value());
  EXPECT_TRUE(fs.volume.flush(file, /*writer=*/false).has_value());
  EXPECT_EQ(fs.stats(file).delayed_bytes, 160 * kKiB);
  fs.fsync(file);
  EXPECT_TRUE(fs.volume.flush(file, /*writer=*/false).has_value());
  EXPECT_GT(fs.stats(file).preallocated_bytes, 0u);
}

// --- the shared cursor (xfs without speculative preallocation)

Profile xfs_allocsize_4k() { return with("xfs", {"allocation.speculative_preallocation=false"}); }

// Two files appended in turns, each write made durable at once, take blocks from
// one cursor: they interleave write by write (seed 003) once the second writer
// starts after the first has allocated (writers that start together begin in
// different groups: GroupTrylock below). In a directory of their own, so in AG
// 1, whose free space after the headers is one run; AG 0 has the root inode
// chunk 6 blocks in.
TEST(SharedCursor, TwoFilesAppendedInTurnsInterleaveWriteByWrite) {
  Fs fs(xfs_allocsize_4k());
  const uint64_t dir = fs.mkdir("db");
  const uint64_t a = fs.create_open("a", dir);
  ASSERT_TRUE(fs.append(a, pattern(kBlock, 22)).has_value());
  fs.fsync(a);
  const uint64_t b = fs.create_open("b", dir);
  constexpr int kWrites = 32;
  for (int i = 0; i < kWrites; ++i) {
    for (uint64_t file : {b, a}) {
      ASSERT_TRUE(fs.append(file, pattern(kBlock, 23)).has_value());
      fs.fsync(file);
    }
  }
  const std::vector<Extent> ea = fs.extents(a);
  const std::vector<Extent> eb = fs.extents(b);
  ASSERT_EQ(ea.size(), static_cast<size_t>(kWrites + 1));
  ASSERT_EQ(eb.size(), static_cast<size_t>(kWrites));
  for (int i = 0; i < kWrites; ++i) {
    EXPECT_EQ(eb[i].physical, ea[i].physical + 1) << "write " << i;
    EXPECT_EQ(ea[i + 1].physical, eb[i].physical + 1) << "write " << i;
  }
}

// One file appended alone follows itself on the cursor: one extent.
TEST(SharedCursor, OneFileAloneStaysOneExtent) {
  Fs fs(xfs_allocsize_4k());
  const uint64_t file = fs.create_open("file", fs.mkdir("db"));
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(fs.append(file, pattern(kBlock, 24)).has_value());
    fs.fsync(file);
  }
  EXPECT_EQ(fs.stats(file).extents, 1u);
  EXPECT_EQ(fs.stats(file).allocated_bytes, 64 * kBlock);
}

// layout.json shows mkfs.xfs's structures: AG 0's headers and free list
// (blocks 0-9) and its root inode chunk (16-23). A first file larger than the
// 6 free blocks between them starts after the chunk, as on a real xfs, whose
// allocator looks for a free extent that holds the whole request (the short
// run is left to small requests: Allocator.AShortRunAtTheGoal...).
TEST(SharedCursor, LayoutShowsMkfsStructuresAndAFirstFileSkipsTheShortRun) {
  Fs fs("xfs");
  const DeviceLayout layout = fs.volume.layout();
  EXPECT_EQ(layout.allocation_group_bytes, uint64_t{256} << 30);
  ASSERT_GE(layout.metadata.size(), 2u);
  EXPECT_EQ(layout.metadata[0], (BlockRange{0, 10}));
  EXPECT_EQ(layout.metadata[1], (BlockRange{16, 8}));
  const uint64_t file = fs.create_open("t.ibd");
  ASSERT_TRUE(fs.append(file, pattern(16 * kBlock, 3)).has_value());
  fs.fsync(file);
  ASSERT_EQ(fs.extents(file).size(), 1u);
  EXPECT_EQ(fs.extents(file)[0].physical, 24u);
  const uint64_t small = fs.create_open("small");
  ASSERT_TRUE(fs.append(small, pattern(kBlock, 4)).has_value());
  fs.fsync(small);
  EXPECT_EQ(fs.extents(small)[0].physical, 40u) << "the next file follows on the AG's cursor";
}

// A new directory starts the next allocation group and its files are placed
// there, from that group's own cursor (xfs's and ext4's Orlov spreading).
TEST(SharedCursor, FilesOfANewDirectoryUseTheNextGroup) {
  Fs fs(xfs_allocsize_4k());
  constexpr uint64_t kGroupBlocks = uint64_t{256} << 30 >> 12;
  const uint64_t top = fs.create_open("top");
  const uint64_t dir = fs.mkdir("dir");
  const uint64_t inner = fs.create_open("inner", dir);
  for (uint64_t file : {top, inner}) {
    ASSERT_TRUE(fs.append(file, pattern(kBlock, 25)).has_value());
    fs.fsync(file);
  }
  const std::vector<Extent> top_extents = fs.extents(top);
  const std::vector<Extent> inner_extents = fs.extents(inner);
  ASSERT_EQ(top_extents.size(), 1u);
  ASSERT_EQ(inner_extents.size(), 1u);
  EXPECT_EQ(top_extents[0].physical, 10u);  // group 0's first free block, after its headers
  EXPECT_EQ(inner_extents[0].physical, kGroupBlocks + 10);  // group 1's
}

// --- xfs: writers that start together meet at the AGF (allocation.group_trylock)

constexpr uint64_t kXfsGroupBlocks = uint64_t{256} << 30 >> 12;  // the default capacity's AGs

uint64_t group_of(Fs& fs, uint64_t file) { return fs.extents(file).at(0).physical / kXfsGroupBlocks; }

// Files that exist before either is written, appended in turns with each write
// made durable: the second's first allocation finds the group's AGF held by the
// first's and starts in the next group; each grows there alone (one extent),
// as two O_SYNC writers on a real xfs do (docs/profiles.md, "Fidelity").
TEST(GroupTrylock, TwoWritersStartingTogetherBeginInDifferentGroups) {
  for (const Profile& profile : {builtin("xfs"), xfs_allocsize_4k()}) {
    SCOPED_TRACE(profile.name);
    Fs fs(profile);
    const uint64_t dir = fs.mkdir("db");
    const uint64_t a = fs.create_open("a", dir);
    const uint64_t b = fs.create_open("b", dir);
    for (int i = 0; i < 64; ++i) {
      for (uint64_t file : {a, b}) {
        ASSERT_TRUE(fs.append(file, pattern(8 * kBlock, 5)).has_value());
        fs.fsync(file);
      }
    }
    EXPECT_EQ(fs.extents(a).size(), 1u);
    EXPECT_EQ(fs.extents(b).size(), 1u);
    EXPECT_EQ(group_of(fs, a), 1u) << "the directory's group";
    EXPECT_EQ(group_of(fs, b), 2u);
  }
}

// Four: the third's first allocation follows the second's, which held another
// group, so it takes the directory's group and meets the first there; the
// fourth meets the third and moves on. Two pairs, each interleaving.
TEST(GroupTrylock, FourWritersStartingTogetherFormTwoPairs) {
  Fs fs(xfs_allocsize_4k());
  const uint64_t dir = fs.mkdir("db");
  std::vector<uint64_t> files;
  for (const char* name : {"a", "b", "c", "d"}) files.push_back(fs.create_open(name, dir));
  for (int i = 0; i < 16; ++i) {
    for (uint64_t file : files) {
      ASSERT_TRUE(fs.append(file, pattern(kBlock, 6)).has_value());
      fs.fsync(file);
    }
  }
  EXPECT_EQ(group_of(fs, files[0]), 1u);
  EXPECT_EQ(group_of(fs, files[1]), 2u);
  EXPECT_EQ(group_of(fs, files[2]), 1u);
  EXPECT_EQ(group_of(fs, files[3]), 2u);
  for (uint64_t file : files) EXPECT_EQ(fs.extents(file).size(), 16u);
}

// No meeting: a file created after another's first allocation (a writer that
// starts later), or after the first file was closed, follows it in its group.
// Nor on ext4, whose profile has no group_trylock.
TEST(GroupTrylock, AWriterThatStartsLaterOrAfterACloseStaysInTheGroup) {
  {
    Fs fs("xfs");
    const uint64_t dir = fs.mkdir("db");
    const uint64_t a = fs.create_open("a", dir);
    ASSERT_TRUE(fs.append(a, pattern(4 * kBlock, 7)).has_value());
    fs.fsync(a);
    const uint64_t b = fs.create_open("b", dir);
    ASSERT_TRUE(fs.append(b, pattern(4 * kBlock, 8)).has_value());
    fs.fsync(b);
    EXPECT_EQ(group_of(fs, b), group_of(fs, a));
  }
  {
    Fs fs("xfs");
    const uint64_t dir = fs.mkdir("db");
    const uint64_t a = fs.create_open("a", dir);
    const uint64_t b = fs.create_open("b", dir);
    ASSERT_TRUE(fs.append(a, pattern(4 * kBlock, 7)).has_value());
    fs.fsync(a);
    fs.flush(a);  // its last close
    ASSERT_TRUE(fs.append(b, pattern(4 * kBlock, 8)).has_value());
    fs.fsync(b);
    EXPECT_EQ(group_of(fs, b), group_of(fs, a));
  }
  {
    Fs fs(with("ext4", {"allocation.inode_window_max_bytes=0"}));
    const uint64_t a = fs.create_open("a");
    const uint64_t b = fs.create_open("b");
    for (uint64_t file : {a, b}) {
      ASSERT_TRUE(fs.append(file, pattern(4 * kBlock, 9)).has_value());
      fs.fsync(file);
    }
    EXPECT_EQ(fs.extents(b).at(0).physical, fs.extents(a).at(0).physical_end());
  }
}

// The hold ends with any other allocation (the first writer wrote again before
// the second's first write: they did not start together) and with a power cut.
// A file emptied and written again starts from its inode's group, where xfs's
// first allocation of an empty file looks, not from where it was moved to.
TEST(GroupTrylock, TheHoldEndsWithALaterAllocationOrACrash) {
  for (bool crash : {false, true}) {
    SCOPED_TRACE(crash ? "crash" : "a later allocation");
    Fs fs(xfs_allocsize_4k());
    const uint64_t dir = fs.mkdir("db");
    const uint64_t a = fs.create_open("a", dir);
    const uint64_t b = fs.create_open("b", dir);
    fs.fsync(b);  // commits both creations
    ASSERT_TRUE(fs.append(a, pattern(kBlock, 10)).has_value());
    fs.fsync(a);
    if (crash) {
      fs.volume.crash();
      fs.open(b);
    } else {
      ASSERT_TRUE(fs.append(a, pattern(kBlock, 11)).has_value());
      fs.fsync(a);
    }
    ASSERT_TRUE(fs.append(b, pattern(kBlock, 12)).has_value());
    fs.fsync(b);
    EXPECT_EQ(group_of(fs, b), 1u);
  }
}

TEST(GroupTrylock, AnEmptiedFileStartsAgainFromItsInodesGroup) {
  Fs fs(xfs_allocsize_4k());
  const uint64_t dir = fs.mkdir("db");
  const uint64_t a = fs.create_open("a", dir);
  const uint64_t b = fs.create_open("b", dir);
  for (uint64_t file : {a, b}) {
    ASSERT_TRUE(fs.append(file, pattern(kBlock, 13)).has_value());
    fs.fsync(file);
  }
  ASSERT_EQ(group_of(fs, b), 2u);
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(fs.truncate(b, 0).has_value());
    ASSERT_TRUE(fs.append(b, pattern(kBlock, 14)).has_value());
    fs.fsync(b);
    EXPECT_EQ(group_of(fs, b), 1u) << "round " << round;
  }
}

// --- btrfs: copy-on-write and bookend extents

// An overwrite moves the blocks; the old data extent stays allocated, its
// overwritten part unreferenced, until no block of it is referenced (seed 004).
TEST(BtrfsCopyOnWrite, OverwriteMovesBlocksAndKeepsTheOldExtentUntilUnreferenced) {
  Fs fs("btrfs");
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(4 * kBlock, 25)).has_value());
  fs.fsync(file);
  const std::vector<Extent> before = fs.extents(file);
  ASSERT_EQ(before.size(), 1u);
  const uint64_t old_physical = before[0].physical;
  ASSERT_EQ(fs.used_bytes(), 4 * kBlock);

  ASSERT_TRUE(fs.write(file, kBlock, pattern(kBlock, 26)).has_value());
  std::vector<Extent> after = fs.extents(file);
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(after[1].logical, 1u);
  EXPECT_NE(after[1].physical, old_physical + 1);
  EXPECT_EQ(fs.stats(file).allocated_bytes, 4 * kBlock);
  EXPECT_EQ(fs.device().unreferenced_bytes, kBlock);
  EXPECT_EQ(fs.used_bytes(), 5 * kBlock);

  ASSERT_TRUE(fs.write(file, 0, pattern(kBlock, 27)).has_value());
  ASSERT_TRUE(fs.write(file, 2 * kBlock, pattern(kBlock, 28)).has_value());
  EXPECT_EQ(fs.device().unreferenced_bytes, 3 * kBlock);
  EXPECT_EQ(fs.used_bytes(), 7 * kBlock);

  // The last referenced block of the old extent goes: all four are freed.
  ASSERT_TRUE(fs.write(file, 3 * kBlock, pattern(kBlock, 29)).has_value());
  EXPECT_EQ(fs.device().unreferenced_bytes, 0u);
  EXPECT_EQ(fs.used_bytes(), 4 * kBlock);
  for (const Extent& e : fs.extents(file)) {
    EXPECT_FALSE(e.physical < old_physical + 4 && e.physical_end() > old_physical)
        << "block " << e.logical << " still on the old extent";
  }
  EXPECT_EQ(fs.read(file, 0, 4 * kBlock),
            pattern(kBlock, 27) + pattern(kBlock, 26) + pattern(kBlock, 28) + pattern(kBlock, 29));
}

// A preallocated (unwritten) extent is written in place: nothing moves.
TEST(BtrfsCopyOnWrite, WritingAnUnwrittenExtentWritesInPlace) {
  Fs fs("btrfs");
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.volume.fallocate(file, 0, 0, 4 * kBlock).has_value());
  const std::vector<Extent> before = fs.extents(file);
  ASSERT_EQ(before.size(), 1u);
  ASSERT_TRUE(fs.write(file, kBlock, pattern(kBlock, 30)).has_value());
  const std::vector<Extent> after = fs.extents(file);
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(after[1].physical, before[0].physical + 1);
  EXPECT_FALSE(after[1].unwritten);
  EXPECT_EQ(fs.used_bytes(), 4 * kBlock);
  EXPECT_EQ(fs.device().unreferenced_bytes, 0u);
}

// Punching every other block halves the file's blocks but frees nothing on the
// device; punching the rest frees the whole extent.
TEST(BtrfsCopyOnWrite, PunchingEveryOtherBlockFreesNothingOnTheDevice) {
  Fs fs("btrfs");
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(16 * kBlock, 31)).has_value());
  fs.fsync(file);
  ASSERT_EQ(fs.used_bytes(), 16 * kBlock);
  for (uint64_t block = 0; block < 16; block += 2) {
    ASSERT_TRUE(fs.punch(file, block * kBlock, kBlock).has_value());
  }
  EXPECT_EQ(fs.stats(file).allocated_bytes, 8 * kBlock);
  EXPECT_EQ(fs.used_bytes(), 16 * kBlock);
  EXPECT_EQ(fs.device().unreferenced_bytes, 8 * kBlock);

  for (uint64_t block = 1; block < 16; block += 2) {
    ASSERT_TRUE(fs.punch(file, block * kBlock, kBlock).has_value());
  }
  EXPECT_EQ(fs.stats(file).allocated_bytes, 0u);
  EXPECT_EQ(fs.used_bytes(), 0u);
  EXPECT_EQ(fs.device().unreferenced_bytes, 0u);
}

// Deleting a file frees its blocks, the unreferenced parts of its extents too.
TEST(BtrfsCopyOnWrite, DeletingTheFileFreesEverything) {
  Fs fs("btrfs");
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(16 * kBlock, 32)).has_value());
  fs.fsync(file);
  ASSERT_TRUE(fs.write(file, 3 * kBlock, pattern(2 * kBlock, 33)).has_value());
  ASSERT_TRUE(fs.punch(file, 8 * kBlock, kBlock).has_value());
  ASSERT_TRUE(fs.write(file, 20 * kBlock, "delayed").has_value());
  ASSERT_GT(fs.device().unreferenced_bytes, 0u);
  fs.flush(file);
  fs.volume.release(file);
  fs.remove("file", file);
  const DeviceStats d = fs.device();
  EXPECT_EQ(d.allocated_bytes, d.metadata_bytes);  // mkfs's chunks stay
  EXPECT_EQ(d.unreferenced_bytes, 0u);
  EXPECT_EQ(d.reserved_bytes, 0u);
}

// On a full device an overwrite needs new blocks: ENOSPC, the old data intact.
TEST(BtrfsCopyOnWrite, OverwriteOnAFullDeviceIsEnospc) {
  Fs fs(small("btrfs", 64 * kKiB));
  const uint64_t file = fs.create_open("file");
  const std::string data = pattern(64 * kKiB, 34);
  ASSERT_TRUE(fs.write(file, 0, data).has_value());
  fs.fsync(file);
  EXPECT_EQ(error_of(fs.write(file, 10, "overwrite")), Errno{ENOSPC});
  EXPECT_EQ(fs.read(file, 0, data.size()), data);
  EXPECT_EQ(fs.device().unreferenced_bytes, 0u);
}

// --- ext4: extent length and group metadata

// An extent record holds at most 32768 blocks, an unwritten one 32767 (as
// ext4's EXT_INIT_MAX_LEN and EXT_UNWRITTEN_MAX_LEN): 256 MiB fallocated on a
// device without group metadata is three unwritten records, contiguous on the
// device; written, they become two full records.
TEST(Ext4ExtentLength, FallocateOf256MiBIsRecordsOfAtMost32768Blocks) {
  Fs fs(with("ext4", {"device.geometry=groups", "device.allocation_group_bytes=2147483648"}));
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.volume.fallocate(file, 0, 0, 256 * kMiB).has_value());
  std::vector<Extent> extents = fs.extents(file);
  ASSERT_EQ(extents.size(), 3u);
  EXPECT_EQ(extents[0].length, 32767u);
  EXPECT_EQ(extents[1].length, 32767u);
  EXPECT_EQ(extents[2].length, 2u);
  EXPECT_EQ(extents[1].physical, extents[0].physical_end());
  EXPECT_EQ(fs.stats(file).unwritten_extents, 3u);

  const std::string chunk(kMiB, 'w');
  for (uint64_t offset = 0; offset < 256 * kMiB; offset += kMiB) {
    ASSERT_TRUE(fs.write(file, offset, chunk).has_value());
  }
  extents = fs.extents(file);
  ASSERT_EQ(extents.size(), 2u);
  for (const Extent& e : extents) EXPECT_EQ(e.length, 32768u);
  const FileStats s = fs.stats(file);
  EXPECT_EQ(s.fragments, 1u);
  EXPECT_EQ(s.unwritten_extents, 0u);
  EXPECT_EQ(s.extent_size_histogram, (std::map<uint64_t, uint64_t>{{128 * kMiB, 2}}));
}

// mkfs.ext4's structures (superblock copies in groups 1, 3, 5, 7, 9, 25, ...,
// each flex group's bitmaps and inode tables, mkfs_geometry.h) are never a
// file's: a file that grows across one is split there, and nowhere else but
// at its record limit, as filefrag shows on a real ext4 (a 2 GiB file written
// to a fresh 4 GiB ext4: 7 extents, at groups 3, 5, 7, 9, the journal and 16).
TEST(Ext4ExtentLength, MkfsStructuresSplitAFileThatCrossesThem) {
  Fs fs("ext4");
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.volume.fallocate(file, 0, 0, 3 * 1024 * kMiB).has_value());
  const std::vector<Extent> extents = fs.extents(file);
  auto geometry = device_geometry(builtin("ext4"));
  ASSERT_TRUE(geometry.has_value());
  uint64_t mapped = 0;
  uint64_t first = UINT64_MAX, last = 0;
  for (const Extent& e : extents) {
    EXPECT_LE(e.length, 32767u);
    for (const BlockRange& m : geometry->metadata) {
      EXPECT_TRUE(e.physical_end() <= m.start || m.start + m.length <= e.physical)
          << "extent at " << e.logical << " covers metadata at block " << m.start;
    }
    first = std::min(first, e.physical);
    last = std::max(last, e.physical_end());
    mapped += e.length;
  }
  EXPECT_EQ(mapped, 786432u);
  uint64_t crossed = 0;
  for (const BlockRange& m : geometry->metadata) crossed += m.start > first && m.start < last;
  // Group 0's free run after its tables is shorter than one 32767-block record,
  // so the file starts in group 1, after its superblock copy (a real ext4 left
  // group 0 too: a 2 GiB file on a fresh 4 GiB one started in group 1). It then
  // crosses the copies in groups 3, 5, 7, 9, 25 and 27 and flex group 1's tables.
  EXPECT_EQ(first, 32768u + 1153u);
  EXPECT_EQ(crossed, 7u);
  EXPECT_EQ(fs.stats(file).fragments, crossed + 1);
}

// --- truncate

// A truncate to the current size still frees blocks fallocated past EOF:
// ext4_setattr calls ext4_truncate whenever the new size is <= the old one ("even
// if i_size didn't change to truncate possible preallocated blocks"). O_TRUNC of
// an empty file with KEEP_SIZE blocks is the same path.
TEST(Truncate, ToTheSameSizeFreesBlocksFallocatedPastEof) {
  Fs fs("ext4");
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(10 * kKiB, 37)).has_value());
  ASSERT_TRUE(fs.volume.fallocate(file, FALLOC_FL_KEEP_SIZE, 0, 64 * kKiB).has_value());
  fs.fsync(file);
  ASSERT_EQ(fs.stats(file).allocated_bytes, 64 * kKiB);
  ASSERT_TRUE(fs.truncate(file, 10 * kKiB).has_value());
  EXPECT_EQ(fs.stats(file).allocated_bytes, 12 * kKiB);
  EXPECT_EQ(fs.used_bytes(), 12 * kKiB);

  const uint64_t empty = fs.create_open("empty");
  ASSERT_TRUE(fs.volume.fallocate(empty, FALLOC_FL_KEEP_SIZE, 0, 64 * kKiB).has_value());
  ASSERT_TRUE(fs.volume.open(empty, O_RDWR | O_TRUNC).has_value());
  EXPECT_EQ(fs.stats(empty).allocated_bytes, 0u);
}

// --- punch

// Whole units in the range are freed; the partial ones at its edges are zeroed
// and stay allocated.
// ZERO_RANGE reserves every block of the range before it punches, so an ENOSPC
// leaves the file as it was (on btrfs the punched blocks would stay allocated as
// bookends and could not pay for the new ones).
TEST(ZeroRange, EnospcChangesNothing) {
  Fs fs(small("btrfs", 16 * kBlock));
  const uint64_t file = fs.create_open("file");
  const std::string data = pattern(12 * kBlock, 27);
  ASSERT_TRUE(fs.write(file, 0, data).has_value());
  fs.fsync(file);
  const FileStats before = fs.stats(file);
  const uint64_t used = fs.used_bytes();
  EXPECT_EQ(error_of(fs.volume.fallocate(file, FALLOC_FL_ZERO_RANGE, 0, 8 * kBlock)),
            Errno{ENOSPC});
  EXPECT_EQ(fs.read(file, 0, data.size()), data);
  EXPECT_EQ(fs.stats(file).allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(fs.used_bytes(), used);
  EXPECT_EQ(fs.device().reserved_bytes, 0u);
}

// statfs leaves group metadata out of the size, as ext4 and xfs do: a fresh
// volume reports everything free.
TEST(Statfs, GroupMetadataIsNotPartOfTheSize) {
  Fs fs("ext4");
  const FilesystemStats s = fs.volume.statfs().value();
  EXPECT_EQ(s.blocks, s.blocks_free);
  EXPECT_EQ(s.blocks * s.fragment_size + fs.device().metadata_bytes,
            fs.volume.profile().capacity_bytes);
}

TEST(Punch, FreesWholeUnitsAndZeroesPartialOnes) {
  Fs fs("nfs42");  // 512-byte units
  const uint64_t file = fs.create_open("file");
  const std::string data = pattern(4096, 35);
  ASSERT_TRUE(fs.write(file, 0, data).has_value());
  ASSERT_TRUE(fs.punch(file, 100, 1000).has_value());  // [100, 1100): only unit 1 whole
  std::string expected = data;
  std::fill(expected.begin() + 100, expected.begin() + 1100, '\0');
  EXPECT_EQ(fs.read(file, 0, 4096), expected);
  EXPECT_EQ(fs.stats(file).allocated_bytes, 7 * 512u);
  EXPECT_EQ(fs.stats(file).holes, 1u);
  EXPECT_EQ(fs.used_bytes(), 7 * 512u);
  EXPECT_EQ(fs.attributes(file).size, 4096u);
}

// Linux accepts PUNCH_HOLE only with KEEP_SIZE; alone it is EOPNOTSUPP.
TEST(Punch, WithoutKeepSizeIsEopnotsupp) {
  for (std::string_view name : {"nfs42", "ext4"}) {
    Fs fs(name);
    const uint64_t file = fs.create_open("file");
    ASSERT_TRUE(fs.write(file, 0, pattern(8192, 36)).has_value());
    EXPECT_EQ(error_of(fs.volume.fallocate(file, FALLOC_FL_PUNCH_HOLE, 0, 8192)), Errno{EOPNOTSUPP})
        << name;
    EXPECT_EQ(fs.read(file, 0, 8192), pattern(8192, 36)) << name;
  }
}

// nfs42 answers ALLOCATE and DEALLOCATE only: every other mode is EOPNOTSUPP.
TEST(Punch, ModesTheProfileLacksAreEopnotsupp) {
  Fs fs("nfs42");
  const uint64_t file = fs.create_open("file");
  for (int mode : {FALLOC_FL_KEEP_SIZE, FALLOC_FL_ZERO_RANGE,
                   FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, FALLOC_FL_COLLAPSE_RANGE}) {
    EXPECT_EQ(error_of(fs.volume.fallocate(file, mode, 0, 8192)), Errno{EOPNOTSUPP})
        << "mode " << mode;
  }
  EXPECT_EQ(fs.stats(file).allocated_bytes, 0u);
  EXPECT_TRUE(fs.volume.fallocate(file, 0, 0, 8192).has_value());
  EXPECT_TRUE(fs.punch(file, 0, 4096).has_value());
  EXPECT_EQ(fs.stats(file).allocated_bytes, 4096u);
}

// A punch is its own operation in the counters, with the bytes it asked to punch;
// a refused one counts its error there too.
TEST(Punch, IsCountedAsPunchWithItsBytes) {
  Fs fs("nfs42");
  const uint64_t file = fs.create_open("file");
  fs.volume.reset_statistics();
  ASSERT_TRUE(fs.volume.fallocate(file, 0, 0, 8192).has_value());
  ASSERT_TRUE(fs.punch(file, 0, 1000).has_value());
  ASSERT_TRUE(fs.punch(file, 4096, 512).has_value());
  EXPECT_FALSE(fs.volume.fallocate(file, FALLOC_FL_PUNCH_HOLE, 0, 4096).has_value());
  const auto ops = fs.volume.snapshot().ops;
  ASSERT_TRUE(ops.contains("punch"));
  EXPECT_EQ(ops.at("punch").count, 3u);
  EXPECT_EQ(ops.at("punch").bytes, 1512u);
  EXPECT_EQ(ops.at("punch").errors, (std::map<std::string, uint64_t>{{"EOPNOTSUPP", 1}}));
  ASSERT_TRUE(ops.contains("fallocate"));
  EXPECT_EQ(ops.at("fallocate").count, 1u);
  EXPECT_EQ(ops.at("fallocate").bytes, 0u);
}

// --- against a model

enum class Geometry : uint8_t {
  kBuiltin,  // the profile as it is
  kSmall,    // 24 units, fewer than the file's span: ENOSPC happens
  kTight,    // 96 units in groups of 16 with 2 of metadata, every length limit tiny
};

struct ModelCase {
  std::string profile;
  Geometry geometry;
};

std::string_view geometry_name(Geometry g) {
  switch (g) {
    case Geometry::kBuiltin:
      return "";
    case Geometry::kSmall:
      return "SmallDevice";
    case Geometry::kTight:
      return "TightGeometry";
  }
  return "";
}

void PrintTo(const ModelCase& c, std::ostream* os) {
  *os << c.profile << geometry_name(c.geometry);
}

std::string model_case_name(const testing::TestParamInfo<ModelCase>& info) {
  return info.param.profile + std::string(geometry_name(info.param.geometry));
}

// The profile a model case runs on; delayed profiles write back at 8 units so
// background writeback happens too.
Profile model_profile(const ModelCase& c) {
  const Profile original = builtin(c.profile);
  const uint64_t unit = original.allocation_unit;
  std::vector<std::string> overrides;
  auto set = [&](std::string_view key, uint64_t units) {
    overrides.push_back(fmt::format("{}={}", key, units * unit));
  };
  if (c.geometry != Geometry::kBuiltin) overrides.push_back("device.geometry=groups");
  if (c.geometry == Geometry::kSmall) {
    set("device.capacity_bytes", 24);
    set("device.allocation_group_bytes", 0);
    set("device.group_metadata_bytes", 0);
  } else if (c.geometry == Geometry::kTight) {
    set("device.capacity_bytes", 96);
    set("device.allocation_group_bytes", 16);
    set("device.group_metadata_bytes", 2);
    set("device.max_extent_bytes", 5);
    set("allocation.cow_extent_max_bytes", 6);
    if (original.inode_window_max_bytes > 0) set("allocation.inode_window_max_bytes", 8);
    set("allocation.speculative_preallocation_min_bytes", 2);
    set("allocation.speculative_preallocation_max_bytes", 8);
  }
  if (original.delayed_allocation) set("allocation.writeback_bytes", 8);
  return with(c.profile, overrides);
}

class AllocationModel : public testing::TestWithParam<ModelCase> {};

bool all_zero(const std::string& model, uint64_t from, uint64_t to) {
  return std::all_of(model.begin() + from, model.begin() + to, [](char c) { return c == '\0'; });
}

// "" when equal, else where the first difference is (whole files are too long
// to print).
std::string first_difference(const std::string& got, const std::string& want) {
  if (got == want) return "";
  const auto [g, w] = std::mismatch(got.begin(), got.end(), want.begin(), want.end());
  const uint64_t at = g - got.begin();
  return fmt::format("contents differ at byte {} (got {} bytes, want {}): got {:#x}, want {:#x}",
                     at, got.size(), want.size(), g == got.end() ? -1 : int{*g},
                     w == want.end() ? -1 : int{*w});
}

// Walks the file with SEEK_DATA / SEEK_HOLE: every region reported as a hole
// reads as zeros (data is never a hole), and the two agree with each other.
// Writes an NFS client's server refused at their writeback (0 on a local profile).
uint64_t deferred_write_errors(Fs& fs) {
  const StatsSnapshot stats = fs.volume.snapshot();
  return stats.client ? stats.client->deferred_write_errors : 0;
}

// A close or fsync succeeds, or an NFS client reports a write lost to ENOSPC.
bool succeeded_or_reported(Fs& fs, const Result<void>& result) {
  return result || (fs.volume.snapshot().client && result.error() == Errno{ENOSPC});
}

void expect_seek_consistent(Fs& fs, uint64_t file, const std::string& model,
                            std::mt19937_64& random) {
  const uint64_t size = model.size();
  if (size == 0) {
    ASSERT_EQ(error_of(fs.volume.seek(file, 0, SEEK_DATA)), Errno{ENXIO});
    ASSERT_EQ(error_of(fs.volume.seek(file, 0, SEEK_HOLE)), Errno{ENXIO});
    return;
  }
  uint64_t position = 0;
  while (position < size) {
    auto data = fs.volume.seek(file, position, SEEK_DATA);
    if (!data) {
      ASSERT_EQ(data.error(), Errno{ENXIO});
      ASSERT_TRUE(all_zero(model, position, size))
          << "data in [" << position << ", EOF) reported as a hole";
      break;
    }
    ASSERT_GE(*data, position);
    ASSERT_LT(*data, size);
    ASSERT_TRUE(all_zero(model, position, *data))
        << "data in [" << position << ", " << *data << ") reported as a hole";
    auto hole = fs.volume.seek(file, *data, SEEK_HOLE);
    ASSERT_TRUE(hole.has_value());
    ASSERT_GT(*hole, *data);
    ASSERT_LE(*hole, size);
    // Anywhere inside the data region: SEEK_DATA stays, SEEK_HOLE finds its end.
    const uint64_t inside = *data + random() % (*hole - *data);
    ASSERT_EQ(fs.volume.seek(file, inside, SEEK_DATA), inside);
    ASSERT_EQ(fs.volume.seek(file, inside, SEEK_HOLE), *hole);
    position = *hole;
  }
}

// Seeded writes, appends, punches, truncates, fsyncs and closes, checked after
// every step: contents against a byte model, SEEK_DATA/SEEK_HOLE against its
// zeros, st_blocks and the device's accounting against the file's, and no
// std::logic_error from the engine's own consistency checks.
TEST_P(AllocationModel, RandomOperationsKeepTheInvariants) {
  const ModelCase& c = GetParam();
  const Profile profile = model_profile(c);
  const uint64_t unit = profile.allocation_unit;
  Fs fs(profile);
  const uint64_t span = 40 * unit;
  const uint64_t file = fs.create_open("file");
  std::mt19937_64 random(20240612);  // fixed seed: the same operations every run
  auto below = [&](uint64_t n) { return random() % n; };
  std::string model;                // the file's contents; its length is the file size
  std::vector<std::string> recent;  // the last operations, for failure messages
  int enospc = 0;

  for (int step = 0; step < 1500; ++step) {
    const uint64_t offset = below(span);
    const uint64_t length = 1 + below(std::min<uint64_t>(3 * unit, span - offset));
    const uint64_t op = below(24);
    std::string done;
    if (op < 9) {  // write, or append; now and then zeros
      const bool append = op == 8 && model.size() < 2 * span;  // the file stays small
      const uint64_t at = append ? model.size() : offset;
      const bool zero = below(8) == 0;
      const std::string data = zero ? zeros(length) : pattern(length, static_cast<char>(step % 26));
      Result<size_t> written = Result<size_t>(0);
      const uint64_t lost_before = deferred_write_errors(fs);
      ASSERT_NO_THROW(written = append ? fs.append(file, data) : fs.write(file, at, data))
          << "step " << step;
      // An NFS client's write the server refused returns, and a later one
      // reports it: what reached the server is what the client did not lose.
      const bool lost = deferred_write_errors(fs) > lost_before;
      const bool landed = fs.volume.snapshot().client ? !lost : written.has_value();
      done = fmt::format("{}{} {}+{}{}{}", append ? "append" : "write", zero ? " zeros" : "", at,
                         length, written ? "" : " ENOSPC", lost ? " lost" : "");
      if (!written) {
        ASSERT_EQ(written.error(), Errno{ENOSPC}) << "step " << step;
        ++enospc;
      }
      if (landed) {
        if (model.size() < at + length) model.resize(at + length, '\0');
        model.replace(at, length, data);
      }
    } else if (op < 12) {
      Result<void> punched;
      ASSERT_NO_THROW(punched = fs.punch(file, offset, length)) << "step " << step;
      ASSERT_TRUE(punched.has_value()) << "step " << step;
      done = fmt::format("punch {}+{}", offset, length);
      if (offset < model.size()) {
        std::fill(model.begin() + offset,
                  model.begin() + std::min<uint64_t>(offset + length, model.size()), '\0');
      }
    } else if (op < 14) {
      const uint64_t size = below(span);
      Result<Attributes> truncated;
      ASSERT_NO_THROW(truncated = fs.truncate(file, size)) << "step " << step;
      ASSERT_TRUE(truncated.has_value()) << "step " << step;
      done = fmt::format("truncate {}", size);
      model.resize(size, '\0');
    } else if (op < 17) {
      Result<void> synced;
      ASSERT_NO_THROW(synced = fs.volume.fsync(file, false)) << "step " << step;
      ASSERT_TRUE(succeeded_or_reported(fs, synced)) << "step " << step;
      done = synced ? "fsync" : "fsync ENOSPC";
    } else if (op < 19) {
      Result<void> flushed;
      ASSERT_NO_THROW({
        flushed = fs.volume.flush(file, /*writer=*/true);
        fs.volume.release(file);
        fs.open(file);
      }) << "step "
         << step;
      ASSERT_TRUE(succeeded_or_reported(fs, flushed)) << "step " << step;
      done = flushed ? "close and reopen" : "close (ENOSPC) and reopen";
    } else if (op < 20) {
      Result<void> flushed;
      ASSERT_NO_THROW({
        fs.open(file);
        flushed = fs.volume.flush(file, /*writer=*/true);
        fs.volume.release(file);
      }) << "step "
         << step;
      ASSERT_TRUE(succeeded_or_reported(fs, flushed)) << "step " << step;
      done = "close a second descriptor";
    } else {  // fallocate: allocate, keep_size or zero_range, where the profile has it
      const bool keep_size = below(2) == 0;
      const bool zero_range = op >= 22;
      const int mode =
          (zero_range ? FALLOC_FL_ZERO_RANGE : 0) | (keep_size ? FALLOC_FL_KEEP_SIZE : 0);
      const FallocateMode kind = zero_range  ? FallocateMode::kZeroRange
                                 : keep_size ? FallocateMode::kKeepSize
                                             : FallocateMode::kAllocate;
      Result<void> r;
      ASSERT_NO_THROW(r = fs.volume.fallocate(file, mode, offset, length)) << "step " << step;
      done = fmt::format("fallocate {:#x} {}+{}{}", mode, offset, length,
                         r ? "" : fmt::format(" {}", errno_name(r.error().value)));
      if (!profile.supports(kind)) {
        ASSERT_EQ(r.error(), Errno{EOPNOTSUPP}) << "step " << step;
      } else if (!r) {
        ASSERT_EQ(r.error(), Errno{ENOSPC}) << "step " << step;
        ++enospc;
        // Whether a failed zero range zeroed first is not specified: take what it did.
        if (zero_range) model = fs.read(file, 0, model.size());
      } else {
        if (zero_range && offset < model.size()) {
          std::fill(model.begin() + offset,
                    model.begin() + std::min<uint64_t>(offset + length, model.size()), '\0');
        }
        if (!keep_size && model.size() < offset + length) model.resize(offset + length, '\0');
      }
    }
    recent.push_back(fmt::format("{}: {}", step, done));
    if (recent.size() > 12) recent.erase(recent.begin());
    SCOPED_TRACE(fmt::format("step {}, after: {}", step, fmt::join(recent, "; ")));

    ASSERT_EQ(fs.attributes(file).size, model.size());
    ASSERT_EQ(first_difference(fs.read(file, 0, model.size() + unit), model), "");
    expect_seek_consistent(fs, file, model, random);
    if (HasFatalFailure()) return;

    // st_blocks counts mapped and delayed blocks; every unit holding a non-zero
    // byte is written or delayed.
    const FileStats s = fs.stats(file);
    const Attributes a = fs.attributes(file);
    ASSERT_EQ(a.blocks * 512, s.allocated_bytes + s.delayed_bytes);
    ASSERT_GE(a.blocks * 512,
              s.allocated_bytes - std::min(s.allocated_bytes, s.preallocated_bytes));
    const std::vector<Extent> extents = fs.extents(file);
    const uint64_t size_units = (model.size() + unit - 1) / unit;
    std::vector<bool> written(size_units, false);
    uint64_t mapped_past_eof = 0;
    for (const Extent& e : extents) {
      for (uint64_t u = e.logical; u < e.logical_end(); ++u) {
        if (u < written.size()) written[u] = !e.unwritten;
        if (u >= size_units) ++mapped_past_eof;
      }
    }
    uint64_t data_units_not_written = 0;
    for (uint64_t u = 0; u < size_units; ++u) {
      const uint64_t end = std::min<uint64_t>((u + 1) * unit, model.size());
      if (!written[u] && !all_zero(model, u * unit, end)) ++data_units_not_written;
    }
    ASSERT_LE(data_units_not_written * unit, s.delayed_bytes);

    // The device: reserved is this file's delayed data; used is its blocks, its
    // inode window, and (btrfs) the unreferenced parts of its data extents.
    const DeviceStats d = fs.device();
    ASSERT_EQ(d.reserved_bytes, s.delayed_bytes);
    ASSERT_GE(s.preallocated_bytes, mapped_past_eof * unit);
    const uint64_t window = s.preallocated_bytes - mapped_past_eof * unit;
    ASSERT_EQ(d.allocated_bytes - d.metadata_bytes - d.unreferenced_bytes,
              s.allocated_bytes + window);
  }
  if (c.geometry == Geometry::kSmall) {
    EXPECT_GT(enospc, 0);  // the device did fill up along the way
  }

  // Deleting the file gives everything back (with background reclaim: once
  // its task is done).
  ASSERT_NO_THROW({
    ASSERT_TRUE(succeeded_or_reported(fs, fs.volume.flush(file, /*writer=*/true)));
    fs.volume.release(file);
    fs.remove("file", file);
  });
  EXPECT_EQ(fs.device().reserved_bytes, 0u);
  fs.volume.complete_all_deferred();
  const DeviceStats d = fs.device();
  EXPECT_EQ(d.allocated_bytes, d.metadata_bytes);
  EXPECT_EQ(d.reserved_bytes, 0u);
  EXPECT_EQ(d.unreferenced_bytes, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Profiles, AllocationModel,
    testing::Values(ModelCase{"ext4", Geometry::kBuiltin}, ModelCase{"xfs", Geometry::kBuiltin},
                    ModelCase{"btrfs", Geometry::kBuiltin}, ModelCase{"nfs42", Geometry::kBuiltin},
                    ModelCase{"ext4", Geometry::kSmall}, ModelCase{"xfs", Geometry::kSmall},
                    ModelCase{"btrfs", Geometry::kSmall}, ModelCase{"nfs42", Geometry::kSmall},
                    ModelCase{"ext4", Geometry::kTight}, ModelCase{"xfs", Geometry::kTight},
                    ModelCase{"btrfs", Geometry::kTight}, ModelCase{"nfs42", Geometry::kTight}),
    model_case_name);

}  // namespace
}  // namespace mimicfs
