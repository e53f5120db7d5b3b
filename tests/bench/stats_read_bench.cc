// SPDX-License-Identifier: Apache-2.0
// mimicfs_stats_bench: how long reading MOUNT/.mimicfs/stats.json takes on a
// volume holding many extents, and whether the snapshot holds writers up.
//
//   mimicfs_stats_bench [--extents N] [--seconds S] [--json] MOUNT
//
// MOUNT must be a mimicfs mount whose profile gives one extent per 1-byte write
// at a 4 KiB stride (nfs: 512-byte units, glibc's posix_fallocate pattern, seed
// 000). The program
//   1. builds N extents (default 1,000,000) in four files, one writer each;
//   2. runs a writer of 4 KiB pwrite()s at random offsets of another file for S
//      seconds (default 5) alone, then again for S seconds while this thread
//      reads stats.json back to back;
//   3. prints the read latencies (median, p95, max), the writer's rate and its
//      slowest write alone and during the reads, and removes its files.
// A snapshot that blocks writers for its duration shows as a slowest write as
// long as a read; one that does not leaves the writer's figures as they were.
//
// Exit status: 0 when it ran, 1 when a step failed, 2 on bad arguments.

#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kBlock = 4096;
constexpr int kExtentFiles = 4;
constexpr uint64_t kWriterFileBytes = 64ull << 20;

std::system_error sys_error(const std::string& what) {
  return std::system_error(errno, std::generic_category(), what);
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::ranges::sort(values);
  const auto index = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

// One byte at the end of each 4 KiB block of [0, blocks * 4 KiB): one extent per
// block on the nfs profile.
void write_strided(const std::string& path, uint64_t blocks) {
  const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) throw sys_error("open " + path);
  const char byte = 0;  // as glibc writes: no data page is stored, only the extent
  for (uint64_t i = 0; i < blocks; ++i) {
    if (pwrite(fd, &byte, 1, static_cast<off_t>((i + 1) * kBlock - 1)) != 1) {
      const auto error = sys_error("pwrite " + path);
      close(fd);
      throw error;
    }
  }
  if (close(fd) != 0) throw sys_error("close " + path);
}

std::string read_whole(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw sys_error("open " + path);
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0) {
      const auto error = sys_error("read " + path);
      close(fd);
      throw error;
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

struct WriterFigures {
  double writes_per_second = 0;
  double slowest_ms = 0;
  double p99_ms = 0;
};

// 4 KiB pwrite()s at random offsets until `stop`; the latency of each.
WriterFigures run_writer(const std::string& path, const std::atomic<bool>& stop,
                         std::string& error) {
  WriterFigures figures;
  const int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = fmt::format("open {}: {}", path, std::strerror(errno));
    return figures;
  }
  std::vector<char> block(kBlock, 'w');
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<uint64_t> pick(0, kWriterFileBytes / kBlock - 1);
  std::vector<double> latencies;
  const auto start = Clock::now();
  while (!stop.load(std::memory_order_relaxed)) {
    const auto before = Clock::now();
    if (pwrite(fd, block.data(), kBlock, static_cast<off_t>(pick(rng) * kBlock)) !=
        static_cast<ssize_t>(kBlock)) {
      error = fmt::format("pwrite {}: {}", path, std::strerror(errno));
      break;
    }
    latencies.push_back(ms_since(before));
  }
  const double seconds = ms_since(start) / 1000;
  close(fd);
  figures.writes_per_second = static_cast<double>(latencies.size()) / seconds;
  figures.slowest_ms = latencies.empty() ? 0 : std::ranges::max(latencies);
  figures.p99_ms = percentile(latencies, 0.99);
  return figures;
}

struct Options {
  uint64_t extents = 1'000'000;
  double seconds = 5;
  bool json = false;
  std::string mount;
};

[[noreturn]] void usage(const std::string& message) {
  fmt::print(stderr, "mimicfs_stats_bench: {} (usage: [--extents N] [--seconds S] [--json] MOUNT)\n",
             message);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> double {
      if (i + 1 >= argc) usage(arg + " needs a value");
      char* end = nullptr;
      const double v = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(v > 0)) usage(fmt::format("{}: not a positive number: {}", arg, argv[i]));
      return v;
    };
    if (arg == "--extents") {
      options.extents = static_cast<uint64_t>(value());
    } else if (arg == "--seconds") {
      options.seconds = value();
    } else if (arg == "--json") {
      options.json = true;
    } else if (arg.starts_with("-")) {
      usage("unknown option " + arg);
    } else if (options.mount.empty()) {
      options.mount = arg;
    } else {
      usage("one MOUNT only");
    }
  }
  if (options.mount.empty()) usage("no MOUNT given");
  if (access((options.mount + "/.mimicfs/stats.json").c_str(), R_OK) != 0) {
    usage(fmt::format("{} is not a mimicfs mount (no .mimicfs/stats.json)", options.mount));
  }
  return options;
}

int run(const Options& options) {
  const std::string base = fmt::format("{}/.stats-bench-{}", options.mount, getpid());
  const std::string stats_path = options.mount + "/.mimicfs/stats.json";
  std::vector<std::string> paths;
  for (int i = 0; i < kExtentFiles; ++i) paths.push_back(fmt::format("{}-extents{}", base, i));
  const std::string writer_path = base + "-writer";
  struct Cleanup {
    std::vector<std::string> paths;
    ~Cleanup() {
      for (const auto& p : paths) unlink(p.c_str());
    }
  } cleanup{paths};
  cleanup.paths.push_back(writer_path);

  // 1. The extents, four writers at once.
  const auto setup_start = Clock::now();
  std::vector<std::thread> builders;
  std::vector<std::string> errors(kExtentFiles);
  for (int i = 0; i < kExtentFiles; ++i) {
    builders.emplace_back([&, i] {
      try {
        write_strided(paths[i], options.extents / kExtentFiles);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : builders) t.join();
  for (const auto& e : errors) {
    if (!e.empty()) throw std::runtime_error(e);
  }
  const double setup_seconds = ms_since(setup_start) / 1000;

  // The writer's file exists and is full before either timed run.
  {
    std::atomic<bool> stop{false};
    std::string error;
    std::thread filler([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      stop = true;
    });
    run_writer(writer_path, stop, error);
    filler.join();
    if (!error.empty()) throw std::runtime_error(error);
  }

  const auto timed = std::chrono::duration<double>(options.seconds);
  auto timed_writer = [&](bool with_reads, std::vector<double>& read_ms, size_t& stats_bytes,
                          uint64_t& extents_seen) {
    std::atomic<bool> stop{false};
    std::string error;
    WriterFigures figures;
    std::thread writer([&] { figures = run_writer(writer_path, stop, error); });
    const auto start = Clock::now();
    std::string read_error;
    while (Clock::now() - start < timed) {
      if (!with_reads) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      const auto before = Clock::now();
      try {
        std::string text = read_whole(stats_path);
        read_ms.push_back(ms_since(before));
        stats_bytes = text.size();
        if (extents_seen == 0) {
          const auto stats = nlohmann::json::parse(text);
          for (const auto& [name, file] : stats.at("files").items()) {
            extents_seen += file.at("extents").get<uint64_t>();
          }
        }
      } catch (const std::exception& e) {
        read_error = e.what();
        break;
      }
    }
    stop = true;
    writer.join();
    if (!error.empty()) throw std::runtime_error(error);
    if (!read_error.empty()) throw std::runtime_error(read_error);
    return figures;
  };
  std::vector<double> unused;
  size_t stats_bytes = 0;
  uint64_t extents_seen = 0;
  const WriterFigures alone = timed_writer(false, unused, stats_bytes, extents_seen);
  std::vector<double> read_ms;
  const WriterFigures during = timed_writer(true, read_ms, stats_bytes, extents_seen);

  const double median = percentile(read_ms, 0.5);
  const double p95 = percentile(read_ms, 0.95);
  const double slowest = read_ms.empty() ? 0 : std::ranges::max(read_ms);
  if (options.json) {
    nlohmann::ordered_json out = {
        {"extents", extents_seen},
        {"setup_seconds", setup_seconds},
        {"stats_json_bytes", stats_bytes},
        {"reads", read_ms.size()},
        {"read_ms", {{"median", median}, {"p95", p95}, {"max", slowest}}},
        {"writer_alone", {{"writes_per_second", alone.writes_per_second},
                          {"p99_ms", alone.p99_ms}, {"slowest_ms", alone.slowest_ms}}},
        {"writer_during_reads", {{"writes_per_second", during.writes_per_second},
                                 {"p99_ms", during.p99_ms}, {"slowest_ms", during.slowest_ms}}}};
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print("stats.json with {} extents ({:.1f} MiB of JSON; built in {:.1f} s):\n",
               extents_seen, static_cast<double>(stats_bytes) / (1 << 20), setup_seconds);
    fmt::print("  read: median {:.1f} ms, p95 {:.1f} ms, max {:.1f} ms ({} reads in {:.0f} s)\n",
               median, p95, slowest, read_ms.size(), options.seconds);
    fmt::print("  writer alone:        {:>8.0f} writes/s, p99 {:.2f} ms, slowest {:.1f} ms\n",
               alone.writes_per_second, alone.p99_ms, alone.slowest_ms);
    fmt::print("  writer during reads: {:>8.0f} writes/s, p99 {:.2f} ms, slowest {:.1f} ms\n",
               during.writes_per_second, during.p99_ms, during.slowest_ms);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    return run(options);
  } catch (const std::exception& e) {
    fmt::print(stderr, "mimicfs_stats_bench: {}\n", e.what());
    return 1;
  }
}
