// SPDX-License-Identifier: Apache-2.0
// mimicfs-workload: one seed workload (workloads/seed_workloads.h) on any
// directory or file, so real filesystems run exactly what the emulated ones do
// (scripts/measure-real-fs.sh).
//
//   mimicfs-workload extend FILE --how posix_fallocate [--size-mib 64]
//   mimicfs-workload grow FILE [--pages 2000] [--per-extension 1]
//   mimicfs-workload concurrent DIR [--writers 4] [--size-mib 128] [--reserve]
//   mimicfs-workload punch FILE [--size-mib 64]
//   mimicfs-workload call punch|fallocate|overwrite FILE [--size-mib 64] [--pages 512]
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "workloads/seed_workloads.h"

namespace {

using namespace mimicfs::workloads;

// Opens `path` (created if missing), runs `body` on it, fsyncs and closes.
Outcome on_file(const std::string& path, int flags, const std::function<Outcome(int)>& body) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | flags, 0644);
  if (fd < 0) return std::unexpected(fmt::format("cannot open {}: {}", path, strerror(errno)));
  Outcome outcome = body(fd);
  if (outcome && fsync(fd) != 0)
    outcome = std::unexpected(fmt::format("fsync: {}", strerror(errno)));
  if (close(fd) != 0 && outcome)
    outcome = std::unexpected(fmt::format("close: {}", strerror(errno)));
  return outcome;
}

// Opens `path` with `flags` and runs `body` on it: no fsync, so a timed phase
// holds the calls alone.
Outcome on_open_file(const std::string& path, int flags, const std::function<Outcome(int)>& body) {
  const int fd = open(path.c_str(), O_RDWR | flags, 0644);
  if (fd < 0) return std::unexpected(fmt::format("cannot open {}: {}", path, strerror(errno)));
  Outcome outcome = body(fd);
  if (close(fd) != 0 && outcome)
    outcome = std::unexpected(fmt::format("close: {}", strerror(errno)));
  return outcome;
}

int run(int argc, char** argv) {
  CLI::App app{"Runs one seed workload on any filesystem", "mimicfs-workload"};
  app.require_subcommand(1);
  std::string target, how = "posix_fallocate";
  off_t size_mib = 0;
  int pages = 2000, per_extension = 1;
  Writers writers;
  bool reserve = false;

  auto* extend_cmd = app.add_subcommand("extend", "seed 000: extend FILE, then write its pages");
  extend_cmd->add_option("FILE", target)->required();
  extend_cmd->add_option("--how", how, std::string(kExtensionNames));
  extend_cmd->add_option("--size-mib", size_mib, "default 64")->check(CLI::Range(1, 1 << 20));
  auto* grow_cmd = app.add_subcommand("grow", "seed 001: grow FILE page by page, fsync per step");
  grow_cmd->add_option("FILE", target)->required();
  grow_cmd->add_option("--pages", pages, "16 KiB pages (default 2000)")
      ->check(CLI::Range(1, 1 << 20));
  grow_cmd->add_option("--per-extension", per_extension, "pages per extension (default 1)")
      ->check(CLI::Range(1, 1 << 20));
  auto* concurrent_cmd =
      app.add_subcommand("concurrent", "seed 003: writers zero-fill DIR/datafileN at once");
  concurrent_cmd->add_option("DIR", target)->required();
  concurrent_cmd->add_option("--writers", writers.count, "default 4")->check(CLI::Range(1, 64));
  concurrent_cmd->add_option("--size-mib", size_mib, "per file (default 128)")
      ->check(CLI::Range(1, 1 << 20));
  concurrent_cmd->add_flag("--reserve", reserve, "fallocate(KEEP_SIZE) each file first");
  auto* punch_cmd =
      app.add_subcommand("punch", "seed 004: write FILE, then punch the last 8 KiB of each page");
  punch_cmd->add_option("FILE", target)->required();
  punch_cmd->add_option("--size-mib", size_mib, "default 64")->check(CLI::Range(1, 1 << 20));
  std::string op;
  auto* call_cmd = app.add_subcommand(
      "call", "one operation repeated, for its per-call time: punch (FILE exists; the last "
              "8 KiB of each 16 KiB page), fallocate (a new FILE, a page per call), overwrite "
              "(FILE exists; a page in place, then fdatasync)");
  call_cmd->add_option("OP", op)->required()->check(
      CLI::IsMember({"punch", "fallocate", "overwrite"}));
  call_cmd->add_option("FILE", target)->required();
  call_cmd->add_option("--size-mib", size_mib, "punch and fallocate: bytes covered (default 64)")
      ->check(CLI::Range(1, 1 << 20));
  call_cmd->add_option("--pages", pages, "overwrite: pages (default 512)")
      ->check(CLI::Range(1, 1 << 20));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "mimicfs-workload: {} (try --help)\n", e.what());
    return 2;
  }

  Outcome outcome;
  if (extend_cmd->parsed()) {
    const auto extension = extension_named(how);
    if (!extension) {
      fmt::print(stderr, "mimicfs-workload: unknown --how \"{}\" (known: {})\n", how,
                 kExtensionNames);
      return 2;
    }
    const off_t size = (size_mib ? size_mib : 64) * kMiB;
    outcome = on_file(target, 0, [&](int fd) -> Outcome {
      if (auto r = extend(fd, size, *extension); !r) return r;
      return write_range(fd, 0, size, kInnodbPage, 'p');
    });
  } else if (grow_cmd->parsed()) {
    outcome = on_file(target, O_TRUNC, [&](int fd) { return grow(fd, pages, per_extension); });
  } else if (concurrent_cmd->parsed()) {
    writers.file_size = (size_mib ? size_mib : 128) * kMiB;
    writers.reserve_first = reserve;
    outcome = concurrent_writers(target, writers);
  } else if (punch_cmd->parsed()) {
    const off_t size = (size_mib ? size_mib : 64) * kMiB;
    outcome = on_file(target, O_TRUNC, [&](int fd) { return write_range(fd, 0, size, kMiB, 'p'); });
    if (outcome) {
      outcome = on_file(target, 0, [&](int fd) { return punch_page_tails(fd, size); });
    }
  } else if (call_cmd->parsed()) {
    const off_t size = (size_mib ? size_mib : 64) * kMiB;
    if (op == "punch") {
      outcome = on_open_file(target, 0, [&](int fd) { return punch_page_tails(fd, size); });
    } else if (op == "fallocate") {
      outcome = on_open_file(target, O_CREAT | O_EXCL,
                             [&](int fd) { return fallocate_pages(fd, size); });
    } else {
      const int count = call_cmd->count("--pages") ? pages : 512;
      outcome = on_open_file(target, 0, [&](int fd) { return overwrite_pages_synced(fd, count); });
    }
  }
  if (!outcome) {
    fmt::print(stderr, "mimicfs-workload: {}\n", outcome.error());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "mimicfs-workload: {}\n", e.what());
    return 1;
  }
}
