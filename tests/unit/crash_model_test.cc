// SPDX-License-Identifier: Apache-2.0
// A random sequence of writes (buffered, O_DIRECT, O_DSYNC), truncates, punches,
// fallocates, syncs, closes and periodic commits on a few files, with crashes
// between them, checked against a model of what each file holds, what of it is
// dirty in the page cache, and what of it is durable:
//   - after a crash each file reads exactly as its durable image (contents and
//     size); a byte a commit found dirty may read as zero instead (its block a
//     hole at the commit);
//   - the page cache holds as many dirty bytes as the model says;
//   - the device's used blocks are the files' blocks (in place) or at least them
//     (copy-on-write: bookends), and no device block is mapped twice;
//   - every byte of a hole or an unwritten extent reads as zero.
// MIMICFS_RANDOM_SEED picks another sequence; a failure prints its seed and step.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "engine/space/block_range_set.h"
#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using namespace volume_fixture;

constexpr int kFiles = 3;
constexpr int kSteps = 3000;
constexpr uint64_t kSpan = 512 * kKiB;  // offsets stay below this
constexpr uint64_t kBeyond = uint64_t{1} << 40;  // a length that reaches past any file

struct ModelFile {
  uint64_t inode = 0;
  std::string name;
  std::string current;  // what a read gives now
  std::string durable;  // what a read gives after a crash
  // Bytes of `durable` a commit found dirty: a crash may give 0 instead (the
  // engine restores the page as the last commit had it where its block still
  // holds data, and zeros where the block was a hole at the commit).
  std::vector<bool> maybe_zero;
  BlockRangeSet dirty;     // byte ranges in the page cache, not written back
  BlockRangeSet zeroed;    // byte ranges truncates and punches zeroed since the last commit
  uint64_t disk_size = 0;  // the size a commit makes durable while pages are dirty
  bool write_back_on_close = false;  // truncated as the profile's close writeback says
  std::string history;  // the operations since the last crash, for a failure message
};

uint64_t seed() {
  if (const char* env = std::getenv("MIMICFS_RANDOM_SEED")) return std::strtoull(env, nullptr, 0);
  return 20261123;
}

// "" when equal, else where and how `actual` first differs from `expected`.
std::string difference(const std::string& actual, const std::string& expected) {
  if (actual == expected) return "";
  size_t at = 0;
  while (at < actual.size() && at < expected.size() && actual[at] == expected[at]) ++at;
  auto byte = [](const std::string& s, size_t i) {
    return i < s.size() ? std::to_string(static_cast<unsigned char>(s[i])) : std::string("EOF");
  };
  return "sizes " + std::to_string(actual.size()) + " and " + std::to_string(expected.size()) +
         ", first difference at byte " + std::to_string(at) + ": " + byte(actual, at) +
         " instead of " + byte(expected, at);
}

void write_at(std::string& image, uint64_t offset, std::string_view data) {
  if (image.size() < offset + data.size()) image.resize(offset + data.size(), '\0');
  image.replace(offset, data.size(), data);
}

// A profile, on its own device or on a small one, where blocks one file freed
// are soon another's (and an allocation may meet ENOSPC). Not smaller: with
// three files of up to 512 KiB, the files' last syncs can claim more than a
// 1 MiB device holds on btrfs, whose fsync logs one file (docs/time.md).
struct ModelCase {
  std::string_view profile;
  uint64_t capacity_bytes = 0;  // 0: the profile's
};

void PrintTo(const ModelCase& c, std::ostream* os) {
  *os << c.profile;
  if (c.capacity_bytes) *os << " on " << c.capacity_bytes << " bytes";
}

class CrashModel : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    for (int i = 0; i < kFiles; ++i) {
      ModelFile file;
      file.name = "f" + std::to_string(i);
      file.inode = fs.create_open(file.name);
      files.push_back(file);
    }
    fs.fsync(kRoot);  // the names are durable; the model is about data
  }

  // Every file reads as the model says, and the device agrees with the files.
  void check(const std::string& when) {
    uint64_t file_blocks = 0;
    std::vector<Extent> mapped;
    for (const ModelFile& file : files) {
      const FileStats stats = fs.stats(file.inode);
      ASSERT_EQ(stats.size, file.current.size()) << when << " " << file.name;
      ASSERT_EQ(stats.dirty_bytes, file.dirty.blocks())
          << when << " " << file.name << "; its operations:" << file.history;
      ASSERT_EQ(difference(fs.read(file.inode, 0, file.current.size() + 1), file.current), "")
          << when << " " << file.name << "; its operations:" << file.history;
      // Bytes outside data (holes, unwritten extents, as SEEK_DATA and SEEK_HOLE
      // say) read as zeros; written bytes are never zero (pattern()).
      for (uint64_t position = 0; position < file.current.size();) {
        auto data = fs.volume.seek(file.inode, position, SEEK_DATA);
        const uint64_t data_start = data ? *data : file.current.size();
        ASSERT_EQ(difference(file.current.substr(position, data_start - position),
                             zeros(data_start - position)),
                  "")
            << when << " " << file.name << ": not data from " << position
            << "; its operations:" << file.history;
        if (!data) break;
        auto hole = fs.volume.seek(file.inode, data_start, SEEK_HOLE);
        ASSERT_TRUE(hole.has_value()) << when;
        position = *hole;
      }
      for (const Extent& e : fs.extents(file.inode)) {
        mapped.push_back(e);
        file_blocks += e.length;
      }
    }
    std::sort(mapped.begin(), mapped.end(),
              [](const Extent& a, const Extent& b) { return a.physical < b.physical; });
    for (size_t i = 1; i < mapped.size(); ++i) {
      ASSERT_LE(mapped[i - 1].physical_end(), mapped[i].physical)
          << when << ": device block " << mapped[i].physical << " mapped twice";
    }
    const uint64_t used_blocks = fs.used_bytes() / fs.volume.profile().allocation_unit;
    uint64_t delayed_and_reserved = 0;
    for (const ModelFile& file : files) {
      const FileStats stats = fs.stats(file.inode);
      delayed_and_reserved += stats.preallocated_bytes / fs.volume.profile().allocation_unit;
    }
    if (fs.volume.profile().copy_on_write) {
      ASSERT_GE(used_blocks, file_blocks) << when;
    } else {
      // Mapped blocks, plus inode reservations (counted as preallocation).
      ASSERT_GE(used_blocks, file_blocks) << when;
      ASSERT_LE(used_blocks, file_blocks + delayed_and_reserved) << when;
    }
  }

  // The file is durable as it is now (a sync).
  static void synced(ModelFile& file) {
    file.durable = file.current;
    file.maybe_zero.assign(file.durable.size(), false);
    file.zeroed.clear();
  }

  // Writeback of the dirty units overlapping [offset, offset+length): they are
  // clean, and the disk size reaches the end of the last (RegularFile::writeback).
  static void write_back(ModelFile& file, uint64_t offset, uint64_t length, uint64_t unit) {
    const uint64_t start = offset / unit * unit;
    const uint64_t end = std::min(kBeyond, (offset + length + unit - 1) / unit * unit);
    for (const BlockRange& range : file.dirty.overlapping(start, end - start)) {
      file.dirty.remove(range.start, range.length);
      file.disk_size =
          std::max(file.disk_size, std::min<uint64_t>(file.current.size(), range.start + range.length));
    }
  }

  // A commit that finds the file dirty: every byte below the disk size outside
  // the dirty pages is durable as it is now; a dirty byte a truncate or punch
  // zeroed since is zero, any other keeps its durable value or reads as zero.
  static void commit_partly(ModelFile& file) {
    // Range by range, not byte by byte: the model runs under the sanitizers too.
    const uint64_t size = file.disk_size;
    std::string durable = file.current.substr(0, size);
    durable.resize(size, '\0');
    std::vector<bool> maybe_zero(size, false);
    if (size > 0) {
      for (const BlockRange& dirty : file.dirty.overlapping(0, size)) {
        const uint64_t end = std::min(size, dirty.start + dirty.length);
        for (uint64_t i = dirty.start; i < end; ++i) {
          durable[i] = i < file.durable.size() ? file.durable[i] : '\0';
          maybe_zero[i] = true;
        }
        if (end <= dirty.start) continue;
        for (const BlockRange& zero : file.zeroed.overlapping(dirty.start, end - dirty.start)) {
          const uint64_t zero_end = std::min(end, zero.start + zero.length);
          for (uint64_t i = std::max(zero.start, dirty.start); i < zero_end; ++i) {
            durable[i] = '\0';
            maybe_zero[i] = false;
          }
        }
      }
    }
    file.durable = std::move(durable);
    file.maybe_zero = std::move(maybe_zero);
    file.zeroed.clear();
  }

  // A commit of the filesystem's: every file is durable but its dirty pages.
  void commit_all() {
    for (ModelFile& f : files) {
      if (f.dirty.empty()) {
        synced(f);
      } else {
        commit_partly(f);
      }
    }
  }

  // A power cut: each file reads as its durable image (a byte a commit found
  // dirty may read as zero), which is then what it holds.
  void crash(const std::string& when) {
    fs.volume.crash();
    for (ModelFile& f : files) {
      const std::string now = fs.read(f.inode, 0, f.durable.size() + 1);
      ASSERT_EQ(now.size(), f.durable.size()) << when << " " << f.name << "; its operations:"
                                              << f.history;
      for (size_t i = 0; i < now.size(); ++i) {
        ASSERT_TRUE(now[i] == f.durable[i] || (f.maybe_zero[i] && now[i] == '\0'))
            << when << " " << f.name << " byte " << i << ": " << int(now[i]) << " instead of "
            << int(f.durable[i]) << (f.maybe_zero[i] ? " or 0" : "")
            << "; its operations:" << f.history;
      }
      f.current = now;
      synced(f);
      f.dirty.clear();
      f.disk_size = now.size();
      f.write_back_on_close = false;
    }
    ASSERT_NO_FATAL_FAILURE(check(when + " after crash"));
    for (ModelFile& f : files) f.history += " crash";
  }

  // True when `result` succeeded; ENOSPC (which changes nothing) is accepted on
  // a small device, anything else fails the test.
  template <typename T>
  bool accept(const Result<T>& result, ModelFile& file, const std::string& when) {
    if (result) return true;
    EXPECT_EQ(result.error(), Errno{ENOSPC}) << when;
    EXPECT_NE(GetParam().capacity_bytes, 0u) << when << ": ENOSPC on a large device";
    file.history += " (ENOSPC)";
    return false;
  }

  // The flusher and the periodic commit run when the test says (a step of its
  // own), not when the emulated clock passes their interval.
  static Profile profile_of(const ModelCase& c) {
    const std::vector<std::string> no_timer = {"page_cache.writeback_interval_ns=0",
                                               "durability.commit_interval_ns=0"};
    auto profile = apply_overrides(
        c.capacity_bytes ? small(c.profile, c.capacity_bytes) : builtin(c.profile), no_timer);
    if (!profile) throw std::runtime_error(profile.error());
    return *profile;
  }

  Fs fs{profile_of(GetParam())};
  std::vector<ModelFile> files;
};

TEST_P(CrashModel, FilesReadAsTheirDurableImageAfterEachCrash) {
  const Profile& profile = fs.volume.profile();
  std::mt19937_64 random(seed());
  auto below = [&](uint64_t n) {
    return std::uniform_int_distribution<uint64_t>(0, n - 1)(random);
  };
  const uint64_t block = std::max<uint64_t>(profile.logical_block_size, 4096);
  const bool synchronous = profile.metadata_durability == "synchronous";
  // On one journal a file's sync commits every other file's changes too.
  const bool journal = profile.metadata_durability == "journal";
  const uint64_t unit = profile.dirty_unit;
  const std::string& close_writeback = profile.write_back_on_close_after_truncate;
  for (ModelFile& f : files) f.maybe_zero.assign(f.durable.size(), false);
  uint64_t background_ns = 0;
  char fill = 'a';
  for (int step = 0; step < kSteps; ++step) {
    const std::string when = "seed " + std::to_string(seed()) + " step " + std::to_string(step);
    ModelFile& file = files[below(kFiles)];
    const uint64_t choice = below(100);
    fill = fill == 'z' ? 'a' : static_cast<char>(fill + 1);
    if (choice < 30) {  // buffered write, sometimes O_DSYNC
      const uint64_t offset = below(kSpan);
      const std::string data = pattern(1 + below(20000), fill);
      const bool dsync = below(4) == 0;
      // On a journal O_SYNC, which always commits; an O_DSYNC overwrite in
      // place would not commit the other files.
      const int sync_flag = journal ? O_SYNC : O_DSYNC;
      if (!accept(fs.volume.write(file.inode, offset, as_bytes(data), dsync ? sync_flag : 0), file,
                  when)) {
        continue;
      }
      write_at(file.current, offset, data);
      file.history +=
          fmt::format(" write({}, {}{})", offset, data.size(), dsync ? ", O_DSYNC" : "");
      const uint64_t start = offset / unit * unit;
      file.dirty.add(start, (offset + data.size() + unit - 1) / unit * unit - start);
      if (dsync) {
        write_back(file, offset, data.size(), unit);
        if (journal) commit_all();
        // As O_DSYNC: the range is durable, and the size where the write extended it.
        const uint64_t end = offset + data.size();
        file.durable.resize(std::max<uint64_t>(file.durable.size(), end), '\0');
        file.durable.replace(offset, data.size(), data);
        file.maybe_zero.resize(file.durable.size(), false);
        std::fill_n(file.maybe_zero.begin() + offset, data.size(), false);
        file.zeroed.remove(offset, data.size());
      }
    } else if (choice < 40 && profile.direct_io) {  // O_DIRECT, aligned
      const uint64_t offset = below(kSpan / block) * block;
      const std::string data = pattern(block * (1 + below(8)), fill);
      if (!accept(fs.volume.write(file.inode, offset, as_bytes(data), O_DIRECT), file, when)) {
        continue;
      }
      write_at(file.current, offset, data);
      file.history += fmt::format(" write({}, {}, O_DIRECT)", offset, data.size());
      file.dirty.remove(offset, data.size());
      file.disk_size = std::max<uint64_t>(file.disk_size, offset + data.size());
    } else if (choice < 50) {
      const uint64_t size = below(kSpan);
      ASSERT_TRUE(fs.truncate(file.inode, size)) << when;
      if ((close_writeback == "to_zero" && size == 0) ||
          (close_writeback == "down" && size <= file.current.size())) {
        file.write_back_on_close = true;
      }
      if (size <= file.current.size()) {  // a truncate up keeps the page cache
        file.dirty.remove(size, kBeyond);
        if (size < file.current.size()) file.zeroed.add(size, file.current.size() - size);
      }
      file.current.resize(size, '\0');
      file.history += fmt::format(" truncate({})", size);
      file.disk_size = size;
      // NFS: the client writes back and commits first; the server's SETATTR is stable.
      if (synchronous) {
        file.dirty.clear();
        synced(file);
      }
    } else if (choice < 60 && profile.supports(FallocateMode::kPunchHole)) {
      const uint64_t offset = below(kSpan);
      const uint64_t length = 1 + below(64 * kKiB);
      ASSERT_TRUE(fs.punch(file.inode, offset, length)) << when;
      file.history += fmt::format(" punch({}, {})", offset, length);
      if (offset < file.current.size()) {
        const uint64_t end = std::min<uint64_t>(offset + length, file.current.size());
        file.current.replace(offset, end - offset, zeros(end - offset));
        file.zeroed.add(offset, end - offset);
      }
      // Written back first: its dirty data moves the disk size; then dropped.
      if (const auto dirty = file.dirty.overlapping(offset, length); !dirty.empty()) {
        file.disk_size = std::max<uint64_t>(
            file.disk_size,
            std::min<uint64_t>(file.current.size(), dirty.back().start + dirty.back().length));
      }
      file.dirty.remove(offset, length);
      if (synchronous) {  // as truncate (DEALLOCATE)
        file.dirty.clear();
        file.disk_size = file.current.size();
        synced(file);
      }
    } else if (choice < 68 && profile.supports(FallocateMode::kAllocate)) {
      const bool keep_size = profile.supports(FallocateMode::kKeepSize) && below(2) == 0;
      const uint64_t offset = below(kSpan);
      const uint64_t length = 1 + below(128 * kKiB);
      if (!accept(
              fs.volume.fallocate(file.inode, keep_size ? FALLOC_FL_KEEP_SIZE : 0, offset, length),
              file, when)) {
        continue;
      }
      file.history +=
          fmt::format(" fallocate({}{}, {})", keep_size ? "KEEP_SIZE, " : "", offset, length);
      if (!keep_size && offset + length > file.current.size()) {
        file.current.resize(offset + length, '\0');
        file.disk_size = offset + length;
      }
      // NFS's ALLOCATE: the server commits the size it sets; unsynced data
      // (appends included) stays unsynced.
      if (synchronous && !keep_size && offset + length > file.durable.size()) {
        file.durable.resize(offset + length, '\0');
        file.maybe_zero.resize(file.durable.size(), false);
      }
      // NFS: the server's size is the size the ALLOCATE committed.
      if (synchronous) {
        file.disk_size = std::max<uint64_t>(
            file.disk_size, std::min(file.current.size(), file.durable.size()));
      }
    } else if (choice < 78) {  // fsync or fdatasync: the whole file
      // fdatasync on a journal only where it commits like fsync: an overwrite
      // in place would not commit the other files.
      const bool datasync = !journal && below(2) == 0;
      Work work;
      ASSERT_TRUE(fs.engine.volume().fsync(file.inode, datasync, work)) << when;
      file.dirty.clear();
      file.disk_size = file.current.size();
      if (journal && work.commits > 0) commit_all();
      synced(file);
      file.history = fmt::format(" fsync (size {})", file.current.size());
    } else if (choice < 88) {  // close and reopen (NFS: close-to-open commits)
      fs.flush(file.inode);
      fs.volume.release(file.inode);
      fs.open(file.inode);
      if (profile.flush_on_close) synced(file);
      if (profile.flush_on_close || std::exchange(file.write_back_on_close, false)) {
        file.dirty.clear();
        file.disk_size = file.current.size();
      }
      file.history += " close";
    } else if (choice < 92) {
      ASSERT_NO_FATAL_FAILURE(crash(when));
    } else if (choice < 94) {
      // The kernel's threads, 10 s later: the flusher writes back, whole, what
      // has been dirty for more than 30 s (page_cache.dirty_expire_ns), then the
      // filesystem commits every file but its dirty pages.
      background_ns += 10'000'000'000;
      Work work;
      fs.engine.volume().background(background_ns, /*flush=*/true, /*commit=*/true, work);
      for (ModelFile& f : files) {
        if (fs.stats(f.inode).dirty_bytes == 0) write_back(f, 0, kBeyond, 1);
        f.history += " background";
      }
      commit_all();
    } else {
      ASSERT_NO_FATAL_FAILURE(check(when));
    }
    if (std::getenv("MIMICFS_CHECK_EVERY_STEP")) {
      ASSERT_NO_FATAL_FAILURE(check(when));
    }
  }
  crash("final crash");
}

INSTANTIATE_TEST_SUITE_P(Profiles, CrashModel,
                         ::testing::Values(ModelCase{"ideal"}, ModelCase{"nfs"}, ModelCase{"nfs42"},
                                           ModelCase{"ext4"}, ModelCase{"ext4-hdd"},
                                           ModelCase{"xfs"}, ModelCase{"btrfs"},
                                           ModelCase{"ideal", 2 * kMiB},
                                           ModelCase{"ext4", 2 * kMiB}, ModelCase{"xfs", 2 * kMiB},
                                           ModelCase{"btrfs", 2 * kMiB}),
                         [](const auto& info) {
                           std::string name(info.param.profile);
                           std::replace(name.begin(), name.end(), '-', '_');
                           if (info.param.capacity_bytes) name += "_small_device";
                           return name;
                         });

}  // namespace
}  // namespace mimicfs
