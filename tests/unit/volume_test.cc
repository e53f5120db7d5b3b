// SPDX-License-Identifier: Apache-2.0
#include "engine/core/volume.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/data/memory_data_store.h"
#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using namespace volume_fixture;

bool same_time(timespec a, timespec b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }

// --- namespace basics

TEST(Volume, CreateLookupGetattr) {
  Fs fs("nfs");
  auto created = fs.volume.create(kRoot, "file", S_IFREG | 0640, 0, Owner{1000, 100});
  ASSERT_TRUE(created.has_value());
  EXPECT_GE(created->inode, FileSystem::kFirstFileInode);
  EXPECT_EQ(created->mode, S_IFREG | 0640u);
  EXPECT_EQ(created->nlink, 1u);
  EXPECT_EQ(created->uid, 1000u);
  EXPECT_EQ(created->gid, 100u);
  EXPECT_EQ(created->size, 0u);
  EXPECT_EQ(created->blocks, 0u);
  EXPECT_EQ(created->block_size, 1 * kMiB);
  EXPECT_TRUE(same_time(created->mtime, fs.clock.now()));

  auto looked_up = fs.volume.lookup(kRoot, "file");
  ASSERT_TRUE(looked_up.has_value());
  EXPECT_EQ(looked_up->inode, created->inode);
  EXPECT_EQ(looked_up->mode, created->mode);

  auto attributes = fs.volume.getattr(created->inode);
  ASSERT_TRUE(attributes.has_value());
  EXPECT_EQ(attributes->inode, created->inode);
  EXPECT_EQ(attributes->mode, S_IFREG | 0640u);
}

TEST(Volume, CreateWithoutTypeMakesARegularFile) {
  Fs fs("nfs");
  auto created = fs.volume.create(kRoot, "plain", 0600, 0, Owner{});
  ASSERT_TRUE(created.has_value());
  EXPECT_TRUE(S_ISREG(created->mode));
}

TEST(Volume, RootIsADirectoryWithTwoLinks) {
  Fs fs("nfs");
  const Attributes root = fs.attributes(kRoot);
  EXPECT_TRUE(S_ISDIR(root.mode));
  EXPECT_EQ(root.nlink, 2u);
  auto dot_dot = fs.volume.lookup(kRoot, "..");
  ASSERT_TRUE(dot_dot.has_value());
  EXPECT_EQ(dot_dot->inode, kRoot);
}

TEST(Volume, LookupOfMissingNameIsEnoent) {
  Fs fs("nfs");
  EXPECT_EQ(error_of(fs.volume.lookup(kRoot, "missing")), Errno{ENOENT});
  EXPECT_EQ(error_of(fs.volume.getattr(999'999)), Errno{ENOENT});
}

TEST(Volume, CreatingAnExistingNameIsEexist) {
  Fs fs("nfs");
  fs.create("file");
  EXPECT_EQ(error_of(fs.volume.create(kRoot, "file", S_IFREG | 0644, 0, Owner{})), Errno{EEXIST});
  EXPECT_EQ(error_of(fs.volume.mkdir(kRoot, "file", 0755, Owner{})), Errno{EEXIST});
}

TEST(Volume, NameLongerThanNameMaxIsEnametoolong) {
  Fs fs("nfs");
  const std::string long_name(256, 'n');
  EXPECT_EQ(error_of(fs.volume.create(kRoot, long_name, S_IFREG | 0644, 0, Owner{})),
            Errno{ENAMETOOLONG});
  EXPECT_EQ(error_of(fs.volume.lookup(kRoot, long_name)), Errno{ENAMETOOLONG});
  fs.create(std::string(255, 'n'));
}

TEST(Volume, CreateInsideAFileIsEnotdir) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  EXPECT_EQ(error_of(fs.volume.create(file, "x", S_IFREG | 0644, 0, Owner{})), Errno{ENOTDIR});
}

TEST(Volume, ReadDirectoryListsDotsThenNamesInOrder) {
  Fs fs("nfs");
  const uint64_t b = fs.create("b");
  const uint64_t a = fs.mkdir("a");
  auto entries = fs.volume.read_directory(kRoot);
  ASSERT_TRUE(entries.has_value());
  ASSERT_EQ(entries->size(), 4u);
  EXPECT_EQ((*entries)[0].name, ".");
  EXPECT_EQ((*entries)[1].name, "..");
  EXPECT_EQ((*entries)[2].name, "a");
  EXPECT_EQ((*entries)[2].inode, a);
  EXPECT_EQ((*entries)[2].type, static_cast<uint32_t>(S_IFDIR));
  EXPECT_EQ((*entries)[3].name, "b");
  EXPECT_EQ((*entries)[3].inode, b);
  EXPECT_EQ((*entries)[3].type, static_cast<uint32_t>(S_IFREG));
}

TEST(Volume, TimestampsComeFromTheWallClock) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  const timespec later{1'800'000'000, 456};
  fs.clock.set(later);
  ASSERT_TRUE(fs.write(file, 0, "x").has_value());
  const Attributes a = fs.attributes(file);
  EXPECT_TRUE(same_time(a.mtime, later));
  EXPECT_TRUE(same_time(a.ctime, later));
  EXPECT_TRUE(same_time(a.atime, timespec{1'700'000'000, 123}));
}

TEST(Volume, SetattrChangesModeOwnerAndTimes) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  AttributeChanges changes;
  changes.mode = S_IFDIR | 0600;  // type bits are ignored
  changes.uid = 7;
  changes.gid = 8;
  changes.atime = timespec{5, 6};
  changes.mtime = timespec{0, UTIME_NOW};
  fs.clock.set({1'800'000'000, 0});
  auto a = fs.volume.setattr(file, changes);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->mode, S_IFREG | 0600u);
  EXPECT_EQ(a->uid, 7u);
  EXPECT_EQ(a->gid, 8u);
  EXPECT_TRUE(same_time(a->atime, timespec{5, 6}));
  EXPECT_TRUE(same_time(a->mtime, timespec{1'800'000'000, 0}));
}

// --- read and write

TEST(Volume, WriteThenReadBack) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  auto written = fs.write(file, 0, "hello, world");
  ASSERT_TRUE(written.has_value());
  EXPECT_EQ(*written, 12u);
  EXPECT_EQ(fs.attributes(file).size, 12u);
  EXPECT_EQ(fs.read(file, 0, 100), "hello, world");  // short at EOF
  EXPECT_EQ(fs.read(file, 7, 5), "world");
  EXPECT_EQ(fs.read(file, 12, 10), "");  // at EOF
  EXPECT_EQ(fs.read(file, 50, 10), "");  // past EOF
  ASSERT_TRUE(fs.write(file, 7, "there").has_value());
  EXPECT_EQ(fs.read(file, 0, 100), "hello, there");
}

TEST(Volume, LargeUnalignedWriteReadsBack) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  const std::string data = pattern(3 * 4096 + 777, 3);
  ASSERT_TRUE(fs.write(file, 1000, data).has_value());
  EXPECT_EQ(fs.read(file, 1000, data.size()), data);
  EXPECT_EQ(fs.read(file, 0, 1000), zeros(1000));
}

TEST(Volume, HolesReadAsZeros) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 1 * kMiB, "end").has_value());
  EXPECT_EQ(fs.attributes(file).size, 1 * kMiB + 3);
  EXPECT_EQ(fs.read(file, 0, 1 * kMiB), zeros(1 * kMiB));
  EXPECT_EQ(fs.read(file, 1 * kMiB - 2, 5), std::string("\0\0end", 5));
  EXPECT_EQ(fs.stats(file).allocated_bytes, 512u);
  EXPECT_EQ(fs.stats(file).holes, 1u);
}

TEST(Volume, ReadOrWriteOfDirectoryIsEisdir) {
  Fs fs("nfs");
  std::vector<std::byte> buffer(10);
  EXPECT_EQ(error_of(fs.volume.read(kRoot, 0, buffer)), Errno{EISDIR});
  EXPECT_EQ(error_of(fs.write(kRoot, 0, "x")), Errno{EISDIR});
}

TEST(Volume, EmptyWriteAllocatesNothing) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  auto written = fs.write(file, 4096, "");
  ASSERT_TRUE(written.has_value());
  EXPECT_EQ(*written, 0u);
  EXPECT_EQ(fs.attributes(file).size, 0u);
  EXPECT_EQ(fs.stats(file).allocated_bytes, 0u);
}

TEST(Volume, AppendWritesAtEndOfFile) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, "abc").has_value());
  ASSERT_TRUE(fs.write(file, 0, "def", /*append=*/true).has_value());
  ASSERT_TRUE(fs.write(file, 1, "gh", /*append=*/true).has_value());
  EXPECT_EQ(fs.read(file, 0, 100), "abcdefgh");
  EXPECT_EQ(fs.attributes(file).size, 8u);
}

TEST(Volume, OpenWithTruncEmptiesTheFileAndFreesItsBlocks) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(5000, 18)).has_value());
  ASSERT_TRUE(fs.volume.open(file, O_RDWR).has_value());  // no O_TRUNC: untouched
  EXPECT_EQ(fs.attributes(file).size, 5000u);

  const timespec later{1'800'000'000, 0};
  fs.clock.set(later);
  ASSERT_TRUE(fs.volume.open(file, O_WRONLY | O_TRUNC).has_value());
  const Attributes a = fs.attributes(file);
  EXPECT_EQ(a.size, 0u);
  EXPECT_EQ(a.blocks, 0u);
  EXPECT_TRUE(same_time(a.mtime, later));
  EXPECT_EQ(fs.device_allocated(), 0u);
  // Growing it again shows zeros, not the old contents.
  ASSERT_TRUE(fs.truncate(file, 100).has_value());
  EXPECT_EQ(fs.read(file, 0, 100), zeros(100));
}

TEST(Volume, OpenDirectoryForWritingIsEisdir) {
  Fs fs("nfs");
  EXPECT_TRUE(fs.volume.open(kRoot, O_RDONLY | O_DIRECTORY).has_value());
  EXPECT_EQ(error_of(fs.volume.open(kRoot, O_WRONLY)), Errno{EISDIR});
  EXPECT_EQ(error_of(fs.volume.open(999'999, O_RDONLY)), Errno{ENOENT});
}

// --- allocation by writes

TEST(Volume, OneByteWriteAllocatesOneUnit) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, "x").has_value());
  EXPECT_EQ(fs.stats(file).allocated_bytes, 512u);
  EXPECT_EQ(fs.stats(file).extents, 1u);
  EXPECT_EQ(fs.attributes(file).blocks, 1u);
  EXPECT_EQ(fs.device_allocated(), 512u);
  // Another byte in the same unit allocates nothing more.
  ASSERT_TRUE(fs.write(file, 511, "y").has_value());
  EXPECT_EQ(fs.stats(file).allocated_bytes, 512u);
}

TEST(Volume, WriteAllocatesEveryUnitItTouches) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 511, "xy").has_value());  // straddles units 0 and 1
  EXPECT_EQ(fs.stats(file).allocated_bytes, 1024u);
  EXPECT_EQ(fs.attributes(file).blocks, 2u);
  ASSERT_TRUE(fs.write(file, 1024 + 100, std::string(1000, 'z')).has_value());  // units 2..4
  EXPECT_EQ(fs.stats(file).allocated_bytes, 5 * 512u);
  EXPECT_EQ(fs.stats(file).extents, 1u);  // placed right after the file's last block
}

TEST(Volume, OneByteWriteOnIdealAllocatesOne4KiBBlock) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 5000, "x").has_value());
  EXPECT_EQ(fs.stats(file).allocated_bytes, 4096u);
  EXPECT_EQ(fs.attributes(file).blocks, 8u);
  EXPECT_EQ(fs.attributes(file).block_size, 4096u);
}

// glibc's posix_fallocate fallback on NFS writes one byte at the end of every
// 4 KiB (seed 000): with 512-byte server blocks, each byte is its own extent.
TEST(Volume, GlibcFallocateFallbackMakesOneExtentPer4KiB) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  constexpr uint64_t kWrites = 1024;
  for (uint64_t i = 0; i < kWrites; ++i) {
    ASSERT_TRUE(fs.write(file, i * 4096 + 4095, std::string(1, '\0')).has_value()) << i;
  }
  const FileStats s = fs.stats(file);
  EXPECT_EQ(s.size, kWrites * 4096);
  EXPECT_EQ(s.extents, kWrites);
  EXPECT_EQ(s.allocated_bytes, kWrites * 512);
  EXPECT_EQ(s.fragments, kWrites);
  EXPECT_EQ(s.unwritten_extents, 0u);
  EXPECT_EQ(s.holes, kWrites);  // one before each written unit
  EXPECT_EQ(fs.attributes(file).blocks, kWrites);
  EXPECT_EQ(fs.device_allocated(), kWrites * 512);
  EXPECT_EQ(fs.read(file, 0, kWrites * 4096), zeros(kWrites * 4096));
}

// --- fallocate

TEST(Volume, FallocateOnNfsIsEopnotsuppForEveryModeEveryTime) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, "data").has_value());
  const int modes[] = {0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                       FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE};
  for (int round = 0; round < 3; ++round) {
    for (int mode : modes) {
      EXPECT_EQ(error_of(fs.volume.fallocate(file, mode, 0, 1 * kMiB)), Errno{EOPNOTSUPP})
          << "mode " << mode << " round " << round;
    }
  }
  EXPECT_EQ(fs.attributes(file).size, 4u);
  EXPECT_EQ(fs.stats(file).allocated_bytes, 512u);
  EXPECT_EQ(fs.read(file, 0, 10), "data");
}

TEST(Volume, FallocateAllocatesUnwrittenExtentsAndExtendsSize) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.volume.fallocate(file, 0, 0, 3 * 4096).has_value());
  EXPECT_EQ(fs.attributes(file).size, 3 * 4096u);
  EXPECT_EQ(fs.attributes(file).blocks, 3 * 8u);
  FileStats s = fs.stats(file);
  EXPECT_EQ(s.allocated_bytes, 3 * 4096u);
  EXPECT_EQ(s.extents, 1u);
  EXPECT_EQ(s.unwritten_extents, 1u);
  EXPECT_EQ(fs.read(file, 0, 3 * 4096), zeros(3 * 4096));

  // A write into the middle block converts only it: unwritten, written, unwritten.
  ASSERT_TRUE(fs.write(file, 4096 + 10, "x").has_value());
  s = fs.stats(file);
  EXPECT_EQ(s.extents, 3u);
  EXPECT_EQ(s.unwritten_extents, 2u);
  EXPECT_EQ(s.allocated_bytes, 3 * 4096u);
  EXPECT_EQ(s.fragments, 1u);
  EXPECT_EQ(fs.read(file, 4096 + 9, 3), std::string("\0x\0", 3));
  EXPECT_EQ(fs.attributes(file).size, 3 * 4096u);

  // Writing the first block joins it to the written middle one.
  ASSERT_TRUE(fs.write(file, 0, "y").has_value());
  s = fs.stats(file);
  EXPECT_EQ(s.extents, 2u);
  EXPECT_EQ(s.unwritten_extents, 1u);
  auto extents = fs.volume.file_extents(file);
  ASSERT_TRUE(extents.has_value());
  ASSERT_EQ(extents->size(), 2u);
  EXPECT_EQ((*extents)[0].logical, 0u);
  EXPECT_EQ((*extents)[0].length, 2u);
  EXPECT_FALSE((*extents)[0].unwritten);
  EXPECT_TRUE((*extents)[1].unwritten);
}

TEST(Volume, FallocateOverExistingDataKeepsIt) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 4096, "keep").has_value());
  ASSERT_TRUE(fs.volume.fallocate(file, 0, 0, 4 * 4096).has_value());
  EXPECT_EQ(fs.read(file, 4096, 4), "keep");
  EXPECT_EQ(fs.stats(file).allocated_bytes, 4 * 4096u);
  EXPECT_EQ(fs.device_allocated(), 4 * 4096u);
}

TEST(Volume, FallocateKeepSizeAllocatesBeyondEofWithoutGrowing) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, "abc").has_value());
  ASSERT_TRUE(fs.volume.fallocate(file, FALLOC_FL_KEEP_SIZE, 0, 8 * 4096).has_value());
  EXPECT_EQ(fs.attributes(file).size, 3u);
  EXPECT_EQ(fs.stats(file).allocated_bytes, 8 * 4096u);
  EXPECT_EQ(fs.read(file, 0, 100), "abc");
}

TEST(Volume, FallocateOfADirectoryIsEisdir) {
  Fs fs("ideal");
  EXPECT_EQ(error_of(fs.volume.fallocate(kRoot, 0, 0, 4096)), Errno{EISDIR});
}

TEST(Volume, FallocateZeroLengthIsEinval) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  EXPECT_EQ(error_of(fs.volume.fallocate(file, 0, 0, 0)), Errno{EINVAL});
}

TEST(Volume, PunchHoleFreesWholeUnitsAndZeroesPartialOnes) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  const std::string data = pattern(4 * 4096, 5);
  ASSERT_TRUE(fs.write(file, 0, data).has_value());
  ASSERT_EQ(fs.device_allocated(), 4 * 4096u);

  // From inside block 1 to inside block 3: only block 2 is whole.
  const uint64_t offset = 4096 + 100;
  const uint64_t length = 2 * 4096;
  ASSERT_TRUE(fs.volume.fallocate(file, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length)
                  .has_value());
  std::string expected = data;
  std::fill(expected.begin() + offset, expected.begin() + offset + length, '\0');
  EXPECT_EQ(fs.read(file, 0, data.size()), expected);
  EXPECT_EQ(fs.attributes(file).size, 4 * 4096u);
  const FileStats s = fs.stats(file);
  EXPECT_EQ(s.allocated_bytes, 3 * 4096u);
  EXPECT_EQ(s.extents, 2u);
  EXPECT_EQ(s.holes, 1u);
  EXPECT_EQ(fs.device_allocated(), 3 * 4096u);
}

TEST(Volume, PunchHoleInsideOneUnitFreesNothing) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(4096, 6)).has_value());
  ASSERT_TRUE(
      fs.volume.fallocate(file, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 10, 20).has_value());
  EXPECT_EQ(fs.stats(file).allocated_bytes, 4096u);
  EXPECT_EQ(fs.read(file, 10, 20), zeros(20));
  EXPECT_EQ(fs.read(file, 0, 10), pattern(10, 6));
}

TEST(Volume, PunchHoleWithoutKeepSizeIsEopnotsupp) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(8192, 7)).has_value());
  EXPECT_EQ(error_of(fs.volume.fallocate(file, FALLOC_FL_PUNCH_HOLE, 0, 8192)), Errno{EOPNOTSUPP});
  EXPECT_EQ(fs.stats(file).allocated_bytes, 8192u);
  EXPECT_EQ(fs.read(file, 0, 8192), pattern(8192, 7));
}

TEST(Volume, ZeroRangeMakesWholeUnitsUnwrittenAndZeroesPartialOnes) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  const std::string data = pattern(4 * 4096, 8);
  ASSERT_TRUE(fs.write(file, 0, data).has_value());
  ASSERT_TRUE(fs.volume.fallocate(file, FALLOC_FL_ZERO_RANGE, 100, 2 * 4096).has_value());
  std::string expected = data;
  std::fill(expected.begin() + 100, expected.begin() + 100 + 2 * 4096, '\0');
  EXPECT_EQ(fs.read(file, 0, data.size()), expected);
  const FileStats s = fs.stats(file);
  EXPECT_EQ(s.allocated_bytes, 4 * 4096u);
  EXPECT_EQ(s.unwritten_extents, 1u);  // block 1
  EXPECT_EQ(fs.attributes(file).size, 4 * 4096u);
}

// --- ENOSPC

TEST(Volume, FullDeviceFailsNextWriteAndKeepsEarlierData) {
  Fs fs(small("ideal", 64 * kKiB));  // 16 blocks
  const uint64_t file = fs.create("file");
  const std::string data = pattern(64 * kKiB, 9);
  ASSERT_TRUE(fs.write(file, 0, data).has_value());
  ASSERT_EQ(fs.device_allocated(), 64 * kKiB);

  EXPECT_EQ(error_of(fs.write(file, 64 * kKiB, "x")), Errno{ENOSPC});
  const uint64_t other = fs.create("other");
  EXPECT_EQ(error_of(fs.write(other, 0, "x")), Errno{ENOSPC});

  EXPECT_EQ(fs.read(file, 0, data.size() + 10), data);
  EXPECT_EQ(fs.attributes(file).size, 64 * kKiB);
  EXPECT_EQ(fs.stats(file).allocated_bytes, 64 * kKiB);
  EXPECT_EQ(fs.attributes(other).size, 0u);
  EXPECT_EQ(fs.device_allocated(), 64 * kKiB);
  // Overwriting allocated blocks needs no space.
  EXPECT_TRUE(fs.write(file, 10, "overwrite").has_value());
  EXPECT_EQ(fs.volume.statfs().value().blocks_free, 0u);
}

TEST(Volume, WriteNeedingMoreThanFreeSpaceFailsWhole) {
  Fs fs(small("ideal", 64 * kKiB));  // 16 blocks
  const uint64_t file = fs.create("file");
  const uint64_t filler = fs.create("filler");
  ASSERT_TRUE(fs.write(file, 4096, "middle").has_value());                    // block 1
  ASSERT_TRUE(fs.write(filler, 0, std::string(12 * 4096, 'f')).has_value());  // 12 blocks
  ASSERT_EQ(fs.volume.snapshot().device.free_bytes, 3 * 4096u);
  const auto extents_before = fs.volume.file_extents(file);

  // Blocks 0..4 of `file` need 4 new blocks (0, 2, 3, 4): the first hole fits, the
  // second does not, and the first must be given back.
  EXPECT_EQ(error_of(fs.write(file, 0, pattern(5 * 4096, 10))), Errno{ENOSPC});
  EXPECT_EQ(fs.volume.snapshot().device.free_bytes, 3 * 4096u);
  EXPECT_EQ(fs.device_allocated(), 13 * 4096u);
  EXPECT_EQ(fs.volume.file_extents(file), extents_before);
  EXPECT_EQ(fs.attributes(file).size, 4096u + 6);
  EXPECT_EQ(fs.read(file, 0, 8192), zeros(4096) + "middle");

  // What fits still fits: blocks 0..3 need exactly the 3 free blocks.
  EXPECT_TRUE(fs.write(file, 0, pattern(4 * 4096, 11)).has_value());
  EXPECT_EQ(fs.volume.snapshot().device.free_bytes, 0u);
}

TEST(Volume, FallocateBeyondFreeSpaceIsEnospcWithNothingAllocated) {
  Fs fs(small("ideal", 64 * kKiB));
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 4096, "x").has_value());
  EXPECT_EQ(error_of(fs.volume.fallocate(file, 0, 0, 20 * 4096)), Errno{ENOSPC});
  EXPECT_EQ(fs.device_allocated(), 4096u);
  EXPECT_EQ(fs.attributes(file).size, 4097u);
}

// --- truncate

TEST(Volume, TruncateShrinkFreesBlocksAndZeroesTheTail) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  const std::string data = pattern(3 * 4096, 12);
  ASSERT_TRUE(fs.write(file, 0, data).has_value());

  ASSERT_TRUE(fs.truncate(file, 4096 + 100).has_value());
  EXPECT_EQ(fs.attributes(file).size, 4096u + 100);
  EXPECT_EQ(fs.stats(file).allocated_bytes, 2 * 4096u);  // the partial last block stays
  EXPECT_EQ(fs.device_allocated(), 2 * 4096u);
  EXPECT_EQ(fs.read(file, 0, 3 * 4096), data.substr(0, 4096 + 100));

  // Growing again exposes zeros, not the old bytes.
  ASSERT_TRUE(fs.truncate(file, 3 * 4096).has_value());
  EXPECT_EQ(fs.stats(file).allocated_bytes, 2 * 4096u);  // growing allocates nothing
  EXPECT_EQ(fs.read(file, 0, 3 * 4096), data.substr(0, 4096 + 100) + zeros(2 * 4096 - 100));
}

TEST(Volume, TruncateToZeroFreesEverything) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(10000, 13)).has_value());
  ASSERT_TRUE(fs.truncate(file, 0).has_value());
  EXPECT_EQ(fs.stats(file).allocated_bytes, 0u);
  EXPECT_EQ(fs.stats(file).extents, 0u);
  EXPECT_EQ(fs.device_allocated(), 0u);
  EXPECT_EQ(fs.volume.snapshot().device.free_extents, 1u);
}

TEST(Volume, TruncateInsideARunKeepsItsHead) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(20 * 512, 14)).has_value());
  auto before = fs.volume.file_extents(file);
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->size(), 1u);

  ASSERT_TRUE(fs.truncate(file, 7 * 512 + 1).has_value());
  auto after = fs.volume.file_extents(file);
  ASSERT_TRUE(after.has_value());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].logical, 0u);
  EXPECT_EQ((*after)[0].physical, (*before)[0].physical);
  EXPECT_EQ((*after)[0].length, 8u);
  EXPECT_EQ(fs.device_allocated(), 8 * 512u);
  EXPECT_EQ(fs.attributes(file).blocks, 8u);
}

TEST(Volume, TruncateFreesBlocksPreallocatedBeyondEof) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(2 * 4096, 15)).has_value());
  ASSERT_TRUE(fs.volume.fallocate(file, FALLOC_FL_KEEP_SIZE, 0, 10 * 4096).has_value());
  ASSERT_EQ(fs.stats(file).allocated_bytes, 10 * 4096u);
  ASSERT_TRUE(fs.truncate(file, 4096).has_value());
  EXPECT_EQ(fs.stats(file).allocated_bytes, 4096u);
  EXPECT_EQ(fs.stats(file).unwritten_extents, 0u);
  EXPECT_EQ(fs.device_allocated(), 4096u);
}

TEST(Volume, TruncateOfADirectoryIsEisdir) {
  Fs fs("nfs");
  EXPECT_EQ(error_of(fs.truncate(kRoot, 0)), Errno{EISDIR});
}

// --- SEEK_DATA / SEEK_HOLE

TEST(Volume, SeekDataAndHoleFindWrittenBlocks) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 2 * 4096, pattern(4096, 16)).has_value());  // block 2
  ASSERT_TRUE(fs.write(file, 5 * 4096, pattern(100, 17)).has_value());   // block 5, to EOF
  const uint64_t size = 5 * 4096 + 100;
  ASSERT_EQ(fs.attributes(file).size, size);

  EXPECT_EQ(fs.volume.seek(file, 0, SEEK_DATA), 2 * 4096u);
  EXPECT_EQ(fs.volume.seek(file, 2 * 4096 + 7, SEEK_DATA), 2 * 4096u + 7);
  EXPECT_EQ(fs.volume.seek(file, 3 * 4096, SEEK_DATA), 5 * 4096u);
  EXPECT_EQ(fs.volume.seek(file, 0, SEEK_HOLE), 0u);
  EXPECT_EQ(fs.volume.seek(file, 2 * 4096, SEEK_HOLE), 3 * 4096u);
  EXPECT_EQ(fs.volume.seek(file, 3 * 4096 + 5, SEEK_HOLE), 3 * 4096u + 5);
  EXPECT_EQ(fs.volume.seek(file, 5 * 4096, SEEK_HOLE), size);  // EOF is a hole
}

TEST(Volume, SeekAtOrAfterEofIsEnxio) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, "abc").has_value());
  EXPECT_EQ(error_of(fs.volume.seek(file, 3, SEEK_DATA)), Errno{ENXIO});
  EXPECT_EQ(error_of(fs.volume.seek(file, 3, SEEK_HOLE)), Errno{ENXIO});
  EXPECT_EQ(error_of(fs.volume.seek(file, 1000, SEEK_DATA)), Errno{ENXIO});
  EXPECT_EQ(error_of(fs.volume.seek(file, 1000, SEEK_HOLE)), Errno{ENXIO});
  const uint64_t empty = fs.create("empty");
  EXPECT_EQ(error_of(fs.volume.seek(empty, 0, SEEK_DATA)), Errno{ENXIO});
  EXPECT_EQ(error_of(fs.volume.seek(empty, 0, SEEK_HOLE)), Errno{ENXIO});
}

TEST(Volume, SeekDataPastLastDataIsEnxio) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, "abc").has_value());
  ASSERT_TRUE(fs.truncate(file, 10 * 4096).has_value());
  EXPECT_EQ(error_of(fs.volume.seek(file, 4096, SEEK_DATA)), Errno{ENXIO});
  EXPECT_EQ(fs.volume.seek(file, 4096, SEEK_HOLE), 4096u);
  EXPECT_EQ(fs.volume.seek(file, 1, SEEK_HOLE), 4096u);
}

TEST(Volume, SeekTreatsUnwrittenExtentsAsHoles) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.volume.fallocate(file, 0, 0, 4 * 4096).has_value());
  EXPECT_EQ(error_of(fs.volume.seek(file, 0, SEEK_DATA)), Errno{ENXIO});
  EXPECT_EQ(fs.volume.seek(file, 0, SEEK_HOLE), 0u);
  ASSERT_TRUE(fs.write(file, 2 * 4096, "x").has_value());
  EXPECT_EQ(fs.volume.seek(file, 0, SEEK_DATA), 2 * 4096u);
  EXPECT_EQ(fs.volume.seek(file, 2 * 4096, SEEK_HOLE), 3 * 4096u);
}

TEST(Volume, SeekWithOtherWhenceIsEinval) {
  Fs fs("ideal");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, "abc").has_value());
  EXPECT_EQ(error_of(fs.volume.seek(file, 0, SEEK_SET)), Errno{EINVAL});
  EXPECT_EQ(error_of(fs.volume.seek(file, 0, SEEK_END)), Errno{EINVAL});
}

// --- unlink and references

// An unlinked file that is open keeps its blocks until its last handle is
// released; the inode itself lives until the kernel forgets it.
// The server's side: a file removed while open (by another client, or with
// the client's silly rename off) lives on with no name.
TEST(Volume, UnlinkedOpenFileStaysReadableUntilReleased) {
  Fs fs(with("nfs", {"client.silly_rename=false"}));
  const uint64_t file = fs.create("file");  // the caller holds one reference
  ASSERT_TRUE(fs.volume.open(file, O_RDWR).has_value());
  ASSERT_TRUE(fs.write(file, 0, "still here").has_value());
  const uint64_t allocated = fs.device_allocated();
  ASSERT_GT(allocated, 0u);

  ASSERT_TRUE(fs.volume.unlink(kRoot, "file").has_value());
  EXPECT_EQ(error_of(fs.volume.lookup(kRoot, "file")), Errno{ENOENT});
  EXPECT_EQ(fs.attributes(file).nlink, 0u);
  EXPECT_EQ(fs.read(file, 0, 100), "still here");
  EXPECT_TRUE(fs.write(file, 0, "STILL").has_value());
  EXPECT_EQ(fs.device_allocated(), allocated);
  EXPECT_TRUE(fs.volume.snapshot().files.empty());
  const OpenStats open = fs.volume.snapshot().open;
  EXPECT_EQ(open.handles, 1u);
  EXPECT_EQ(open.files, 1u);
  EXPECT_EQ(open.unlinked_files, 1u);
  EXPECT_EQ(open.unlinked_bytes, allocated) << "what the last release will free";

  fs.volume.release(file);
  EXPECT_EQ(fs.device_allocated(), 0u) << "the last close of an unlinked file frees it";
  EXPECT_EQ(fs.volume.snapshot().open.handles, 0u);
  EXPECT_EQ(fs.volume.snapshot().open.unlinked_files, 0u);
  EXPECT_TRUE(fs.volume.getattr(file).has_value()) << "until the kernel forgets it";
  fs.volume.forget(file, 1);
  EXPECT_EQ(error_of(fs.volume.getattr(file)), Errno{ENOENT});
}

TEST(Volume, UnlinkAfterLastReferenceFreesAtOnce) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, "data").has_value());
  fs.volume.forget(file, 1);  // still linked: stays
  EXPECT_EQ(fs.read(file, 0, 10), "data");
  ASSERT_TRUE(fs.volume.unlink(kRoot, "file").has_value());
  EXPECT_EQ(fs.device_allocated(), 0u);
  EXPECT_EQ(error_of(fs.volume.getattr(file)), Errno{ENOENT});
}

// Lookups keep the inode (its number and attributes) until forgotten, but the
// blocks of a file nobody has open go with its last link, as on Linux.
TEST(Volume, EveryLookupIsAReferenceToForget) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, "data").has_value());
  ASSERT_TRUE(fs.volume.lookup(kRoot, "file").has_value());
  ASSERT_TRUE(fs.volume.lookup(kRoot, "file").has_value());
  ASSERT_TRUE(fs.volume.unlink(kRoot, "file").has_value());
  EXPECT_EQ(fs.device_allocated(), 0u);
  fs.volume.forget(file, 2);
  EXPECT_TRUE(fs.volume.getattr(file).has_value());  // one reference left
  fs.volume.forget(file, 1);
  EXPECT_EQ(error_of(fs.volume.getattr(file)), Errno{ENOENT});
}

TEST(Volume, UnlinkOfDirectoryIsEisdirAndOfMissingIsEnoent) {
  Fs fs("nfs");
  fs.mkdir("dir");
  EXPECT_EQ(error_of(fs.volume.unlink(kRoot, "dir")), Errno{EISDIR});
  EXPECT_EQ(error_of(fs.volume.unlink(kRoot, "missing")), Errno{ENOENT});
}

// --- rename

TEST(Volume, RenameMovesTheEntry) {
  Fs fs("nfs");
  const uint64_t file = fs.create("a");
  ASSERT_TRUE(fs.write(file, 0, "contents").has_value());
  const uint64_t dir = fs.mkdir("dir");
  ASSERT_TRUE(fs.volume.rename(kRoot, "a", dir, "b", 0).has_value());
  EXPECT_EQ(error_of(fs.volume.lookup(kRoot, "a")), Errno{ENOENT});
  EXPECT_EQ(fs.inode_of("b", dir), file);
  EXPECT_EQ(fs.read(file, 0, 100), "contents");
  EXPECT_TRUE(fs.volume.snapshot().files.contains("/dir/b"));
}

TEST(Volume, RenameOfMissingSourceIsEnoent) {
  Fs fs("nfs");
  EXPECT_EQ(error_of(fs.volume.rename(kRoot, "missing", kRoot, "x", 0)), Errno{ENOENT});
}

TEST(Volume, RenameOntoExistingFileReplacesItAndFreesItsBlocksWhenClosed) {
  Fs fs(with("nfs", {"client.silly_rename=false"}));  // the server's side, as above
  const uint64_t a = fs.create("a");
  const uint64_t b = fs.create("b");
  ASSERT_TRUE(fs.volume.open(b, O_RDONLY).has_value());
  ASSERT_TRUE(fs.write(a, 0, std::string(512, 'a')).has_value());
  ASSERT_TRUE(fs.write(b, 0, std::string(3 * 512, 'b')).has_value());
  ASSERT_EQ(fs.device_allocated(), 4 * 512u);

  ASSERT_TRUE(fs.volume.rename(kRoot, "a", kRoot, "b", 0).has_value());
  EXPECT_EQ(error_of(fs.volume.lookup(kRoot, "a")), Errno{ENOENT});
  EXPECT_EQ(fs.inode_of("b"), a);
  EXPECT_EQ(fs.attributes(b).nlink, 0u);
  EXPECT_EQ(fs.read(b, 0, 3), "bbb");          // still open
  EXPECT_EQ(fs.device_allocated(), 4 * 512u);  // still open

  fs.volume.release(b);
  EXPECT_EQ(fs.device_allocated(), 512u);
  fs.volume.forget(b, 1);
  EXPECT_EQ(error_of(fs.volume.getattr(b)), Errno{ENOENT});
}

TEST(Volume, RenameNoreplaceOntoExistingIsEexist) {
  Fs fs("nfs");
  const uint64_t a = fs.create("a");
  const uint64_t b = fs.create("b");
  EXPECT_EQ(error_of(fs.volume.rename(kRoot, "a", kRoot, "b", RENAME_NOREPLACE)), Errno{EEXIST});
  EXPECT_EQ(fs.inode_of("a"), a);
  EXPECT_EQ(fs.inode_of("b"), b);
  EXPECT_TRUE(fs.volume.rename(kRoot, "a", kRoot, "c", RENAME_NOREPLACE).has_value());
  EXPECT_EQ(fs.inode_of("c"), a);
}

TEST(Volume, RenameExchangeSwapsTwoEntries) {
  Fs fs("nfs");
  const uint64_t a = fs.create("a");
  const uint64_t b = fs.create("b");
  ASSERT_TRUE(fs.volume.rename(kRoot, "a", kRoot, "b", RENAME_EXCHANGE).has_value());
  EXPECT_EQ(fs.inode_of("a"), b);
  EXPECT_EQ(fs.inode_of("b"), a);
  EXPECT_EQ(fs.attributes(a).nlink, 1u);
  EXPECT_EQ(fs.attributes(b).nlink, 1u);
  EXPECT_EQ(error_of(fs.volume.rename(kRoot, "a", kRoot, "missing", RENAME_EXCHANGE)),
            Errno{ENOENT});
}

TEST(Volume, RenameExchangeOfDirectoryAndFileAcrossDirectoriesFixesLinkCounts) {
  Fs fs("nfs");
  const uint64_t d1 = fs.mkdir("d1");
  const uint64_t sub = fs.mkdir("sub", d1);
  const uint64_t file = fs.create("file");
  ASSERT_EQ(fs.attributes(kRoot).nlink, 3u);
  ASSERT_EQ(fs.attributes(d1).nlink, 3u);

  ASSERT_TRUE(fs.volume.rename(kRoot, "file", d1, "sub", RENAME_EXCHANGE).has_value());
  EXPECT_EQ(fs.inode_of("file"), sub);
  EXPECT_EQ(fs.inode_of("sub", d1), file);
  EXPECT_EQ(fs.attributes(kRoot).nlink, 4u);
  EXPECT_EQ(fs.attributes(d1).nlink, 2u);
  EXPECT_EQ(fs.inode_of("..", sub), kRoot);
}

TEST(Volume, RenameWithBothFlagsOrUnknownFlagIsEinval) {
  Fs fs("nfs");
  fs.create("a");
  fs.create("b");
  EXPECT_EQ(error_of(fs.volume.rename(kRoot, "a", kRoot, "b", RENAME_NOREPLACE | RENAME_EXCHANGE)),
            Errno{EINVAL});
  EXPECT_EQ(error_of(fs.volume.rename(kRoot, "a", kRoot, "c", RENAME_WHITEOUT)), Errno{EINVAL});
}

TEST(Volume, RenameDirectoryIntoItsOwnSubdirectoryIsEinval) {
  Fs fs("nfs");
  const uint64_t dir = fs.mkdir("dir");
  const uint64_t sub = fs.mkdir("sub", dir);
  const uint64_t subsub = fs.mkdir("subsub", sub);
  EXPECT_EQ(error_of(fs.volume.rename(kRoot, "dir", sub, "x", 0)), Errno{EINVAL});
  EXPECT_EQ(error_of(fs.volume.rename(kRoot, "dir", subsub, "x", 0)), Errno{EINVAL});
  EXPECT_EQ(error_of(fs.volume.rename(kRoot, "dir", dir, "x", 0)), Errno{EINVAL});
  EXPECT_EQ(fs.inode_of("dir"), dir);
  // Moving the subdirectory up is fine.
  EXPECT_TRUE(fs.volume.rename(dir, "sub", kRoot, "sub", 0).has_value());
}

TEST(Volume, RenameDirectoryOverEmptyDirectoryReplacesIt) {
  Fs fs("nfs");
  const uint64_t x = fs.mkdir("x");
  const uint64_t y = fs.mkdir("y");
  ASSERT_EQ(fs.attributes(kRoot).nlink, 4u);
  ASSERT_TRUE(fs.volume.rename(kRoot, "x", kRoot, "y", 0).has_value());
  EXPECT_EQ(fs.inode_of("y"), x);
  EXPECT_EQ(fs.attributes(kRoot).nlink, 3u);
  EXPECT_EQ(fs.attributes(y).nlink, 0u);
}

TEST(Volume, RenameDirectoryOverNonEmptyDirectoryIsEnotempty) {
  Fs fs("nfs");
  fs.mkdir("x");
  const uint64_t y = fs.mkdir("y");
  fs.create("file", y);
  EXPECT_EQ(error_of(fs.volume.rename(kRoot, "x", kRoot, "y", 0)), Errno{ENOTEMPTY});
}

TEST(Volume, RenameBetweenFileAndDirectoryIsRefused) {
  Fs fs("nfs");
  fs.mkdir("dir");
  fs.create("file");
  EXPECT_EQ(error_of(fs.volume.rename(kRoot, "file", kRoot, "dir", 0)), Errno{EISDIR});
  EXPECT_EQ(error_of(fs.volume.rename(kRoot, "dir", kRoot, "file", 0)), Errno{ENOTDIR});
}

// --- directories

TEST(Volume, RmdirOfNonEmptyDirectoryIsEnotempty) {
  Fs fs("nfs");
  const uint64_t dir = fs.mkdir("dir");
  fs.create("file", dir);
  EXPECT_EQ(error_of(fs.volume.rmdir(kRoot, "dir")), Errno{ENOTEMPTY});
  ASSERT_TRUE(fs.volume.unlink(dir, "file").has_value());
  EXPECT_TRUE(fs.volume.rmdir(kRoot, "dir").has_value());
  EXPECT_EQ(error_of(fs.volume.lookup(kRoot, "dir")), Errno{ENOENT});
}

TEST(Volume, RmdirOfFileIsEnotdir) {
  Fs fs("nfs");
  fs.create("file");
  EXPECT_EQ(error_of(fs.volume.rmdir(kRoot, "file")), Errno{ENOTDIR});
  EXPECT_EQ(error_of(fs.volume.rmdir(kRoot, "missing")), Errno{ENOENT});
}

TEST(Volume, DirectoryLinkCountsFollowSubdirectories) {
  Fs fs("nfs");
  EXPECT_EQ(fs.attributes(kRoot).nlink, 2u);
  const uint64_t a = fs.mkdir("a");
  EXPECT_EQ(fs.attributes(kRoot).nlink, 3u);
  EXPECT_EQ(fs.attributes(a).nlink, 2u);
  fs.mkdir("b", a);
  EXPECT_EQ(fs.attributes(a).nlink, 3u);
  fs.create("file", a);  // files do not count
  EXPECT_EQ(fs.attributes(a).nlink, 3u);

  ASSERT_TRUE(fs.volume.rename(a, "b", kRoot, "b", 0).has_value());
  EXPECT_EQ(fs.attributes(a).nlink, 2u);
  EXPECT_EQ(fs.attributes(kRoot).nlink, 4u);

  ASSERT_TRUE(fs.volume.rmdir(kRoot, "b").has_value());
  EXPECT_EQ(fs.attributes(kRoot).nlink, 3u);
}

// --- links

TEST(Volume, HardLinkSharesTheInodeAndIsListedOnce) {
  Fs fs("nfs");
  const uint64_t file = fs.create("f");
  ASSERT_TRUE(fs.write(file, 0, "shared").has_value());
  auto linked = fs.volume.link(file, kRoot, "g");
  ASSERT_TRUE(linked.has_value());
  EXPECT_EQ(linked->inode, file);
  EXPECT_EQ(linked->nlink, 2u);
  EXPECT_EQ(fs.attributes(file).nlink, 2u);
  EXPECT_EQ(fs.inode_of("g"), file);

  const StatsSnapshot snapshot = fs.volume.snapshot();
  EXPECT_EQ(snapshot.files.size(), 1u);
  EXPECT_TRUE(snapshot.files.contains("/f"));
  EXPECT_EQ(snapshot.device.allocated_bytes, 512u);

  ASSERT_TRUE(fs.volume.unlink(kRoot, "f").has_value());
  EXPECT_EQ(fs.attributes(file).nlink, 1u);
  EXPECT_EQ(fs.volume.snapshot().files.count("/g"), 1u);
  EXPECT_EQ(fs.device_allocated(), 512u);
}

TEST(Volume, HardLinkToDirectoryIsEperm) {
  Fs fs("nfs");
  const uint64_t dir = fs.mkdir("dir");
  EXPECT_EQ(error_of(fs.volume.link(dir, kRoot, "again")), Errno{EPERM});
}

TEST(Volume, HardLinkOntoExistingNameIsEexist) {
  Fs fs("nfs");
  const uint64_t file = fs.create("f");
  fs.create("g");
  EXPECT_EQ(error_of(fs.volume.link(file, kRoot, "g")), Errno{EEXIST});
  EXPECT_EQ(fs.attributes(file).nlink, 1u);
}

TEST(Volume, SymlinkStoresItsTarget) {
  Fs fs("nfs");
  auto link = fs.volume.symlink(kRoot, "link", "../some/target", Owner{});
  ASSERT_TRUE(link.has_value());
  EXPECT_TRUE(S_ISLNK(link->mode));
  EXPECT_EQ(link->size, 14u);
  EXPECT_EQ(fs.volume.readlink(link->inode), "../some/target");
  const uint64_t file = fs.create("file");
  EXPECT_EQ(error_of(fs.volume.readlink(file)), Errno{EINVAL});
  EXPECT_EQ(error_of(fs.volume.symlink(kRoot, "link", "x", Owner{})), Errno{EEXIST});
}

// --- copy_file_range

TEST(Volume, CopyRangeCopiesUpToTheSourceEndAndRefusesOverlaps) {
  Fs fs("ext4");
  const uint64_t src = fs.create("src");
  const uint64_t dst = fs.create("dst");
  ASSERT_TRUE(fs.volume.write(src, 0, as_bytes("0123456789")).has_value());
  EXPECT_EQ(fs.volume.copy_range(src, 2, dst, 4, 100), 8u) << "up to the source's end";
  std::string out(12, '?');
  ASSERT_EQ(fs.volume.read(dst, 0, std::as_writable_bytes(std::span(out))), 12u);
  EXPECT_EQ(out, std::string("\0\0\0\0", 4) + "23456789");
  EXPECT_EQ(fs.volume.copy_range(src, 10, dst, 0, 5), 0u) << "nothing past the end";
  EXPECT_EQ(error_of(fs.volume.copy_range(src, 0, src, 4, 6)), Errno{EINVAL}) << "overlap";
  EXPECT_EQ(fs.volume.copy_range(src, 0, src, 10, 5), 5u) << "one file, apart";
  EXPECT_EQ(error_of(fs.volume.copy_range(src, 0, kRoot, 0, 5)), Errno{EISDIR});
  EXPECT_EQ(fs.volume.copy_range(src, UINT64_MAX - 2, src, 0, 5), 0u)
      << "far apart, no overflow in the overlap check";
  EXPECT_GT(fs.volume.file_stats(dst)->unsynced_bytes, 0u);
  const uint64_t synced = fs.create("synced");
  ASSERT_EQ(fs.volume.copy_range(src, 0, synced, 0, 10, O_DSYNC), 10u);
  EXPECT_EQ(fs.volume.file_stats(synced)->unsynced_bytes, 0u) << "an O_DSYNC destination";
}

// --- extended attributes

TEST(Volume, XattrsSetGetListRemove) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.volume.setxattr(file, "user.b", "2", 0).has_value());
  ASSERT_TRUE(fs.volume.setxattr(file, "user.a", std::string_view("1\0x", 3), 0).has_value());
  EXPECT_EQ(fs.volume.getxattr(file, "user.a"), std::string("1\0x", 3));
  EXPECT_EQ(fs.volume.listxattr(file), (std::vector<std::string>{"user.a", "user.b"}));
  ASSERT_TRUE(fs.volume.setxattr(file, "user.a", "", 0).has_value());  // 0 replaces
  EXPECT_EQ(fs.volume.getxattr(file, "user.a"), "");
  ASSERT_TRUE(fs.volume.removexattr(file, "user.a").has_value());
  EXPECT_EQ(fs.volume.listxattr(file), (std::vector<std::string>{"user.b"}));
}

// Only the namespaces Linux's filesystems serve: another prefix is EOPNOTSUPP.
TEST(Volume, XattrsOfAnUnknownNamespaceAreNotSupported) {
  Fs fs("ext4");
  const uint64_t file = fs.create("file");
  for (const char* name : {"foo.bar", "user", "system.data", "nonamespace"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(error_of(fs.volume.setxattr(file, name, "v", 0)), Errno{EOPNOTSUPP});
    EXPECT_EQ(error_of(fs.volume.getxattr(file, name)), Errno{EOPNOTSUPP});
    EXPECT_EQ(error_of(fs.volume.removexattr(file, name)), Errno{EOPNOTSUPP});
  }
  for (const char* name : {"user.a", "trusted.a", "security.selinux"}) {
    EXPECT_TRUE(fs.volume.setxattr(file, name, "v", 0).has_value()) << name;
  }
}

// In a setgid directory a new entry takes the directory's group, and a new
// directory the setgid bit too (Linux's BSD group semantics).
TEST(Volume, ASetgidDirectoryGivesNewEntriesItsGroup) {
  Fs fs("xfs");
  const Owner caller{1000, 1000};
  const uint64_t plain = fs.volume.mkdir(kRoot, "plain", S_IFDIR | 0775, Owner{0, 50})->inode;
  const uint64_t shared = fs.volume.mkdir(kRoot, "shared", S_IFDIR | 02775, Owner{0, 50})->inode;
  EXPECT_EQ(fs.volume.create(plain, "f", S_IFREG | 0644, 0, caller)->gid, 1000u);
  const auto file = fs.volume.create(shared, "f", S_IFREG | 0644, 0, caller);
  EXPECT_EQ(file->gid, 50u);
  EXPECT_EQ(file->mode & 07777, 0644u);
  const auto dir = fs.volume.mkdir(shared, "d", S_IFDIR | 0755, caller);
  EXPECT_EQ(dir->gid, 50u);
  EXPECT_EQ(dir->mode & 07777, 02755u) << "a new directory inherits the bit";
  EXPECT_EQ(fs.volume.create(dir->inode, "g", S_IFREG | 0600, 0, caller)->gid, 50u);
  EXPECT_EQ(fs.volume.symlink(shared, "l", "f", caller)->gid, 50u);
}

TEST(Volume, XattrCreateAndReplaceFlagsAreEnforced) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  EXPECT_EQ(error_of(fs.volume.setxattr(file, "user.x", "v", XATTR_REPLACE)), Errno{ENODATA});
  ASSERT_TRUE(fs.volume.setxattr(file, "user.x", "v1", XATTR_CREATE).has_value());
  EXPECT_EQ(error_of(fs.volume.setxattr(file, "user.x", "v2", XATTR_CREATE)), Errno{EEXIST});
  EXPECT_EQ(fs.volume.getxattr(file, "user.x"), "v1");
  ASSERT_TRUE(fs.volume.setxattr(file, "user.x", "v3", XATTR_REPLACE).has_value());
  EXPECT_EQ(fs.volume.getxattr(file, "user.x"), "v3");
}

TEST(Volume, MissingXattrIsEnodata) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  EXPECT_EQ(error_of(fs.volume.getxattr(file, "user.none")), Errno{ENODATA});
  EXPECT_EQ(error_of(fs.volume.removexattr(file, "user.none")), Errno{ENODATA});
  EXPECT_EQ(fs.volume.listxattr(file), std::vector<std::string>{});
}

TEST(Volume, XattrOnDirectoryWorks) {
  Fs fs("nfs");
  ASSERT_TRUE(fs.volume.setxattr(kRoot, "user.dir", "yes", 0).has_value());
  EXPECT_EQ(fs.volume.getxattr(kRoot, "user.dir"), "yes");
}

// --- statfs

TEST(Volume, StatfsOnNfsReportsMebibyteGeometry) {
  Fs fs("nfs");
  const FilesystemStats s = fs.volume.statfs().value();
  EXPECT_EQ(s.block_size, 1 * kMiB);
  EXPECT_EQ(s.fragment_size, 1 * kMiB);
  EXPECT_EQ(s.blocks, (uint64_t{1} << 40) / kMiB);
  EXPECT_EQ(s.blocks_free, s.blocks);
  EXPECT_EQ(s.blocks_available, s.blocks);
  EXPECT_EQ(s.name_max, 255u);

  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, std::string(2 * kMiB, 'x')).has_value());
  EXPECT_EQ(fs.volume.statfs().value().blocks_free, s.blocks - 2);
}

TEST(Volume, StatfsOnIdealReports4KiBGeometry) {
  Fs fs("ideal");
  const FilesystemStats s = fs.volume.statfs().value();
  EXPECT_EQ(s.block_size, 4096u);
  EXPECT_EQ(s.fragment_size, 4096u);
  EXPECT_EQ(s.blocks, (uint64_t{4} << 40) / 4096);
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, "x").has_value());
  EXPECT_EQ(fs.volume.statfs().value().blocks_free, s.blocks - 1);
  EXPECT_EQ(fs.volume.statfs().value().files_free, s.files_free - 1);
}

// --- counters and snapshot

TEST(Volume, CountersCountOperationsAndBytes) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  ASSERT_TRUE(fs.write(file, 0, "x").has_value());
  fs.volume.reset_statistics();
  EXPECT_TRUE(fs.volume.snapshot().ops.empty());

  ASSERT_TRUE(fs.write(file, 0, std::string(10, 'a')).has_value());
  ASSERT_TRUE(fs.write(file, 10, std::string(20, 'b')).has_value());
  ASSERT_TRUE(fs.write(file, 30, std::string(30, 'c')).has_value());
  std::vector<std::byte> buffer(25);
  ASSERT_TRUE(fs.volume.read(file, 50, buffer).has_value());  // 10 bytes before EOF

  const StatsSnapshot s = fs.volume.snapshot();
  ASSERT_TRUE(s.ops.contains("write"));
  EXPECT_EQ(s.ops.at("write").count, 3u);
  EXPECT_EQ(s.ops.at("write").bytes, 60u);
  EXPECT_TRUE(s.ops.at("write").errors.empty());
  ASSERT_TRUE(s.ops.contains("read"));
  EXPECT_EQ(s.ops.at("read").count, 1u);
  EXPECT_EQ(s.ops.at("read").bytes, 10u);
  EXPECT_EQ(s.ops.size(), 2u);
}

TEST(Volume, CountersCountErrorsByErrnoName) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  fs.volume.reset_statistics();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(error_of(fs.volume.fallocate(file, 0, 0, 4096)), Errno{EOPNOTSUPP});
  }
  EXPECT_EQ(error_of(fs.volume.lookup(kRoot, "missing")), Errno{ENOENT});
  ASSERT_TRUE(fs.volume.lookup(kRoot, "file").has_value());

  const StatsSnapshot s = fs.volume.snapshot();
  ASSERT_TRUE(s.ops.contains("fallocate"));
  EXPECT_EQ(s.ops.at("fallocate").count, 3u);
  EXPECT_EQ(s.ops.at("fallocate").errors, (std::map<std::string, uint64_t>{{"EOPNOTSUPP", 3}}));
  ASSERT_TRUE(s.ops.contains("lookup"));
  EXPECT_EQ(s.ops.at("lookup").count, 2u);
  EXPECT_EQ(s.ops.at("lookup").errors, (std::map<std::string, uint64_t>{{"ENOENT", 1}}));
}

TEST(Volume, FailedWriteCountsNoBytes) {
  Fs fs(small("ideal", 8 * kKiB));
  const uint64_t file = fs.create("file");
  fs.volume.reset_statistics();
  EXPECT_EQ(error_of(fs.write(file, 0, std::string(3 * 4096, 'x'))), Errno{ENOSPC});
  const StatsSnapshot s = fs.volume.snapshot();
  EXPECT_EQ(s.ops.at("write").count, 1u);
  EXPECT_EQ(s.ops.at("write").bytes, 0u);
  EXPECT_EQ(s.ops.at("write").errors.at("ENOSPC"), 1u);
}

TEST(Volume, SnapshotListsRegularFilesByPath) {
  Fs fs("nfs");
  const uint64_t dir = fs.mkdir("dir");
  const uint64_t file = fs.create("file", dir);
  fs.create("empty");
  ASSERT_TRUE(fs.volume.symlink(kRoot, "link", "dir/file", Owner{}).has_value());
  ASSERT_TRUE(fs.write(file, 1000, "x").has_value());

  const StatsSnapshot s = fs.volume.snapshot();
  EXPECT_EQ(s.profile, "nfs");
  EXPECT_EQ(s.files.size(), 2u);
  ASSERT_TRUE(s.files.contains("/dir/file"));
  const FileStats& f = s.files.at("/dir/file");
  EXPECT_EQ(f.inode, file);
  EXPECT_EQ(f.size, 1001u);
  EXPECT_EQ(f.allocated_bytes, 512u);
  EXPECT_EQ(f.extents, 1u);
  EXPECT_EQ(f.holes, 1u);
  EXPECT_TRUE(s.files.contains("/empty"));
  EXPECT_EQ(s.device.allocation_unit, 512u);
  EXPECT_EQ(s.device.allocated_bytes, 512u);
  EXPECT_EQ(s.device.free_bytes, (uint64_t{1} << 40) - 512);
}

TEST(Volume, StatsJsonHasTheDocumentedKeys) {
  Fs fs("nfs");
  const uint64_t file = fs.create("file");
  fs.volume.reset_statistics();
  ASSERT_TRUE(fs.write(file, 0, "abc").has_value());
  EXPECT_FALSE(fs.volume.fallocate(file, 0, 0, 4096).has_value());

  const nlohmann::json j = to_json(fs.volume.snapshot());
  EXPECT_EQ(j.at("profile"), "nfs");
  const auto& device = j.at("device");
  EXPECT_EQ(device.at("allocation_unit"), 512);
  EXPECT_EQ(device.at("capacity_bytes"), uint64_t{1} << 40);
  EXPECT_EQ(device.at("allocated_bytes"), 512);
  EXPECT_EQ(device.at("free_extents"), 1);
  EXPECT_TRUE(device.contains("free_bytes"));
  EXPECT_TRUE(device.contains("largest_free_extent_bytes"));

  const auto& write = j.at("ops").at("write");
  EXPECT_EQ(write.at("count"), 1);
  EXPECT_EQ(write.at("bytes"), 3);
  EXPECT_TRUE(write.at("errors").is_object());
  EXPECT_TRUE(write.at("errors").empty());
  EXPECT_EQ(j.at("ops").at("fallocate").at("errors").at("EOPNOTSUPP"), 1);

  const auto& f = j.at("files").at("/file");
  EXPECT_EQ(f.at("size"), 3);
  EXPECT_EQ(f.at("allocated_bytes"), 512);
  EXPECT_EQ(f.at("extents"), 1);
  EXPECT_EQ(f.at("unwritten_extents"), 0);
  EXPECT_EQ(f.at("inode"), file);
}

// --- against a model

// Random writes, truncates and fallocate calls on a small device, checked after
// every step against a byte string and the allocation rules: the file's blocks
// are the device's, and every block holding data is allocated.
TEST(Volume, RandomOperationsMatchAByteModel) {
  constexpr uint64_t kUnit = 4096;
  constexpr uint64_t kSpan = 24 * kUnit;
  Fs fs(small("ideal", 16 * kUnit));
  const uint64_t file = fs.create("file");
  std::mt19937_64 random(42);  // fixed seed: the same operations every run
  auto below = [&](uint64_t n) { return random() % n; };
  std::string model;  // the file's contents; its length is the file size
  int enospc = 0;
  for (int step = 0; step < 3000; ++step) {
    const uint64_t offset = below(kSpan);
    const uint64_t length = 1 + below(std::min<uint64_t>(3 * kUnit, kSpan - offset));
    const uint64_t end = offset + length;
    switch (below(6)) {
      case 0:
      case 1: {
        const std::string data = pattern(length, static_cast<char>(step % 26));
        auto written = fs.write(file, offset, data);
        if (!written) {
          ASSERT_EQ(written.error(), Errno{ENOSPC}) << "step " << step;
          ++enospc;
          break;
        }
        if (model.size() < end) model.resize(end, '\0');
        model.replace(offset, length, data);
        break;
      }
      case 2: {
        const uint64_t size = below(kSpan);
        ASSERT_TRUE(fs.truncate(file, size).has_value()) << "step " << step;
        model.resize(size, '\0');
        break;
      }
      case 3:
        ASSERT_TRUE(
            fs.volume.fallocate(file, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length)
                .has_value())
            << "step " << step;
        if (offset < model.size()) {
          const uint64_t stop = std::min<uint64_t>(end, model.size());
          std::fill(model.begin() + offset, model.begin() + stop, '\0');
        }
        break;
      case 4: {
        const bool keep_size = below(2) == 0;
        auto r = fs.volume.fallocate(file, keep_size ? FALLOC_FL_KEEP_SIZE : 0, offset, length);
        if (!r) {
          ASSERT_EQ(r.error(), Errno{ENOSPC}) << "step " << step;
          ++enospc;
          break;
        }
        if (!keep_size && model.size() < end) model.resize(end, '\0');
        break;
      }
      case 5: {
        const bool keep_size = below(2) == 0;
        const int mode = FALLOC_FL_ZERO_RANGE | (keep_size ? FALLOC_FL_KEEP_SIZE : 0);
        auto r = fs.volume.fallocate(file, mode, offset, length);
        std::string zeroed = model;
        if (offset < zeroed.size()) {
          const uint64_t stop = std::min<uint64_t>(end, zeroed.size());
          std::fill(zeroed.begin() + offset, zeroed.begin() + stop, '\0');
        }
        if (!r) {
          ASSERT_EQ(r.error(), Errno{ENOSPC}) << "step " << step;
          ++enospc;
          // Whether a failed zero range zeroed first is not specified: either is fine.
          const std::string now = fs.read(file, 0, kSpan + kUnit);
          ASSERT_TRUE(now == model || now == zeroed) << "step " << step;
          model = now;
          break;
        }
        model = zeroed;
        if (!keep_size && model.size() < end) model.resize(end, '\0');
        break;
      }
    }
    ASSERT_EQ(fs.attributes(file).size, model.size()) << "step " << step;
    ASSERT_EQ(fs.read(file, 0, kSpan + kUnit), model) << "step " << step;

    // Allocation: the file's blocks are exactly the device's, and each unit that
    // holds a non-zero byte is mapped (written).
    const FileStats stats = fs.stats(file);
    ASSERT_EQ(stats.allocated_bytes, fs.device_allocated()) << "step " << step;
    auto extents = fs.volume.file_extents(file);
    ASSERT_TRUE(extents.has_value());
    std::vector<bool> written(kSpan / kUnit + 2, false);
    for (const Extent& e : *extents) {
      for (uint64_t b = e.logical; b < e.logical_end() && b < written.size(); ++b) {
        written[b] = !e.unwritten;
      }
    }
    for (uint64_t i = 0; i < model.size(); ++i) {
      if (model[i] != '\0') {
        ASSERT_TRUE(written[i / kUnit]) << "step " << step << ": data in unit " << i / kUnit;
      }
    }
  }
  EXPECT_GT(enospc, 0);  // the device did fill up along the way
}

// What a caller's attribute cache cannot see must be reported: xfs allocates
// delayed blocks with preallocation at a sync and trims it at the last close.
TEST(Volume, SyncsAndClosesReportTheFilesWhoseBlocksChanged) {
  Fs fs("xfs");
  const uint64_t file = fs.create_open("file");
  ASSERT_TRUE(fs.write(file, 0, pattern(256 * kKiB, 'a')).has_value());
  Work sync;
  ASSERT_TRUE(fs.volume.fsync(file, false, sync).has_value());
  EXPECT_EQ(sync.changed_attributes, std::vector<uint64_t>{file});
  Work again;
  ASSERT_TRUE(fs.volume.fsync(file, false, again).has_value());
  EXPECT_TRUE(again.changed_attributes.empty()) << "nothing moved";
  Work close;
  ASSERT_TRUE(fs.volume.flush(file, /*writer=*/true, close).has_value());
  EXPECT_EQ(close.changed_attributes, std::vector<uint64_t>{file});

  const uint64_t other = fs.create_open("other");
  ASSERT_TRUE(fs.write(other, 0, pattern(256 * kKiB, 'b')).has_value());
  Work sync_all;
  fs.volume.sync_all(sync_all);
  EXPECT_EQ(sync_all.changed_attributes, std::vector<uint64_t>{other});
}

// A caller as the set-ID rules see it (caller.h), for tests.
class TestCredentials : public Credentials {
 public:
  TestCredentials(uint32_t uid, std::vector<uint32_t> groups, bool fsetid)
      : uid_(uid), groups_(std::move(groups)), fsetid_(fsetid) {}
  uint32_t uid() const override { return uid_; }
  bool in_group(uint32_t gid) const override {
    ++asked_;
    return std::find(groups_.begin(), groups_.end(), gid) != groups_.end();
  }
  bool has_fsetid() const override {
    ++asked_;
    return fsetid_;
  }
  bool has_sys_admin() const override { return fsetid_; }
  int asked() const { return asked_; }

 private:
  uint32_t uid_;
  std::vector<uint32_t> groups_;
  bool fsetid_;
  mutable int asked_ = 0;
};

// The SETATTR that sets nothing (the kernel's __remove_privs, or a
// chown(-1, -1)): for a capable caller only security.capability goes; for the
// owner or a writer the set-ID bits too; for anyone else nothing. And a write
// to a file with nothing to clear asks the caller nothing (a /proc read).
TEST(Volume, PrivilegeRemovalFollowsWhoAsks) {
  Fs fs("ext4");
  const uint64_t file = fs.create_open("tool");
  auto set = [&](uint32_t mode, uint32_t uid, uint32_t gid) {
    AttributeChanges changes;
    changes.mode = mode;
    changes.uid = uid;
    changes.gid = gid;
    ASSERT_TRUE(fs.volume.setattr(file, changes).has_value());
    ASSERT_TRUE(fs.volume.setxattr(file, "security.capability", "cap", 0).has_value());
  };
  auto remove_privileges = [&](const TestCredentials& who) {
    const CallerScope scope(1, &who);
    AttributeChanges nothing;
    nothing.kill_suidgid = SetIdClearing::kPrivilegeRemoval;
    EXPECT_TRUE(fs.volume.setattr(file, nothing).has_value());
  };
  auto mode = [&] { return fs.attributes(file).mode & 07777; };
  auto has_capability = [&] { return fs.volume.getxattr(file, "security.capability").has_value(); };

  set(06755, 100, 100);
  remove_privileges(TestCredentials(0, {0}, true));
  EXPECT_EQ(mode(), 06755u) << "root: the bits stay";
  EXPECT_FALSE(has_capability()) << "root: security.capability goes";

  set(06755, 100, 100);
  remove_privileges(TestCredentials(200, {200}, false));
  EXPECT_EQ(mode(), 06755u) << "a stranger who may not write: nothing (ext4: EPERM)";
  EXPECT_TRUE(has_capability());

  set(06757, 100, 100);
  remove_privileges(TestCredentials(200, {200}, false));
  EXPECT_EQ(mode(), 0757u) << "a stranger who may write";
  EXPECT_FALSE(has_capability());

  set(06745, 100, 100);
  remove_privileges(TestCredentials(100, {300}, false));
  EXPECT_EQ(mode(), 0745u) << "the owner, outside the file's group: S_ISGID goes too";

  set(0755, 100, 100);
  ASSERT_TRUE(fs.volume.removexattr(file, "security.capability").has_value());
  const TestCredentials writer(200, {200}, false);
  {
    const CallerScope scope(1, &writer);
    ASSERT_TRUE(fs.volume.write(file, 0, as_bytes("x"), kKillSuidgid).has_value());
  }
  EXPECT_EQ(writer.asked(), 0) << "nothing to clear, nothing asked";
}

// FUSE_HANDLE_KILLPRIV_V2: the kernel says when (kKillSuidgid), the volume
// clears as Linux's VFS: S_ISUID always, S_ISGID only with group execute.
TEST(Volume, KillSuidgidClearsSetIdBitsAsLinuxDoes) {
  Fs fs("ext4");
  const uint64_t file = fs.create_open("tool");
  auto chmod = [&](uint32_t mode) {
    AttributeChanges changes;
    changes.mode = mode;
    ASSERT_TRUE(fs.volume.setattr(file, changes).has_value());
  };
  auto mode = [&] { return fs.attributes(file).mode & 07777; };

  chmod(06775);
  ASSERT_TRUE(fs.volume.write(file, 0, as_bytes("x"), 0).has_value());
  EXPECT_EQ(mode(), 06775u) << "a write without the kernel's word keeps them";
  Work work;
  ASSERT_TRUE(fs.volume.write(file, 0, as_bytes("x"), kKillSuidgid, work).has_value());
  EXPECT_EQ(mode(), 0775u);
  EXPECT_EQ(work.changed_attributes, std::vector<uint64_t>{file}) << "the mode changed";

  chmod(06765);
  ASSERT_TRUE(fs.volume.write(file, 0, as_bytes("x"), kKillSuidgid).has_value());
  EXPECT_EQ(mode(), 02765u) << "S_ISGID without group execute is mandatory locking: kept";

  chmod(06775);
  AttributeChanges truncate;
  truncate.size = 0;
  truncate.kill_suidgid = SetIdClearing::kModification;
  auto attributes = fs.volume.setattr(file, truncate);
  ASSERT_TRUE(attributes.has_value());
  EXPECT_EQ(attributes->mode & 07777, 0775u) << "the reply carries the new mode";

  chmod(06775);
  ASSERT_TRUE(fs.volume.open(file, O_WRONLY | O_TRUNC | kKillSuidgid).has_value());
  EXPECT_EQ(mode(), 0775u);

  chmod(06775);
  Work nothing;
  ASSERT_TRUE(fs.volume.write(file, 0, as_bytes("x"), kKillSuidgid, nothing).has_value());
  ASSERT_TRUE(fs.volume.write(file, 0, as_bytes("x"), kKillSuidgid, nothing).has_value());
  EXPECT_EQ(nothing.changed_attributes.size(), 1u) << "reported once, when a bit went";
}

// O_TMPFILE: a file with no name, open once, that linkat may name once; never
// named, it goes at its last release and forget like an unlinked open file.
TEST(Volume, ATmpfileHasNoNameUntilLinkedAndGoesWhenReleasedUnnamed) {
  Fs fs("ext4");
  const uint64_t dir = fs.mkdir("db");
  auto created = fs.volume.tmpfile(dir, 0600, Owner{1000, 100});
  ASSERT_TRUE(created.has_value());
  const uint64_t file = created->inode;
  EXPECT_EQ(created->nlink, 0u);
  EXPECT_EQ(created->mode, S_IFREG | 0600u);
  ASSERT_TRUE(fs.write(file, 0, "redo").has_value());
  EXPECT_EQ(fs.read(file, 0, 10), "redo");
  auto listed = fs.volume.read_directory(dir);
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->size(), 2u) << "only . and ..";
  EXPECT_TRUE(fs.volume.snapshot().files.empty());

  auto linked = fs.volume.link(file, dir, "ib_logfile0");
  ASSERT_TRUE(linked.has_value());
  EXPECT_EQ(linked->nlink, 1u);
  EXPECT_EQ(fs.volume.path(file), "/db/ib_logfile0");
  auto found = fs.volume.lookup(dir, "ib_logfile0");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->inode, file);
  ASSERT_TRUE(fs.volume.unlink(dir, "ib_logfile0").has_value());
  EXPECT_EQ(error_of(fs.volume.link(file, dir, "again")), Errno{ENOENT}) << "named once only";

  // Never named: its blocks go at its release.
  auto scratch = fs.volume.tmpfile(dir, 0600, Owner{1000, 100});
  ASSERT_TRUE(scratch.has_value());
  ASSERT_TRUE(fs.write(scratch->inode, 0, pattern(64 * kKiB, 's')).has_value());
  fs.flush(scratch->inode);
  EXPECT_GT(fs.stats(scratch->inode).allocated_bytes, 0u);
  fs.volume.release(scratch->inode);
  fs.volume.forget(scratch->inode, 1);
  EXPECT_EQ(error_of(fs.volume.getattr(scratch->inode)), Errno{ENOENT});
}

}  // namespace
}  // namespace mimicfs
