#include "fusefs/stats_command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/emulated_clock.h"
#include "fusefs/control_command.h"
#include "fusefs/control_files.h"
#include "fusefs/exit_status.h"

namespace mimicfs {
namespace {

std::string control_path(const std::string& mountpoint, std::string_view file) {
  return (std::filesystem::path(mountpoint) / ".mimicfs" / file).string();
}

// The file's key in stats.json ("/dir/name") for a path given on the command line.
std::string stats_key(const std::string& mountpoint, const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (p.is_absolute()) {
    std::error_code ec;
    fs::path mount = fs::weakly_canonical(mountpoint, ec);
    fs::path full = fs::weakly_canonical(p, ec);
    fs::path relative = full.lexically_relative(mount);
    if (!relative.empty() && *relative.begin() != "..") p = relative;
  }
  std::string key = p.lexically_normal().generic_string();
  if (!key.starts_with("/")) key = "/" + key;
  return key;
}

// "4K×12 8K×3 1M×2": an extent-size histogram on one line.
std::string histogram_line(const nlohmann::json& histogram) {
  std::vector<std::pair<uint64_t, uint64_t>> buckets;
  for (const auto& [bytes, n] : histogram.items()) {
    buckets.emplace_back(std::stoull(bytes), n.get<uint64_t>());
  }
  std::sort(buckets.begin(), buckets.end());
  std::string line;
  for (const auto& [bytes, n] : buckets) {
    std::string size = bytes >= (uint64_t{1} << 30)   ? fmt::format("{}G", bytes >> 30)
                       : bytes >= (uint64_t{1} << 20) ? fmt::format("{}M", bytes >> 20)
                       : bytes >= 1024                ? fmt::format("{}K", bytes >> 10)
                                                      : fmt::format("{}", bytes);
    line += fmt::format("{}<={}:{}", line.empty() ? "" : " ", size, n);
  }
  return line;
}

// Nanoseconds as a human reads them: "812 ns", "3.214 ms", "28.463 s".
std::string duration(uint64_t ns) {
  if (ns < 1000) return fmt::format("{} ns", ns);
  if (ns < 1'000'000) return fmt::format("{:.3f} us", ns / 1e3);
  if (ns < 1'000'000'000) return fmt::format("{:.3f} ms", ns / 1e6);
  return fmt::format("{:.3f} s", ns / 1e9);
}

void print_tables(const nlohmann::json& s) {
  const auto& d = s["device"];
  fmt::print("profile {}\n", s["profile"].get<std::string>());
  fmt::print("clock   {} ({} ns emulated), latency {}\n",
             duration(s["clock"]["emulated_ns"].get<uint64_t>()),
             s["clock"]["emulated_ns"].get<uint64_t>(), s["clock"]["mode"].get<std::string>());
  fmt::print(
      "device  unit {} B, capacity {} B, allocated {} B (metadata {} B, unreferenced {} B), "
      "reserved {} B, free extents {}, largest free {} B\n",
      d["allocation_unit"].get<uint64_t>(), d["capacity_bytes"].get<uint64_t>(),
      d["allocated_bytes"].get<uint64_t>(), d["metadata_bytes"].get<uint64_t>(),
      d["unreferenced_bytes"].get<uint64_t>(), d["reserved_bytes"].get<uint64_t>(),
      d["free_extents"].get<uint64_t>(), d["largest_free_extent_bytes"].get<uint64_t>());
  fmt::print("\n{:<12} {:>12} {:>16} {:>14}  {}\n", "operation", "count", "bytes", "emulated",
             "errors");
  for (const auto& [name, op] : s["ops"].items()) {
    std::string errors;
    for (const auto& [e, n] : op["errors"].items()) {
      errors += fmt::format("{}{}={}", errors.empty() ? "" : " ", e, n.get<uint64_t>());
    }
    fmt::print("{:<12} {:>12} {:>16} {:>14}  {}\n", name, op["count"].get<uint64_t>(),
               op["bytes"].get<uint64_t>(), duration(op["emulated_ns"].get<uint64_t>()), errors);
  }
  fmt::print(
      "\n{:<32} {:>12} {:>12} {:>8} {:>9} {:>9} {:>6} {:>10} {:>12} {:>10} {:>10} {:>14}  {}\n",
      "file", "size", "allocated", "extents", "fragments", "unwritten", "holes", "delayed",
      "prealloc", "dirty", "unsynced", "emulated", "extent sizes");
  for (const auto& [path, f] : s["files"].items()) {
    fmt::print(
        "{:<32} {:>12} {:>12} {:>8} {:>9} {:>9} {:>6} {:>10} {:>12} {:>10} {:>10} {:>14}  {}\n",
        path, f["size"].get<uint64_t>(), f["allocated_bytes"].get<uint64_t>(),
        f["extents"].get<uint64_t>(), f["fragments"].get<uint64_t>(),
        f["unwritten_extents"].get<uint64_t>(), f["holes"].get<uint64_t>(),
        f["delayed_bytes"].get<uint64_t>(), f["preallocated_bytes"].get<uint64_t>(),
        f["dirty_bytes"].get<uint64_t>(), f["unsynced_bytes"].get<uint64_t>(),
        duration(f["emulated_ns"].get<uint64_t>()), histogram_line(f["extent_size_histogram"]));
  }
  if (!s["faults"].empty()) {
    fmt::print("\n{:>8} {:>8}  {}\n", "matched", "fired", "fault rule");
    for (const auto& rule : s["faults"]) {
      fmt::print("{:>8} {:>8}  {}\n", rule["matched"].get<uint64_t>(),
                 rule["fired"].get<uint64_t>(), rule["rule"].get<std::string>());
    }
  }
}

}  // namespace

int print_stats(const std::string& mountpoint, const std::string& path, bool json) {
  const std::string file = control_path(mountpoint, "stats.json");
  std::ifstream in(file);
  if (!in) {
    fmt::print(stderr, "mimicfs stats: {} is not a mimicfs mount (cannot read {}: {})\n",
               mountpoint, file, std::strerror(errno));
    return kExitUsage;
  }
  nlohmann::json stats;
  try {
    stats = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fmt::print(stderr, "mimicfs stats: {}: malformed statistics: {}\n", file, e.what());
    return kExitFailure;
  }
  if (!path.empty()) {
    const std::string key = stats_key(mountpoint, path);
    if (!stats["files"].contains(key)) {
      fmt::print(stderr, "mimicfs stats: no regular file {} in {}\n", key, mountpoint);
      return kExitUsage;
    }
    nlohmann::json only = nlohmann::json::object();
    only[key] = stats["files"][key];
    stats["files"] = only;
  }
  if (json) {
    fmt::print("{}\n", stats.dump(2));
  } else {
    print_tables(stats);
  }
  return kExitOk;
}

int send_control(const std::string& mountpoint, const std::vector<std::string>& words) {
  std::string command;
  for (const auto& w : words) command += (command.empty() ? "" : " ") + w;
  // Checked here too, so the reason reaches the terminal, not only the mount's log.
  if (auto parsed = parse_control_command(command); !parsed) {
    fmt::print(stderr, "mimicfs ctl: {}\n", parsed.error());
    return kExitUsage;
  }
  command += "\n";
  const std::string file = control_path(mountpoint, "ctl");
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    fmt::print(stderr, "mimicfs ctl: {} is not a mimicfs mount (cannot open {}: {})\n", mountpoint,
               file, std::strerror(errno));
    return kExitUsage;
  }
  const ssize_t written = ::write(fd, command.data(), command.size());
  const int error = errno;
  ::close(fd);
  if (written < 0) {
    if (error == EINVAL) {
      fmt::print(stderr, "mimicfs ctl: the volume rejected \"{}\" (known: {}); its log says why\n",
                 command.substr(0, command.size() - 1), kControlCommands);
      return kExitUsage;
    }
    fmt::print(stderr, "mimicfs ctl: {}: {}\n", file, std::strerror(error));
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace mimicfs
