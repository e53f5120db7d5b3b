// SPDX-License-Identifier: Apache-2.0
// Fs: an Engine (a Volume and its layers) in memory with a clock the test sets, and the helpers the
// Volume unit tests share (volume_test.cc: POSIX behaviour; allocation_test.cc: the allocation
// policies of each profile).
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/stat.h>

#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/volume.h"
#include "engine/data/memory_data_store.h"
#include "engine/engine.h"

namespace mimicfs {

// Failures print "ENOSPC" rather than the bytes of an Errno.
inline void PrintTo(Errno e, std::ostream* os) { *os << errno_name(e.value); }

namespace volume_fixture {

inline constexpr uint64_t kRoot = FileSystem::kRootInode;
inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;
inline constexpr uint64_t kGiB = 1024 * kMiB;
inline constexpr int kPunch = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;

// Timestamps the test chooses; it never reads the real clock.
class FixedWallClock final : public WallClock {
 public:
  timespec now() const override { return now_; }
  void set(timespec t) { now_ = t; }

 private:
  timespec now_{1'700'000'000, 123};
};

inline Profile builtin(std::string_view name) {
  auto profile = load_builtin_profile(name);
  if (!profile) throw std::runtime_error(profile.error());
  return *profile;
}

// A built-in profile with `--set` overrides.
inline Profile with(std::string_view name, const std::vector<std::string>& overrides) {
  auto profile = apply_overrides(builtin(name), overrides);
  if (!profile) throw std::runtime_error(profile.error());
  return *profile;
}

// A built-in profile on a device of `capacity_bytes`, one group without metadata,
// so ENOSPC is easy to reach.
inline Profile small(std::string_view name, uint64_t capacity_bytes) {
  return with(name, {fmt::format("device.capacity_bytes={}", capacity_bytes),
                     "device.geometry=groups", "device.allocation_group_bytes=0",
                     "device.group_metadata_bytes=0"});
}

inline std::span<const std::byte> as_bytes(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

// A deterministic, never-zero pattern.
inline std::string pattern(size_t length, char seed) {
  std::string out(length, '\0');
  for (size_t i = 0; i < length; ++i) out[i] = static_cast<char>('A' + (seed + i) % 26);
  return out;
}

inline std::string zeros(size_t length) { return std::string(length, '\0'); }

inline Errno error_of(const auto& result) {
  EXPECT_FALSE(result.has_value());
  return result ? Errno{0} : result.error();
}

struct Fs {
  explicit Fs(std::string_view profile_name) : Fs(builtin(profile_name)) {}
  explicit Fs(Profile profile)
      : engine(std::move(profile), std::make_unique<MemoryDataStore>(), clock) {}

  uint64_t create(const std::string& name, uint64_t parent = kRoot) {
    auto attributes = volume.create(parent, name, S_IFREG | 0644, 0, Owner{1000, 100});
    EXPECT_TRUE(attributes.has_value()) << "create " << name;
    return attributes ? attributes->inode : 0;
  }
  uint64_t mkdir(const std::string& name, uint64_t parent = kRoot) {
    auto attributes = volume.mkdir(parent, name, 0755, Owner{1000, 100});
    EXPECT_TRUE(attributes.has_value()) << "mkdir " << name;
    return attributes ? attributes->inode : 0;
  }
  // Creates `name` and opens it once, as open(2) with O_CREAT does.
  uint64_t create_open(const std::string& name, uint64_t parent = kRoot) {
    const uint64_t inode = create(name, parent);
    open(inode);
    return inode;
  }
  void open(uint64_t inode) { EXPECT_TRUE(volume.open(inode, O_RDWR).has_value()); }
  // close(2) of a descriptor open for writing.
  void flush(uint64_t inode) { EXPECT_TRUE(volume.flush(inode, /*writer=*/true).has_value()); }
  void fsync(uint64_t inode) { EXPECT_TRUE(volume.fsync(inode, false).has_value()); }
  Result<size_t> write(uint64_t inode, uint64_t offset, std::string_view text,
                       bool append = false) {
    return volume.write(inode, offset, as_bytes(text), append ? O_APPEND : 0);
  }
  Result<size_t> append(uint64_t inode, std::string_view text) {
    return volume.write(inode, 0, as_bytes(text), O_APPEND);
  }
  Result<void> punch(uint64_t inode, uint64_t offset, uint64_t length) {
    return volume.fallocate(inode, kPunch, offset, length);
  }
  Result<Attributes> truncate(uint64_t inode, uint64_t size) {
    AttributeChanges changes;
    changes.size = size;
    return volume.setattr(inode, changes);
  }
  // Reads up to `length` bytes; "" and a test failure on error.
  std::string read(uint64_t inode, uint64_t offset, size_t length) {
    std::vector<std::byte> out(length, std::byte{'?'});
    auto n = volume.read(inode, offset, out);
    EXPECT_TRUE(n.has_value());
    if (!n) return "";
    return std::string(reinterpret_cast<const char*>(out.data()), *n);
  }
  FileStats stats(uint64_t inode) {
    auto s = volume.file_stats(inode);
    EXPECT_TRUE(s.has_value());
    return s.value_or(FileStats{});
  }
  std::vector<Extent> extents(uint64_t inode) {
    auto e = volume.file_extents(inode);
    EXPECT_TRUE(e.has_value());
    return e.value_or(std::vector<Extent>{});
  }
  Attributes attributes(uint64_t inode) {
    auto a = volume.getattr(inode);
    EXPECT_TRUE(a.has_value());
    return a.value_or(Attributes{});
  }
  DeviceStats device() { return volume.snapshot().device; }
  uint64_t device_allocated() { return device().allocated_bytes; }
  // Blocks files use on the device: everything allocated but group metadata.
  uint64_t used_bytes() {
    const DeviceStats d = device();
    return d.allocated_bytes - d.metadata_bytes;
  }
  uint64_t statfs_free() { return volume.statfs()->blocks_free; }
  // The inode `name` in `parent` names, 0 if none; takes no lasting reference.
  uint64_t inode_of(const std::string& name, uint64_t parent = kRoot) {
    auto a = volume.lookup(parent, name);
    if (!a) return 0;
    volume.forget(a->inode, 1);
    return a->inode;
  }
  // Unlinks `name` and drops the reference create() took: the file is destroyed.
  void remove(const std::string& name, uint64_t inode) {
    EXPECT_TRUE(volume.unlink(kRoot, name).has_value());
    volume.forget(inode, 1);
  }

  FixedWallClock clock;  // before engine: the volume keeps a reference
  Engine engine;         // the stack a mount uses: counting, cost, faults, volume
  FileSystem& volume = engine.fs();
};

// A Volume with one layer over it, for the layer unit tests.
template <typename L, typename... LayerArguments>
struct LayerOverVolume {
  explicit LayerOverVolume(std::string_view profile, LayerArguments... arguments)
      : volume(builtin(profile), std::make_unique<MemoryDataStore>(), clock),
        layer(volume, arguments...) {}
  FixedWallClock clock;
  Volume volume;
  L layer;
};

}  // namespace volume_fixture
}  // namespace mimicfs
