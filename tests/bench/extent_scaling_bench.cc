// SPDX-License-Identifier: Apache-2.0
// mimicfs_extent_bench: how the engine's metadata grows with the extents and
// inodes it holds, and whether operations on a file with many extents stay
// O(log n). It drives an Engine (the stack a mount uses, without FUSE), so the
// figures are the engine's own, not the kernel's round trips.
//
//   mimicfs_extent_bench [--sizes N,N,...] [--total N] [--inodes N] [--repetitions R]
//
// 1. For each size N (default 10000,100000,1000000): a file on the nfs42 profile
//    (512-byte units) gets N extents from 1-byte writes of a zero at a 4 KiB
//    stride, fsynced (zeros take no memory in the store: what is measured is
//    metadata). Printed: the heap bytes per extent, then the median and p99 of R
//    operations (default 2000) at random places: a 1-byte write into a hole
//    (a new extent), a punch of one extent, SEEK_DATA and SEEK_HOLE, and the
//    file's stats; and each one's growth from the smallest size to the largest;
//    and the volume image a --data-dir unmount writes: its size, and the time
//    to save it (sync, encode) and to load it into a new engine.
// 2. --total N (default 10000000): N extents across 10 files in one volume,
//    and the process's RSS with them; then every other extent punched (a
//    hole-punched table): the heap with half the extents and the device's free
//    space in as many pieces.
// 3. --inodes N (default 100000): N empty files in 100 directories; heap bytes
//    per inode.
//
// Heap bytes are glibc's mallinfo2 (in use, plus chunks mmapped). Exit status 0
// when it ran, 1 when an engine call failed, 2 on bad arguments.

#include <fcntl.h>
#include <fmt/core.h>
#include <linux/falloc.h>
#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/data/memory_data_store.h"
#include "engine/engine.h"
#include "engine/profile/profile.h"

namespace mimicfs {
namespace {

constexpr uint64_t kStride = 4096;
constexpr uint64_t kUnit = 512;  // nfs42's allocation unit: a 1-byte write is one unit

class FixedClock final : public WallClock {
 public:
  timespec now() const override { return {1'700'000'000, 0}; }
};

uint64_t heap_bytes() {
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

uint64_t rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  uint64_t kib = 0;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

template <typename T>
T ok(Result<T> result, const char* what) {
  if (!result) {
    throw std::runtime_error(fmt::format("{}: {}", what, errno_name(result.error().value)));
  }
  if constexpr (!std::is_void_v<T>) return std::move(*result);
}

struct Volume {
  FixedClock clock;
  Engine engine;
  FileSystem& fs;

  Volume() : engine(profile(), std::make_unique<MemoryDataStore>(), clock), fs(engine.fs()) {}

  static Profile profile() {
    auto p = load_builtin_profile("nfs42");
    if (!p) throw std::runtime_error(p.error());
    // Room for 10 files of a million 4 KiB strides, whatever nfs42's capacity.
    auto big = apply_overrides(*p, {"device.capacity_bytes=1099511627776"});
    if (!big) throw std::runtime_error(big.error());
    return *big;
  }

  uint64_t create(uint64_t parent, const std::string& name) {
    const uint64_t inode =
        ok(fs.create(parent, name, S_IFREG | 0644, 0, Owner{0, 0}, /*open_handle=*/true),
           "create")
            .inode;
    return inode;
  }

  // `extents` 1-byte writes of a zero at a 4 KiB stride, then fsync.
  void fill(uint64_t inode, uint64_t extents) {
    static const std::byte zero{0};
    for (uint64_t i = 0; i < extents; ++i) {
      ok(fs.write(inode, i * kStride, std::span(&zero, 1)), "write");
    }
    ok(fs.fsync(inode, false), "fsync");
  }
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Timing {
  double median_ns = 0;
  double p99_ns = 0;
};

template <typename Operation>
Timing time_operation(int repetitions, Operation&& operation) {
  std::vector<double> samples;
  samples.reserve(repetitions);
  for (int i = 0; i < repetitions; ++i) {
    const auto start = std::chrono::steady_clock::now();
    operation(i);
    samples.push_back(
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples[std::min(samples.size() - 1, samples.size() * 99 / 100)]};
}

const std::vector<std::string> kOperations = {"write into a hole", "punch one extent",
                                              "SEEK_DATA", "SEEK_HOLE", "file stats"};

// Builds a file of `extents` extents and times each operation on it.
std::map<std::string, Timing> measure_size(uint64_t extents, int repetitions) {
  const uint64_t heap_before = heap_bytes();
  Volume volume;
  const uint64_t inode = volume.create(FileSystem::kRootInode, "table");
  const uint64_t heap_empty = heap_bytes();
  const auto start = std::chrono::steady_clock::now();
  volume.fill(inode, extents);
  const double build_s = seconds_since(start);
  const uint64_t heap_full = heap_bytes();
  const uint64_t counted = ok(volume.fs.file_stats(inode), "file_stats").extents;
  fmt::print("{:>9} extents ({} counted): built in {:.2f} s, {:.0f} heap bytes per extent "
             "(volume: {:.1f} MiB)\n",
             extents, counted, build_s,
             static_cast<double>(heap_full - heap_empty) / static_cast<double>(extents),
             static_cast<double>(heap_full - heap_before) / (1 << 20));

  std::mt19937_64 random(42);
  auto stride = [&] { return random() % extents; };
  static const std::byte zero{0};
  std::map<std::string, Timing> timings;
  // A new extent in the hole after a stride's unit (the write and the punch
  // keep the count near N).
  timings["write into a hole"] = time_operation(repetitions, [&](int) {
    ok(volume.fs.write(inode, stride() * kStride + 2 * kUnit, std::span(&zero, 1)), "write");
  });
  timings["punch one extent"] = time_operation(repetitions, [&](int) {
    ok(volume.fs.fallocate(inode, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, stride() * kStride,
                           kUnit),
       "punch");
  });
  timings["SEEK_DATA"] = time_operation(repetitions, [&](int) {
    (void)volume.fs.seek(inode, stride() * kStride + kUnit, SEEK_DATA);  // ENXIO past the last
  });
  timings["SEEK_HOLE"] = time_operation(repetitions, [&](int) {
    ok(volume.fs.seek(inode, stride() * kStride, SEEK_HOLE), "seek");
  });
  timings["file stats"] = time_operation(repetitions, [&](int) {
    ok(volume.fs.file_stats(inode), "file_stats");
  });
  for (const std::string& name : kOperations) {
    fmt::print("  {:<20} median {:>9.0f} ns   p99 {:>9.0f} ns\n", name, timings[name].median_ns,
               timings[name].p99_ns);
  }
  // The volume image a --data-dir unmount writes and the next mount reads.
  auto phase = std::chrono::steady_clock::now();
  const std::vector<std::uint8_t> cbor = ImageJson::to_cbor(volume.engine.save_image());
  const double save_s = seconds_since(phase);
  phase = std::chrono::steady_clock::now();
  Volume restored;
  restored.engine.load_image(ImageJson::from_cbor(cbor));
  const double load_s = seconds_since(phase);
  fmt::print("  {:<20} {:.1f} MiB; saved in {:.2f} s, loaded in {:.2f} s\n", "volume image",
             static_cast<double>(cbor.size()) / (1 << 20), save_s, load_s);
  return timings;
}

void measure_total(uint64_t total) {
  const uint64_t rss_before = rss_bytes();
  const uint64_t heap_before = heap_bytes();
  Volume volume;
  constexpr uint64_t kFiles = 10;
  auto start = std::chrono::steady_clock::now();
  std::vector<uint64_t> inodes;
  for (uint64_t f = 0; f < kFiles; ++f) {
    inodes.push_back(volume.create(FileSystem::kRootInode, fmt::format("file{}", f)));
    volume.fill(inodes.back(), total / kFiles);
  }
  const double build_s = seconds_since(start);
  fmt::print("\n{} extents in {} files (built in {:.1f} s): process RSS {:.0f} MiB (was {:.0f}), "
             "heap {:.0f} MiB, {:.0f} bytes per extent\n",
             total, kFiles, build_s, static_cast<double>(rss_bytes()) / (1 << 20),
             static_cast<double>(rss_before) / (1 << 20),
             static_cast<double>(heap_bytes() - heap_before) / (1 << 20),
             static_cast<double>(heap_bytes() - heap_before) / static_cast<double>(total));
  // A hole-punched table's volume: every other extent punched, so the device's
  // free space is in as many pieces as the files have extents left.
  start = std::chrono::steady_clock::now();
  for (const uint64_t inode : inodes) {
    for (uint64_t i = 0; i < total / kFiles; i += 2) {
      ok(volume.fs.fallocate(inode, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, i * kStride,
                             kUnit),
         "punch");
    }
    ok(volume.fs.fsync(inode, false), "fsync");
  }
  const double punch_s = seconds_since(start);
  const uint64_t free_extents = volume.fs.snapshot().device.free_extents;
  fmt::print("every other extent punched (in {:.1f} s): {} free extents on the device, heap {:.0f} "
             "MiB, {:.0f} bytes per extent and free extent\n",
             punch_s, free_extents, static_cast<double>(heap_bytes() - heap_before) / (1 << 20),
             static_cast<double>(heap_bytes() - heap_before) /
                 static_cast<double>(total - total / 2 + free_extents));
}

void measure_inodes(uint64_t count) {
  const uint64_t heap_before = heap_bytes();
  Volume volume;
  constexpr uint64_t kDirectories = 100;
  std::vector<uint64_t> directories;
  for (uint64_t d = 0; d < kDirectories; ++d) {
    directories.push_back(
        ok(volume.fs.mkdir(FileSystem::kRootInode, fmt::format("d{}", d), 0755, Owner{0, 0}),
           "mkdir")
            .inode);
  }
  const uint64_t heap_dirs = heap_bytes();
  for (uint64_t i = 0; i < count; ++i) {
    ok(volume.fs.create(directories[i % kDirectories], fmt::format("f{}", i), S_IFREG | 0644, 0,
                        Owner{0, 0}),
       "create");
  }
  fmt::print("\n{} empty files in {} directories: {:.0f} heap bytes per inode (with its entry "
             "and name; volume {:.1f} MiB)\n",
             count, kDirectories,
             static_cast<double>(heap_bytes() - heap_dirs) / static_cast<double>(count),
             static_cast<double>(heap_bytes() - heap_before) / (1 << 20));
}

int usage(const std::string& why) {
  fmt::print(stderr,
             "mimicfs_extent_bench: {}\nusage: mimicfs_extent_bench [--sizes N,N,...] "
             "[--total N] [--inodes N] [--repetitions R]\n",
             why);
  return 2;
}

int run(int argc, char** argv) {
  std::vector<uint64_t> sizes = {10'000, 100'000, 1'000'000};
  uint64_t total = 10'000'000, inodes = 100'000;
  int repetitions = 2000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage(fmt::format("{} needs a value", arg));
    const std::string value = argv[++i];
    try {
      if (arg == "--sizes") {
        sizes.clear();
        size_t at = 0;
        while (at <= value.size()) {
          const size_t comma = value.find(',', at);
          sizes.push_back(std::stoull(value.substr(at, comma - at)));
          if (sizes.back() == 0) return usage("--sizes: each size must be positive");
          if (comma == std::string::npos) break;
          at = comma + 1;
        }
      } else if (arg == "--total") {
        total = std::stoull(value);
      } else if (arg == "--inodes") {
        inodes = std::stoull(value);
      } else if (arg == "--repetitions") {
        repetitions = std::stoi(value);
        if (repetitions <= 0) return usage("--repetitions must be positive");
      } else {
        return usage(fmt::format("unknown argument '{}'", arg));
      }
    } catch (const std::exception&) {
      return usage(fmt::format("{}: not a number: '{}'", arg, value));
    }
  }
  std::sort(sizes.begin(), sizes.end());
  std::vector<std::map<std::string, Timing>> results;
  for (uint64_t size : sizes) results.push_back(measure_size(size, repetitions));
  if (sizes.size() > 1) {
    fmt::print("\ngrowth of the median from {} to {} extents ({}x the extents; O(log n) "
               "gives about {:.1f}x, O(n) {}x):\n",
               sizes.front(), sizes.back(), sizes.back() / sizes.front(),
               std::log2(static_cast<double>(sizes.back())) /
                   std::log2(static_cast<double>(sizes.front())),
               sizes.back() / sizes.front());
    for (const std::string& name : kOperations) {
      fmt::print("  {:<20} {:.2f}x\n", name,
                 results.back()[name].median_ns / results.front()[name].median_ns);
    }
  }
  if (total > 0) measure_total(total);
  if (inodes > 0) measure_inodes(inodes);
  return 0;
}

}  // namespace
}  // namespace mimicfs

int main(int argc, char** argv) {
  try {
    return mimicfs::run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "mimicfs_extent_bench: {}\n", e.what());
    return 1;
  }
}
