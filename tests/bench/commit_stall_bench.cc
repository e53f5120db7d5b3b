// SPDX-License-Identifier: Apache-2.0
// mimicfs_commit_bench: how long a small-file writer waits while a commit
// carries many removals, beside the same writer alone.
//
//   mimicfs_commit_bench [--removals N] [--seconds S] LABEL=DIR [LABEL=DIR ...]
//
// In each DIR (a mounted volume, or any directory for reference): N empty
// files are created in DIR/removed and synced (syncfs), then all unlinked, so
// that a filesystem with a journal or a log tree holds N removals not yet
// committed. A writer thread then creates, writes 4 KiB to, fsyncs and closes
// files in DIR/writer for S seconds, while the main thread fsyncs DIR/removed
// (on btrfs that commits every removal in it; on a journal, everything) and
// then DIR/writer/.. (each commit in turn). Printed per DIR: the committing
// fsync's time, and the writer's median and worst operation with the
// removals pending and committing, beside the writer alone (before the
// removals). No figure passes or fails.
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void check(bool ok, const std::string& what) {
  if (!ok) throw std::system_error(errno, std::generic_category(), what);
}

void fsync_path(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY);
  check(fd >= 0, "open " + path);
  check(fsync(fd) == 0, "fsync " + path);
  close(fd);
}

struct Latencies {
  double median_ms = 0;
  double worst_ms = 0;
  size_t count = 0;
};

Latencies summarize(std::vector<double> ms) {
  if (ms.empty()) return {};
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.back(), ms.size()};
}

// Creates, writes 4 KiB to, fsyncs and closes files in `dir` until `stop`;
// each one's milliseconds.
std::vector<double> write_small_files(const std::string& dir, const std::atomic<bool>& stop,
                                      int& next) {
  static const std::string page(4096, 'w');
  std::vector<double> ms;
  while (!stop.load()) {
    const std::string path = dir + "/f" + std::to_string(next++);
    const auto start = Clock::now();
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    check(fd >= 0, "create " + path);
    check(write(fd, page.data(), page.size()) == static_cast<ssize_t>(page.size()), "write " + path);
    check(fsync(fd) == 0, "fsync " + path);
    close(fd);
    ms.push_back(ms_since(start));
  }
  return ms;
}

void run(const std::string& label, const std::string& dir, int removals, double seconds) {
  const std::string removed = dir + "/removed", writer = dir + "/writer";
  check(mkdir(removed.c_str(), 0755) == 0, "mkdir " + removed);
  check(mkdir(writer.c_str(), 0755) == 0, "mkdir " + writer);
  int next = 0;

  std::atomic<bool> stop{false};
  std::thread alone_timer([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
  });
  const Latencies alone = summarize(write_small_files(writer, stop, next));
  alone_timer.join();

  for (int i = 0; i < removals; ++i) {
    const std::string path = removed + "/r" + std::to_string(i);
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0644);
    check(fd >= 0, "create " + path);
    close(fd);
  }
  const int dirfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  check(dirfd >= 0 && syncfs(dirfd) == 0, "syncfs " + dir);
  close(dirfd);
  const auto unlink_start = Clock::now();
  for (int i = 0; i < removals; ++i) {
    const std::string path = removed + "/r" + std::to_string(i);
    check(unlink(path.c_str()) == 0, "unlink " + path);
  }
  const double unlink_ms = ms_since(unlink_start);

  stop = false;
  std::vector<double> during;
  std::thread writer_thread([&] { during = write_small_files(writer, stop, next); });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds / 2));
  const auto commit_start = Clock::now();
  fsync_path(removed);
  const double commit_ms = ms_since(commit_start);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds / 2));
  stop = true;
  writer_thread.join();
  const Latencies with = summarize(during);

  fmt::print("{:<16} {:>9} removals: unlink {:8.1f} ms, committing fsync {:8.1f} ms\n", label,
             removals, unlink_ms, commit_ms);
  fmt::print("{:<16} writer alone      {:6} ops, median {:7.3f} ms, worst {:8.3f} ms\n", "",
             alone.count, alone.median_ms, alone.worst_ms);
  fmt::print("{:<16} writer beside it  {:6} ops, median {:7.3f} ms, worst {:8.3f} ms "
             "(worst {:.1f}x alone)\n",
             "", with.count, with.median_ms, with.worst_ms,
             alone.worst_ms > 0 ? with.worst_ms / alone.worst_ms : 0.0);
  for (int i = 0; i < next; ++i) unlink((writer + "/f" + std::to_string(i)).c_str());
  rmdir(writer.c_str());
  rmdir(removed.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int removals = 100000;
  double seconds = 4;
  std::vector<std::pair<std::string, std::string>> targets;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--removals" || arg == "--seconds") && i + 1 < argc) {
      char* end = nullptr;
      const double value = std::strtod(argv[++i], &end);
      if (*end != '\0' || value <= 0) {
        fmt::print(stderr, "mimicfs_commit_bench: {} needs a positive number\n", arg);
        return 2;
      }
      (arg == "--removals" ? removals = static_cast<int>(value) : seconds = value);
      continue;
    }
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
      fmt::print(stderr, "mimicfs_commit_bench: expected LABEL=DIR, got \"{}\"\n", arg);
      return 2;
    }
    targets.emplace_back(arg.substr(0, eq), arg.substr(eq + 1));
  }
  if (targets.empty()) {
    fmt::print(stderr,
               "usage: mimicfs_commit_bench [--removals N] [--seconds S] LABEL=DIR ...\n");
    return 2;
  }
  try {
    for (const auto& [label, dir] : targets) run(label, dir, removals, seconds);
  } catch (const std::exception& e) {
    fmt::print(stderr, "mimicfs_commit_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
