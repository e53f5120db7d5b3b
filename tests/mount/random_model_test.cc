// SPDX-License-Identifier: Apache-2.0
// fsx-style model test: seeded random operations on one file through a real
// mount and on an in-memory reference, with the size, the whole contents and the
// allocation compared after every step.
//
// A failure prints the seed and the last operations; rerun one seed with
// MIMICFS_RANDOM_SEED=N.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/mounted_volume.h"

namespace {

using mimicfs::testing::MountedVolume;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kMaxOffset = kMiB;       // writes start at or below 1 MiB
constexpr uint64_t kMaxLength = 64 * kKiB;  // and move at most 64 KiB
constexpr uint64_t kMaxSize = kMiB + 128 * kKiB;
constexpr int kSteps = 1500;

uint64_t div_up(uint64_t value, uint64_t unit) { return (value + unit - 1) / unit; }

// What the file must look like: its bytes (the size is bytes.size()) and which
// allocation units the model expects to be mapped. Allocation follows a local
// filesystem: a write or fallocate maps every unit it touches; truncating down
// unmaps every unit past the new last one (preallocation past EOF too); punching
// unmaps the whole units inside the range only.
class ReferenceFile {
 public:
  explicit ReferenceFile(uint64_t unit) : unit_(unit) {}

  uint64_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

  void write(uint64_t offset, const std::vector<uint8_t>& data) {
    if (data.empty()) return;
    if (offset + data.size() > bytes_.size()) bytes_.resize(offset + data.size(), 0);
    std::copy(data.begin(), data.end(), bytes_.begin() + offset);
    map(offset, data.size());
  }

  void truncate(uint64_t size) {
    if (size < bytes_.size()) unmap_units(div_up(size, unit_), mapped_.size());
    bytes_.resize(size, 0);
  }

  // fallocate mode 0 (extend) or FALLOC_FL_KEEP_SIZE.
  void allocate(uint64_t offset, uint64_t length, bool keep_size) {
    map(offset, length);
    if (!keep_size && offset + length > bytes_.size()) bytes_.resize(offset + length, 0);
  }

  // FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE.
  void punch_hole(uint64_t offset, uint64_t length) {
    zero(offset, length);
    unmap_units(div_up(offset, unit_), (offset + length) / unit_);
  }

  // FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE: zeros, every touched unit mapped.
  void zero_range(uint64_t offset, uint64_t length) {
    zero(offset, length);
    map(offset, length);
  }

  uint64_t mapped_units() const { return std::count(mapped_.begin(), mapped_.end(), true); }
  uint64_t mapped_units_past_eof() const {
    const uint64_t first = div_up(size(), unit_);
    if (first >= mapped_.size()) return 0;
    return std::count(mapped_.begin() + first, mapped_.end(), true);
  }
  // Units holding a non-zero byte: they must be allocated whatever the policy.
  uint64_t units_with_data() const {
    uint64_t count = 0;
    for (uint64_t start = 0; start < bytes_.size(); start += unit_) {
      const uint64_t end = std::min<uint64_t>(start + unit_, bytes_.size());
      if (std::any_of(bytes_.begin() + start, bytes_.begin() + end,
                      [](uint8_t b) { return b != 0; })) {
        ++count;
      }
    }
    return count;
  }
  // The most a file may allocate: its size rounded up to the unit, plus what was
  // preallocated past EOF.
  uint64_t allocation_limit() const {
    return (div_up(size(), unit_) + mapped_units_past_eof()) * unit_;
  }

 private:
  void zero(uint64_t offset, uint64_t length) {
    if (offset >= bytes_.size()) return;
    const uint64_t end = std::min<uint64_t>(offset + length, bytes_.size());
    std::fill(bytes_.begin() + offset, bytes_.begin() + end, 0);
  }
  void map(uint64_t offset, uint64_t length) {
    const uint64_t end = div_up(offset + length, unit_);
    if (end > mapped_.size()) mapped_.resize(end, false);
    std::fill(mapped_.begin() + offset / unit_, mapped_.begin() + end, true);
  }
  void unmap_units(uint64_t first, uint64_t end) {
    end = std::min<uint64_t>(end, mapped_.size());
    if (first < end) std::fill(mapped_.begin() + first, mapped_.begin() + end, false);
  }

  const uint64_t unit_;
  std::vector<uint8_t> bytes_;
  std::vector<bool> mapped_;
};

struct ModelCase {
  const char* profile;
  uint64_t allocation_unit;
  bool fallocate;  // the profile supports allocate, keep_size, punch_hole and zero_range
  uint64_t default_seed;
  // Allocation follows the model exactly (no delayed allocation, preallocation or
  // copy-on-write); otherwise only contents and st_blocks' own account are checked.
  bool exact_allocation = true;
  // File contents in a host directory (--data-dir) rather than in memory.
  bool data_dir = false;
  // Through a second NFS client of the mount (--client-of), the first idle.
  bool second_client = false;
};

void PrintTo(const ModelCase& c, std::ostream* out) {
  *out << c.profile << (c.data_dir ? " --data-dir" : "");
}

class RandomModel : public ::testing::TestWithParam<ModelCase> {};

uint64_t seed_for(const ModelCase& c) {
  if (const char* env = std::getenv("MIMICFS_RANDOM_SEED")) return std::strtoull(env, nullptr, 0);
  return c.default_seed;
}

struct ScopedFd {
  explicit ScopedFd(int fd) : fd(fd) {}
  ~ScopedFd() {
    if (fd >= 0) close(fd);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  const int fd;
};

struct AlignedBuffer {
  explicit AlignedBuffer(size_t capacity)
      : capacity(capacity),
        data(static_cast<uint8_t*>(aligned_alloc(4096, capacity)), &std::free) {}
  size_t capacity;
  std::unique_ptr<uint8_t, decltype(&std::free)> data;
};

// Where two byte strings first differ, for a readable failure.
std::string first_difference(const uint8_t* actual, const uint8_t* expected, size_t length) {
  for (size_t i = 0; i < length; ++i) {
    if (actual[i] != expected[i]) {
      std::ostringstream out;
      out << "first difference at byte " << i << ": file has " << int{actual[i]}
          << ", reference has " << int{expected[i]};
      return out.str();
    }
  }
  return "no difference";
}

TEST_P(RandomModel, FileMatchesInMemoryReferenceAfterEveryStep) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const ModelCase& c = GetParam();
  const std::string data_dir = c.data_dir ? mimicfs::testing::make_temp_dir() : "";
  struct RemoveDir {
    const std::string& dir;
    ~RemoveDir() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  } remove_data_dir{data_dir};
  MountedVolume server(c.profile, c.data_dir ? std::vector<std::string>{"--data-dir", data_dir}
                                             : std::vector<std::string>{});
  ASSERT_TRUE(server.mounted()) << server.error();
  std::optional<MountedVolume> client;
  if (c.second_client) {
    client.emplace(mimicfs::testing::ClientOf{server});
    ASSERT_TRUE(client->mounted()) << client->error();
  }
  const MountedVolume& vol = client ? *client : server;
  ASSERT_EQ(vol.stats()["device"]["allocation_unit"].get<uint64_t>(), c.allocation_unit);

  const uint64_t seed = seed_for(c);
  std::mt19937_64 rng(seed);
  auto uniform = [&](uint64_t low, uint64_t high) {  // inclusive
    return std::uniform_int_distribution<uint64_t>(low, high)(rng);
  };

  const std::string path = vol.file("model.ibd");
  const ScopedFd model(open(path.c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_GE(model.fd, 0) << std::strerror(errno);
  // Whole-file reads bypass the page cache, so they compare what the daemon holds;
  // the random reads go through the cache like a database's buffered reads.
  const ScopedFd direct(open(path.c_str(), O_RDONLY | O_DIRECT));
  ASSERT_GE(direct.fd, 0) << std::strerror(errno);
  const int fd = model.fd;
  const int direct_fd = direct.fd;

  ReferenceFile reference(c.allocation_unit);
  AlignedBuffer whole(div_up(kMaxSize, 4096) * 4096 + 4096);
  std::deque<std::string> recent;  // the last operations, for failure messages
  int step = 0;
  auto context = [&] {
    std::ostringstream out;
    out << "\nprofile " << c.profile << ", seed " << seed
        << " (rerun with MIMICFS_RANDOM_SEED=" << seed << "), step " << step
        << "; last operations:";
    for (const auto& op : recent) out << "\n  " << op;
    return out.str();
  };
  auto note = [&](std::string op) {
    recent.push_back(std::move(op));
    if (recent.size() > 16) recent.pop_front();
  };

  auto random_data = [&](uint64_t length) {
    std::vector<uint8_t> data(length);
    switch (uniform(0, 3)) {
      case 0:  // random bytes, zeros among them by chance
        for (auto& b : data) b = static_cast<uint8_t>(rng());
        break;
      case 1:  // all zeros: must still be stored (it overwrites data)
        break;
      case 2:  // runs of zeros and of random bytes
        for (uint64_t i = 0; i < length;) {
          const uint64_t run = std::min<uint64_t>(uniform(1, 4096), length - i);
          const bool zeros = uniform(0, 1) == 0;
          for (uint64_t j = 0; j < run; ++j) data[i + j] = zeros ? 0 : static_cast<uint8_t>(rng());
          i += run;
        }
        break;
      default:  // one non-zero byte repeated
        std::fill(data.begin(), data.end(), static_cast<uint8_t>(uniform(1, 255)));
        break;
    }
    return data;
  };
  auto random_offset = [&](uint64_t limit) {
    switch (uniform(0, 3)) {
      case 0:
        return uniform(0, limit) / c.allocation_unit * c.allocation_unit;  // unit-aligned
      case 1: {  // near the current end of file, where databases extend
        const uint64_t size = reference.size();
        return std::min(limit, uniform(size > 5000 ? size - 5000 : 0, size + 5000));
      }
      default:
        return uniform(0, limit);
    }
  };
  auto random_length = [&] {
    switch (uniform(0, 3)) {
      case 0:
        return uniform(0, 600);  // small and odd
      case 1:
        return uniform(1, kMaxLength / c.allocation_unit) * c.allocation_unit;
      default:
        return uniform(0, kMaxLength);
    }
  };

  enum Op { kWrite, kRead, kTruncate, kFsync, kPunch, kZeroRange, kAllocate, kKeepSize };
  std::vector<int> weights = {40, 20, 10, 2};
  if (c.fallocate) weights.insert(weights.end(), {8, 8, 6, 4});
  std::discrete_distribution<int> pick(weights.begin(), weights.end());

  for (step = 1; step <= kSteps; ++step) {
    std::ostringstream op;
    const Op kind = static_cast<Op>(pick(rng));
    switch (kind) {
      case kWrite: {
        const uint64_t offset = random_offset(kMaxOffset);
        const std::vector<uint8_t> data = random_data(random_length());
        op << "pwrite(" << offset << ", " << data.size() << ")";
        note(op.str());
        const ssize_t n = pwrite(fd, data.data(), data.size(), offset);
        ASSERT_EQ(n, static_cast<ssize_t>(data.size())) << std::strerror(errno) << context();
        reference.write(offset, data);
        break;
      }
      case kRead: {
        const uint64_t offset = uniform(0, reference.size() + 4096);
        const uint64_t length = uniform(0, kMaxLength);
        op << "pread(" << offset << ", " << length << ")";
        note(op.str());
        std::vector<uint8_t> got(length);
        const ssize_t n = pread(fd, got.data(), length, offset);
        ASSERT_GE(n, 0) << std::strerror(errno) << context();
        const uint64_t expected_length =
            offset >= reference.size() ? 0 : std::min(length, reference.size() - offset);
        ASSERT_EQ(static_cast<uint64_t>(n), expected_length) << context();
        ASSERT_TRUE(std::equal(got.begin(), got.begin() + n, reference.bytes().begin() + offset))
            << "buffered read differs from the reference: "
            << first_difference(got.data(), reference.bytes().data() + offset, n) << context();
        break;
      }
      case kTruncate: {
        const uint64_t size = reference.size();
        uint64_t new_size;
        switch (uniform(0, 2)) {
          case 0:
            new_size = uniform(0, kMaxOffset + kMaxLength);
            break;
          case 1:
            new_size = size - std::min<uint64_t>(size, uniform(0, 20000));
            break;
          default:
            new_size = std::min(kMaxOffset + kMaxLength, size + uniform(0, 20000));
            break;
        }
        op << "ftruncate(" << new_size << ")";
        note(op.str());
        ASSERT_EQ(ftruncate(fd, static_cast<off_t>(new_size)), 0)
            << std::strerror(errno) << context();
        reference.truncate(new_size);
        break;
      }
      case kFsync:
        note("fsync");
        ASSERT_EQ(fsync(fd), 0) << std::strerror(errno) << context();
        break;
      case kPunch:
      case kZeroRange:
      case kAllocate:
      case kKeepSize: {
        // Mode 0 only extends to what a write could reach; the others may act
        // past EOF, where KEEP_SIZE preallocates.
        const uint64_t offset =
            random_offset(kind == kAllocate ? kMaxOffset : kMaxOffset + kMaxLength);
        const uint64_t length = std::max<uint64_t>(1, random_length());
        int mode = 0;
        const char* name = "allocate";
        if (kind == kPunch) {
          mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
          name = "punch_hole";
        } else if (kind == kZeroRange) {
          mode = FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
          name = "zero_range";
        } else if (kind == kKeepSize) {
          mode = FALLOC_FL_KEEP_SIZE;
          name = "keep_size";
        }
        op << "fallocate(" << name << ", " << offset << ", " << length << ")";
        note(op.str());
        ASSERT_EQ(fallocate(fd, mode, static_cast<off_t>(offset), static_cast<off_t>(length)), 0)
            << std::strerror(errno) << context();
        if (kind == kPunch) {
          reference.punch_hole(offset, length);
        } else if (kind == kZeroRange) {
          reference.zero_range(offset, length);
        } else {
          reference.allocate(offset, length, /*keep_size=*/kind == kKeepSize);
        }
        break;
      }
    }

    // After every step: the size, the whole contents as the daemon holds them,
    // and an allocation that stays within what the file may hold.
    struct stat st {};
    ASSERT_EQ(fstat(fd, &st), 0) << std::strerror(errno) << context();
    ASSERT_EQ(static_cast<uint64_t>(st.st_size), reference.size()) << context();
    const ssize_t n = pread(direct_fd, whole.data.get(), whole.capacity, 0);
    ASSERT_EQ(n, static_cast<ssize_t>(reference.size())) << std::strerror(errno) << context();
    // An empty reference may have no buffer: memcmp takes no null pointer, even for 0 bytes.
    ASSERT_TRUE(n == 0 || std::memcmp(whole.data.get(), reference.bytes().data(), n) == 0)
        << "file differs from the reference: "
        << first_difference(whole.data.get(), reference.bytes().data(), n) << context();
    const uint64_t allocated = static_cast<uint64_t>(st.st_blocks) * 512;
    ASSERT_EQ(allocated % c.allocation_unit, 0u) << context();
    if (c.exact_allocation) {
      ASSERT_LE(allocated, reference.allocation_limit())
          << "the model maps " << reference.mapped_units() << " units" << context();
    }
  }

  // Everything the file reads back through the page cache too.
  std::vector<uint8_t> buffered(reference.size() + 1);
  ASSERT_EQ(pread(fd, buffered.data(), buffered.size(), 0), static_cast<ssize_t>(reference.size()))
      << context();
  buffered.pop_back();
  EXPECT_TRUE(buffered == reference.bytes())
      << first_difference(buffered.data(), reference.bytes().data(), buffered.size()) << context();

  // The volume's own account agrees with st_blocks and with the model's bounds.
  const nlohmann::json file = vol.file_stats("model.ibd");
  const uint64_t allocated_bytes = file["allocated_bytes"].get<uint64_t>();
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(file["size"].get<uint64_t>(), reference.size()) << context();
  EXPECT_EQ(allocated_bytes % c.allocation_unit, 0u) << context();
  if (!c.exact_allocation) {
    // st_blocks counts mapped blocks and delayed ones; the device holds at least
    // the file's blocks (more: group metadata, reservations, bookends).
    EXPECT_EQ(static_cast<uint64_t>(st.st_blocks) * 512,
              allocated_bytes + file["delayed_bytes"].get<uint64_t>())
        << context();
    EXPECT_GE(vol.stats()["device"]["allocated_bytes"].get<uint64_t>(), allocated_bytes)
        << context();
    return;
  }
  EXPECT_LE(allocated_bytes, reference.allocation_limit())
      << "the model maps " << reference.mapped_units() << " units" << context();
  EXPECT_GE(allocated_bytes, reference.units_with_data() * c.allocation_unit) << context();
  EXPECT_EQ(static_cast<uint64_t>(st.st_blocks) * 512, allocated_bytes) << context();
  EXPECT_EQ(vol.stats()["device"]["allocated_bytes"].get<uint64_t>(), allocated_bytes)
      << "the device allocates for this one file only" << context();
}

INSTANTIATE_TEST_SUITE_P(
    Profiles, RandomModel,
    ::testing::Values(ModelCase{"nfs", 512, /*fallocate=*/false, 0x6e6673'0001},
                      ModelCase{"ideal", 4096, /*fallocate=*/true, 0x6964'65616c},
                      ModelCase{"ext4", 4096, /*fallocate=*/true, 0x65787434, false},
                      ModelCase{"xfs", 4096, /*fallocate=*/true, 0x786673, false},
                      ModelCase{"btrfs", 4096, /*fallocate=*/true, 0x62747266, false},
                      ModelCase{"ext4", 4096, /*fallocate=*/true, 0x65787434'6464, false,
                                /*data_dir=*/true},
                      ModelCase{"nfs", 512, /*fallocate=*/false, 0x6e6673'6464, true,
                                /*data_dir=*/true},
                      ModelCase{"nfs", 512, /*fallocate=*/false, 0x6e6673'4232, true, false,
                                /*second_client=*/true}),
    [](const ::testing::TestParamInfo<ModelCase>& info) {
      return std::string(info.param.profile) + (info.param.data_dir ? "_data_dir" : "") +
             (info.param.second_client ? "_second_client" : "");
    });

}  // namespace
