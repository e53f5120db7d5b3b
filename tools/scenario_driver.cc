// SPDX-License-Identifier: Apache-2.0
// mimicfs-scenarios: each seed's competing strategies, side by side, per profile.
//
// Every (scenario, profile, strategy) runs on a fresh volume through
// `mimicfs run`, which re-invokes this program with --perform to do the
// strategy's syscalls on $MIMICFS_MOUNT; the final stats.json is what the table
// shows. One table per scenario, or --json for machines.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/falloc.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "workloads/seed_workloads.h"

#ifndef MIMICFS_BINARY
#define MIMICFS_BINARY "mimicfs"
#endif
#ifndef MIMICFS_SOURCE_DIR
#define MIMICFS_SOURCE_DIR "."
#endif

namespace {

namespace workloads = mimicfs::workloads;
using workloads::kKiB;
using workloads::kMiB;
constexpr off_t kPage = workloads::kInnodbPage;

using Strategy = std::function<bool(const std::string& mount)>;

struct Scenario {
  std::string name;
  std::string seed_and_question;
  std::vector<std::string> default_profiles;
  std::vector<std::pair<std::string, Strategy>> strategies;
  // The table's columns after strategy and profile, as (header, note): what the
  // strategy noted (note()) rather than the stats' usual columns.
  std::vector<std::pair<std::string, std::string>> noted_columns = {};
};

// What a strategy saw for its table (noted_columns), kept in the file
// $MIMICFS_SCENARIO_NOTES that the driver reads after the run.
void note(const std::string& key, const nlohmann::json& value) {
  const char* path = std::getenv("MIMICFS_SCENARIO_NOTES");
  if (path == nullptr) return;
  nlohmann::json notes = nlohmann::json::object();
  if (std::ifstream in(path); in) notes = nlohmann::json::parse(in, nullptr, false);
  if (!notes.is_object()) notes = nlohmann::json::object();
  notes[key] = value;
  std::ofstream(path) << notes.dump();
}

std::string errno_name(int error) {
  if (error == 0) return "ok";
  const char* name = strerrorname_np(error);
  return name != nullptr ? name : std::to_string(error);
}

// The names in `dir` but "." and "..".
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      if (std::string_view(e->d_name) != "." && std::string_view(e->d_name) != "..") {
        names.emplace_back(e->d_name);
      }
    }
    closedir(d);
  }
  return names;
}

// A strategy's outcome: true, or false after saying what failed.
bool succeeded(const workloads::Outcome& outcome) {
  if (!outcome) fmt::print(stderr, "mimicfs-scenarios: {}\n", outcome.error());
  return outcome.has_value();
}

// Opens `path` (created if missing), runs `body`, fsyncs (with `sync`) and closes.
bool on_file(const std::string& path, const std::function<workloads::Outcome(int)>& body,
             bool sync = true) {
  const int fd = open(path.c_str(), O_CREAT | O_RDWR, 0644);
  if (fd < 0) {
    return succeeded(std::unexpected(fmt::format("cannot open {}: {}", path, strerror(errno))));
  }
  bool ok = succeeded(body(fd));
  if (ok && sync && fsync(fd) != 0) {
    ok = succeeded(std::unexpected(fmt::format("fsync {}: {}", path, strerror(errno))));
  }
  if (close(fd) != 0 && ok) {
    ok = succeeded(std::unexpected(fmt::format("close {}: {}", path, strerror(errno))));
  }
  return ok;
}

// Seed 000: extend a tablespace to 64 MiB, then write it as 16 KiB pages.
constexpr off_t kExtendSize = 64 * kMiB;

Scenario extend_scenario() {
  Scenario scenario{"extend",
                    "seed 000: how to extend a file to 64 MiB before writing its pages",
                    {"nfs", "nfs42", "ext4"},
                    {}};
  for (const auto how :
       {workloads::Extension::kPosixFallocate, workloads::Extension::kFallocateOrZeros,
        workloads::Extension::kZeros, workloads::Extension::kFtruncate}) {
    scenario.strategies.emplace_back(
        std::string(workloads::name_of(how)), [how](const std::string& m) {
          return on_file(m + "/t1.ibd", [how](int fd) -> workloads::Outcome {
            if (auto r = workloads::extend(fd, kExtendSize, how); !r) return r;
            return workloads::write_range(fd, 0, kExtendSize, kPage, 'p');
          });
        });
  }
  return scenario;
}

// Seed 001: grow a tablespace by 2000 pages, with an fsync after each extension.
Scenario grow_scenario() {
  auto grow = [](int per_extension) {
    return [per_extension](const std::string& m) {
      return on_file(m + "/t1.ibd",
                     [per_extension](int fd) { return workloads::grow(fd, 2000, per_extension); });
    };
  };
  return {"grow",
          "seed 001: extend 2000 pages one page per fsync, or 128 pages per fsync",
          {"ext4", "nfs"},
          {{"1_page_per_fsync", grow(1)}, {"128_pages_per_fsync", grow(128)}}};
}

// Seed 003: 4 processes zero-fill 32 MiB files at once in 32 KiB O_SYNC writes.
Scenario concurrent_scenario() {
  auto writers = [](bool reserve_first) {
    return [reserve_first](const std::string& m) {
      return succeeded(workloads::concurrent_writers(m, {4, 32 * kMiB, 32 * kKiB, reserve_first}));
    };
  };
  return {"concurrent",
          "seed 003: 4 writers zero-fill 32 MiB files at once, 32 KiB O_SYNC writes",
          {"ext4", "xfs", "btrfs"},
          {{"write_only", writers(false)}, {"fallocate_keep_size_first", writers(true)}}};
}

// Seed 004: a 32 MiB table of 16 KiB pages, the last 8 KiB of each punched.
Scenario punch_scenario() {
  constexpr off_t kSize = 32 * kMiB;
  auto table = [](bool punch) {
    return [punch](const std::string& m) {
      const std::string path = m + "/t1.ibd";
      // Written and closed, then opened again to punch and fsync.
      return on_file(
                 path, [](int fd) { return workloads::write_range(fd, 0, kSize, kMiB, 'p'); },
                 /*sync=*/false) &&
             on_file(path, [punch](int fd) -> workloads::Outcome {
               if (!punch) return {};
               return workloads::punch_page_tails(fd, kSize);
             });
    };
  };
  return {"punch",
          "seed 004: page compression by hole punching, against plain pages",
          {"ext4", "xfs", "btrfs"},
          {{"plain_pages", table(false)}, {"punch_half_of_each_page", table(true)}}};
}

// A database of 4 tables of 4 MiB dropped as `rm -r` does (each entry, then the
// directory), while another process holds one table open or after it closed
// it: InfluxDB's DROP DATABASE, MonetDB's DELETE_ME, DuckDB's workspace on NFS.
// Notes the drop's rmdir, the names it left, the unlink of those names, the
// space still taken, and an rmdir once the holder has closed the table.
bool drop_database(const std::string& mount, bool hold_open) {
  constexpr int kTables = 4;
  const std::string db = mount + "/db";
  if (mkdir(db.c_str(), 0755) != 0) {
    return succeeded(std::unexpected(fmt::format("mkdir {}: {}", db, strerror(errno))));
  }
  for (int i = 1; i <= kTables; ++i) {
    if (!on_file(fmt::format("{}/t{}.ibd", db, i),
                 [](int fd) { return workloads::write_range(fd, 0, 4 * kMiB, kMiB, 't'); })) {
      return false;
    }
  }
  // The holder: another process with t1.ibd open until its pipe closes.
  int ready[2], release[2];
  if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(release, O_CLOEXEC) != 0) return false;
  pid_t holder = -1;
  if (hold_open) {
    holder = fork();
    if (holder == 0) {
      close(release[1]);  // else its read would wait for itself
      const int fd = open((db + "/t1.ibd").c_str(), O_RDONLY | O_CLOEXEC);
      char c = fd >= 0 ? 'r' : 'x';
      (void)!write(ready[1], &c, 1);
      (void)!read(release[0], &c, 1);
      _exit(0);
    }
    char c = 'x';
    if (holder < 0 || read(ready[0], &c, 1) != 1 || c != 'r') return false;
  }
  for (const auto& name : names_in(db)) (void)unlink((db + "/" + name).c_str());
  const int dropped = rmdir(db.c_str()) == 0 ? 0 : errno;
  note("rmdir", errno_name(dropped));
  const auto left = names_in(db);
  note("left", left.size());
  int removal = 0;
  for (const auto& name : left) {
    if (unlink((db + "/" + name).c_str()) != 0 && removal == 0) removal = errno;
  }
  note("unlink_left", left.empty() ? "-" : errno_name(removal));
  // Still taken: by names under db/ and by files open with no name.
  std::ifstream in(mount + "/.mimicfs/stats.json");
  const auto stats = nlohmann::json::parse(in);
  uint64_t kept = stats["open"]["unlinked_bytes"].get<uint64_t>();
  for (const auto& [path, file] : stats["files"].items()) {
    if (path.starts_with("/db/")) kept += file["allocated_bytes"].get<uint64_t>();
  }
  note("kept_mib", fmt::format("{:.1f}", static_cast<double>(kept) / kMiB));
  close(release[1]);
  if (holder > 0) waitpid(holder, nullptr, 0);
  note("rmdir_after_close", dropped == 0 ? "-" : errno_name(rmdir(db.c_str()) == 0 ? 0 : errno));
  for (const int fd : {ready[0], ready[1], release[0]}) close(fd);
  return true;
}

Scenario drop_scenario() {
  return {"drop",
          "DROP DATABASE while another process holds a table open (InfluxDB, MonetDB)",
          {"nfs", "ext4"},
          {{"drop_after_close", [](const std::string& m) { return drop_database(m, false); }},
           {"drop_while_open", [](const std::string& m) { return drop_database(m, true); }}},
          {{"rmdir", "rmdir"},
           {"names left", "left"},
           {"unlink them", "unlink_left"},
           {"kept MiB", "kept_mib"},
           {"rmdir after close", "rmdir_after_close"}}};
}

// Runs `argv` (argv[0] searched in PATH) to completion, with `extra_env`
// ("NAME=VALUE") added to the environment and, when `quiet`, its standard output
// discarded. No shell: arguments pass as they are. Returns the exit status, 128+N
// when signal N ended it, 127 when it could not start.
int run(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {},
        bool quiet = false) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (const auto& e : extra_env) env.push_back(const_cast<char*>(e.c_str()));
  for (char** e = environ; *e; ++e) env.push_back(*e);
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    fmt::print(stderr, "mimicfs-scenarios: cannot run {}: {}\n", argv[0], std::strerror(error));
    return 127;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Seed 000 with software nobody here wrote: fio lays out a 16 MiB file with each
// --fallocate mode, then writes it in 16 KiB blocks.
bool fio(const std::string& mount, const std::string& mode) {
  return run({"fio", "--name=t1", "--directory=" + mount, "--size=16M", "--bs=16k", "--rw=write",
              "--ioengine=psync", "--end_fsync=1", "--fallocate=" + mode, "--minimal"},
             {}, /*quiet=*/true) == 0;
}

Scenario fio_scenario() {
  std::vector<std::pair<std::string, Strategy>> strategies;
  for (const char* mode : {"posix", "native", "none", "truncate"}) {
    strategies.emplace_back(fmt::format("fio_fallocate_{}", mode),
                            [mode](const std::string& m) { return fio(m, mode); });
  }
  return {"fio",
          "seed 000 with fio --fallocate=posix|native|none|truncate (needs fio)",
          {"nfs", "nfs42", "ext4"},
          strategies};
}

// A second NFS client (B) of the mount's server, for one strategy: what B's
// kernel cached of a file that the first client (A) changes or removes.
class SecondClient {
 public:
  explicit SecondClient(const std::string& server) {
    char dir[] = "/tmp/mimicfs-client.XXXXXX";
    if (mkdtemp(dir) == nullptr) return;
    path_ = dir;
    const char* mimicfs = std::getenv("MIMICFS");
    if (run({mimicfs ? mimicfs : "mimicfs", "mount", "--client-of", server, path_}) != 0) {
      rmdir(path_.c_str());
      path_.clear();
    }
  }
  ~SecondClient() {
    if (path_.empty()) return;
    run({"fusermount3", "-u", path_});
    rmdir(path_.c_str());
  }
  bool mounted() const { return !path_.empty(); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string mib_of(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return errno_name(errno);
  return fmt::format("{:.0f}", static_cast<double>(st.st_size) / kMiB);
}

char first_byte(int fd) {
  char c = '?';
  return pread(fd, &c, 1, 0) == 1 ? c : '!';
}

// `table` (in the first client's mount) written with 1 MiB of 'o's, then
// opened with `flags` through `b`: its descriptor, or -1 after saying why.
int open_on_second_client(const std::string& table, const SecondClient& b, int flags) {
  if (!on_file(table, [](int fd) { return workloads::write_range(fd, 0, kMiB, kMiB, 'o'); })) {
    return -1;
  }
  if (!b.mounted()) {
    (void)succeeded(std::unexpected("cannot mount a second client"));
    return -1;
  }
  const std::string name = std::filesystem::path(table).filename().string();
  const int fd = open(b.file(name).c_str(), flags | O_CLOEXEC);
  if (fd < 0) (void)succeeded(std::unexpected(fmt::format("open: {}", strerror(errno))));
  return fd;
}

// Writes one command to the mount's .mimicfs/ctl.
bool control(const std::string& mount, const std::string& command) {
  const int fd = open((mount + "/.mimicfs/ctl").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool written = write(fd, command.data(), command.size()) ==
                       static_cast<ssize_t>(command.size());
  return close(fd) == 0 && written;
}

// B reads a 1 MiB table of 'o's; A rewrites its first MiB with 'n's, appends a
// MiB and closes. Notes what B's open descriptor sees at once and once its
// attribute cache expired (acregmin, 3 s of emulated time), and what B sees
// once it opens the file again (close-to-open).
bool reader_on_another_client(const std::string& mount) {
  const std::string table = mount + "/t.ibd";
  SecondClient b(mount);
  const int reader = open_on_second_client(table, b, O_RDONLY);
  if (reader < 0) return false;
  note("page_before", std::string(1, first_byte(reader)));  // now in B's page cache
  if (!on_file(table, [](int fd) { return workloads::write_range(fd, 0, 2 * kMiB, kMiB, 'n'); })) {
    return false;
  }
  note("size_at_once", mib_of(reader));
  note("page_at_once", std::string(1, first_byte(reader)));
  if (!control(mount, "time advance 3s")) {
    return succeeded(std::unexpected(fmt::format("ctl time advance: {}", strerror(errno))));
  }
  note("size_later", mib_of(reader));
  note("page_later", std::string(1, first_byte(reader)));
  close(reader);
  const int again = open(b.file("t.ibd").c_str(), O_RDONLY | O_CLOEXEC);
  note("size_reopened", mib_of(again));
  note("page_reopened", std::string(1, first_byte(again)));
  close(again);
  return true;
}

// B holds the table open for writing; A removes it (A has it not open: no
// silly rename). Notes B's read, write and close.
bool removed_by_another_client(const std::string& mount) {
  const std::string table = mount + "/t.ibd";
  SecondClient b(mount);
  const int holder = open_on_second_client(table, b, O_RDWR);
  if (holder < 0) return false;
  if (unlink(table.c_str()) != 0) return false;
  note("names_left", names_in(mount).size());
  char page[4096];
  note("read", errno_name(pread(holder, page, sizeof page, kMiB / 2) < 0 ? errno : 0));
  std::fill(std::begin(page), std::end(page), 'w');
  note("write", errno_name(pwrite(holder, page, sizeof page, 0) < 0 ? errno : 0));
  note("close", errno_name(close(holder) != 0 ? errno : 0));
  return true;
}

Scenario clients_scenario() {
  return {"clients",
          "two NFS clients of one server: what a reader on B sees of A's changes",
          {"nfs", "nfs42"},
          {{"reader_on_another_client", reader_on_another_client}},
          {{"B page", "page_before"},
           {"A writes: B size", "size_at_once"},
           {"B page", "page_at_once"},
           {"3 s later: size", "size_later"},
           {"B page", "page_later"},
           {"B reopens: size", "size_reopened"},
           {"B page", "page_reopened"}}};
}

Scenario stale_scenario() {
  return {"stale",
          "a file open on client B removed by client A",
          {"nfs", "nfs42"},
          {{"removed_by_another_client", removed_by_another_client}},
          {{"names left", "names_left"},
           {"B read", "read"},
           {"B write", "write"},
           {"B close", "close"}}};
}


// Seeds 000 and 004 with Debian's MariaDB (scripts/mariadb-session.sh): a
// compressed table filled and altered; a page-compressed table dropped. The
// session finds the mount in MIMICFS_MOUNT and mimicfs in MIMICFS.
bool mariadb(const std::string& /*mount*/, const char* workload) {
  return run({std::string(MIMICFS_SOURCE_DIR) + "/scripts/mariadb-session.sh"},
             {fmt::format("WORKLOAD={}", workload)}) == 0;
}

// DROP DATABASE while another process on the same mount holds a table's file
// open: notes the statement's outcome ("ok" or the errno of its rmdir) and
// the names it left behind.
bool mariadb_drop_database_held(const std::string& mount) {
  const std::string result = mount + "/../" +
                             std::filesystem::path(mount).filename().string() + ".drop-result";
  if (run({std::string(MIMICFS_SOURCE_DIR) + "/scripts/mariadb-session.sh"},
          {"WORKLOAD=drop_database_held", "RESULT=" + result}) != 0) {
    return false;
  }
  std::ifstream in(result);
  for (std::string line; std::getline(in, line);) {
    const size_t equals = line.find('=');
    if (equals != std::string::npos) note(line.substr(0, equals), line.substr(equals + 1));
  }
  std::filesystem::remove(result);
  return true;
}

Scenario mariadb_scenario() {
  return {
      "mariadb",
      "seeds 000 and 004 with Debian's mariadb-server on the mount (needs mariadb-server)",
      {"nfs", "ideal", "xfs", "ext4"},
      {{"alter_compressed_table", [](const std::string& m) { return mariadb(m, "alter"); }},
       {"drop_plain_table", [](const std::string& m) { return mariadb(m, "drop_plain"); }},
       {"drop_page_compressed_table", [](const std::string& m) { return mariadb(m, "drop"); }},
       {"drop_database_held_open", mariadb_drop_database_held}}};
}

std::vector<Scenario> all_scenarios() {
  return {extend_scenario(), grow_scenario(), concurrent_scenario(), punch_scenario(),
          fio_scenario(),    drop_scenario(), clients_scenario(), stale_scenario(),
          mariadb_scenario()};
}

uint64_t op_field(const nlohmann::json& stats, const char* op, const char* field) {
  if (!stats["ops"].contains(op)) return 0;
  return stats["ops"][op].value(field, uint64_t{0});
}

nlohmann::json row_of(const std::string& strategy, const std::string& profile,
                      const nlohmann::json& stats) {
  uint64_t extents = 0, allocated = 0, ibd_extents = 0, ibd_files = 0;
  for (const auto& [path, file] : stats["files"].items()) {
    extents += file["extents"].get<uint64_t>();
    allocated += file["allocated_bytes"].get<uint64_t>();
    if (path.ends_with(".ibd")) {
      ibd_extents += file["extents"].get<uint64_t>();
      ++ibd_files;
    }
  }
  uint64_t refused = 0;
  if (stats["ops"].contains("fallocate")) {
    refused = stats["ops"]["fallocate"]["errors"].value("EOPNOTSUPP", uint64_t{0});
  }
  const auto& device = stats["device"];
  return {{"strategy", strategy},
          {"profile", profile},
          {"writes", op_field(stats, "write", "count")},
          {"write_bytes", op_field(stats, "write", "bytes")},
          // Every sync the workload asked for, fsync and fdatasync alike.
          {"fsyncs", op_field(stats, "fsync", "count") + op_field(stats, "fdatasync", "count")},
          {"fallocate_refused", refused},
          {"punches", op_field(stats, "punch", "count")},
          {"extents", extents},
          {"ibd_files", ibd_files},  // InnoDB's file-per-table tablespaces
          {"ibd_extents", ibd_extents},
          {"unlinks", op_field(stats, "unlink", "count")},
          {"emulated_ns", stats["clock"].value("emulated_ns", uint64_t{0})},
          // The drop's time: the unlinks and the background reclaim they queued (xfs).
          {"unlink_emulated_ns", op_field(stats, "unlink", "emulated_ns") +
                                     stats["deferred"].value("task_ns", uint64_t{0})},
          {"allocated_bytes", allocated},
          {"device_allocated_bytes",
           device["allocated_bytes"].get<uint64_t>() - device["metadata_bytes"].get<uint64_t>()}};
}

void print_table(const Scenario& scenario, const nlohmann::json& rows) {
  fmt::print("\n{} ({})\n", scenario.name, scenario.seed_and_question);
  if (!scenario.noted_columns.empty()) {
    fmt::print("{:<28} {:<8}", "strategy", "profile");
    for (const auto& [header, key] : scenario.noted_columns) fmt::print(" {:>12}", header);
    fmt::print("\n");
    for (const auto& r : rows) {
      fmt::print("{:<28} {:<8}", r["strategy"].get<std::string>(), r["profile"].get<std::string>());
      const nlohmann::json notes = r.value("notes", nlohmann::json::object());
      for (const auto& [header, key] : scenario.noted_columns) {
        const nlohmann::json value = notes.value(key, nlohmann::json("?"));
        fmt::print(" {:>{}}", value.is_string() ? value.get<std::string>() : value.dump(),
                   std::max<size_t>(12, header.size()));
      }
      fmt::print("\n");
    }
    std::fflush(stdout);
    return;
  }
  fmt::print("{:<28} {:<8} {:>8} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>14} {:>14} {:>12} {:>11}\n",
             "strategy", "profile", "writes", "fsyncs", "refused", "punches", "unlinks", "extents",
             "of .ibd", "allocated", "device", "emulated s", "unlink ms");
  for (const auto& r : rows) {
    fmt::print(
        "{:<28} {:<8} {:>8} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>14} {:>14} {:>12.4f} "
        "{:>11.3f}\n",
        r["strategy"].get<std::string>(), r["profile"].get<std::string>(),
        r["writes"].get<uint64_t>(), r["fsyncs"].get<uint64_t>(),
        r["fallocate_refused"].get<uint64_t>(), r["punches"].get<uint64_t>(),
        r["unlinks"].get<uint64_t>(), r["extents"].get<uint64_t>(),
        r["ibd_extents"].get<uint64_t>(), r["allocated_bytes"].get<uint64_t>(),
        r["device_allocated_bytes"].get<uint64_t>(), r["emulated_ns"].get<uint64_t>() / 1e9,
        r["unlink_emulated_ns"].get<uint64_t>() / 1e6);
  }
  // Each table as its scenario ends, also in a pipe (a CI log): a scenario
  // may take minutes.
  std::fflush(stdout);
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int run(int argc, char** argv) {
  CLI::App app{"Runs each seed's competing strategies side by side on mimicfs profiles",
               "mimicfs-scenarios"};
  std::string only, profiles, mimicfs = MIMICFS_BINARY;
  std::vector<std::string> perform;
  bool json = false;
  app.add_option("--scenario", only,
                 "Only this scenario: extend, grow, concurrent, punch, fio, drop, clients, stale, "
                 "mariadb");
  app.add_option("--profiles", profiles, "Comma-separated profiles instead of each scenario's own");
  app.add_option("--mimicfs", mimicfs, "The mimicfs binary");
  app.add_flag("--json", json, "Print one JSON document instead of tables");
  app.add_option("--perform", perform, "(internal) SCENARIO STRATEGY on $MIMICFS_MOUNT")
      ->expected(2);
  CLI11_PARSE(app, argc, argv);

  const auto scenarios = all_scenarios();
  if (!perform.empty()) {
    const char* mount = std::getenv("MIMICFS_MOUNT");
    if (!mount) return 2;
    for (const auto& s : scenarios) {
      if (s.name != perform[0]) continue;
      for (const auto& [name, strategy] : s.strategies) {
        if (name == perform[1]) return strategy(mount) ? 0 : 1;
      }
    }
    return 2;
  }
  if (!only.empty() && std::none_of(scenarios.begin(), scenarios.end(),
                                    [&](const Scenario& s) { return s.name == only; })) {
    std::string known;
    for (const auto& s : scenarios) known += (known.empty() ? "" : ", ") + s.name;
    fmt::print(stderr, "mimicfs-scenarios: unknown scenario \"{}\" (known: {})\n", only, known);
    return 2;
  }

  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  // A private directory for the stats files: no name another user can plant.
  char private_dir[] = "/tmp/mimicfs-scenarios.XXXXXX";
  if (!mkdtemp(private_dir)) {
    fmt::print(stderr, "mimicfs-scenarios: cannot create a directory in /tmp\n");
    return 1;
  }
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } cleanup{private_dir};
  const std::string stats_file = std::string(private_dir) + "/stats.json";
  const std::string notes_file = std::string(private_dir) + "/notes.json";
  setenv("MIMICFS_SCENARIO_NOTES", notes_file.c_str(), 1);
  setenv("MIMICFS", mimicfs.c_str(), 1);  // for strategies that call mimicfs (mariadb)
  nlohmann::json document = {{"scenarios", nlohmann::json::array()}};
  for (const auto& scenario : scenarios) {
    if (!only.empty() && scenario.name != only) continue;
    if (only.empty() && scenario.name == "mariadb") continue;  // minutes, and a server: ask for it
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& profile : profiles.empty() ? scenario.default_profiles : split(profiles)) {
      for (const auto& [strategy, perform_strategy] : scenario.strategies) {
        std::filesystem::remove(notes_file);
        const int code = run({mimicfs, "run", "--profile", profile, "--stats-out", stats_file, "--",
                              self, "--perform", scenario.name, strategy});
        if (code != 0) {
          // `mimicfs run` has said what was wrong; a usage error stays one.
          fmt::print(stderr, "mimicfs-scenarios: {} / {} on {} failed (status {})\n", scenario.name,
                     strategy, profile, code);
          return code == 2 ? 2 : 1;
        }
        std::ifstream in(stats_file);
        rows.push_back(row_of(strategy, profile, nlohmann::json::parse(in)));
        if (std::ifstream notes(notes_file); notes) rows.back()["notes"] = nlohmann::json::parse(notes);
      }
    }
    if (json) {
      document["scenarios"].push_back(
          {{"name", scenario.name}, {"question", scenario.seed_and_question}, {"rows", rows}});
    } else {
      print_table(scenario, rows);
    }
  }
  if (json) fmt::print("{}\n", document.dump(2));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "mimicfs-scenarios: {}\n", e.what());
    return 1;
  }
}
