// SPDX-License-Identifier: Apache-2.0
// ScopedMount: a mimicfs volume mounted for the lifetime of an object, for a
// test suite that wants its code to meet emulated storage (GoogleTest or any
// other: this header needs only POSIX, the C++ standard library and nlohmann/json).
//
//   TEST(Tablespace, ExtendsWithoutFragmentingOnNfs) {
//     mimicfs::ScopedMount nas("nfs");                  // throws if it cannot mount
//     my_engine_create_tablespace(nas.file("t1.ibd"));
//     EXPECT_EQ(nas.file_stats("t1.ibd")["extents"], 1);
//     EXPECT_EQ(nas.stats()["ops"]["fallocate"]["errors"]["EOPNOTSUPP"], 1);
//   }
//
// The mimicfs binary is $MIMICFS_BINARY, else `mimicfs` in PATH. Mounting needs
// root or a /dev/fuse the user may open. The stats are docs/stats.md's schema.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace mimicfs {

class ScopedMount {
 public:
  struct Options {
    std::string profile = "nfs";               // a built-in profile
    std::string profile_file;                  // or a TOML file (--profile-file), if set
    std::vector<std::string> overrides;        // --set KEY=VALUE each
    std::vector<std::string> extra_arguments;  // more `mimicfs mount` options (--latency ...)
    std::string binary;  // the mimicfs to run; empty: $MIMICFS_BINARY, else `mimicfs` in PATH
    std::string data_dir;  // file contents in sparse files here (--data-dir); empty: in memory
    // The path of a mounted nfs volume: mount another NFS client of its server
    // (--client-of), served by its daemon; profile, overrides and data_dir
    // are then not used.
    std::string client_of;
  };

  // Mounts built-in `profile` with `--set` overrides ("allocation.placement=goal").
  explicit ScopedMount(const std::string& profile = "nfs",
                       const std::vector<std::string>& overrides = {})
      : ScopedMount(Options{profile, {}, overrides, {}, {}, {}}) {}

  // Throws std::runtime_error with mimicfs's own message when the mount fails.
  explicit ScopedMount(const Options& options) {
    // Under $TMPDIR, as mktemp(1) and `mimicfs run` choose; /tmp without it.
    const char* tmpdir = std::getenv("TMPDIR");
    std::string dir = std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") +
                      "/mimicfs-scoped.XXXXXX";
    if (!mkdtemp(dir.data())) {
      throw std::runtime_error("mkdtemp " + dir + ": " + std::strerror(errno));
    }
    path_ = dir;
    std::vector<std::string> argv = {options.binary.empty() ? binary() : options.binary, "mount"};
    if (!options.client_of.empty()) {
      argv.insert(argv.end(), {"--client-of", options.client_of});
    } else if (options.profile_file.empty()) {
      argv.insert(argv.end(), {"--profile", options.profile});
    } else {
      argv.insert(argv.end(), {"--profile-file", options.profile_file});
    }
    if (options.client_of.empty()) {
      for (const auto& o : options.overrides) argv.insert(argv.end(), {"--set", o});
      if (!options.data_dir.empty()) argv.insert(argv.end(), {"--data-dir", options.data_dir});
      data_dir_ = options.data_dir;
    }
    for (size_t i = 0; i + 1 < options.extra_arguments.size(); ++i) {
      if (options.extra_arguments[i] == "--data-dir") data_dir_ = options.extra_arguments[i + 1];
    }
    argv.insert(argv.end(), options.extra_arguments.begin(), options.extra_arguments.end());
    argv.push_back(path_);
    const std::string errors = path_ + ".stderr";
    const int status = run(argv, errors);
    std::string message;
    {
      std::ifstream in(errors);
      std::getline(in, message, '\0');
    }
    std::filesystem::remove(errors);
    if (status != 0) {
      std::filesystem::remove(path_);
      while (!message.empty() && message.back() == '\n') message.pop_back();
      throw std::runtime_error("mimicfs mount failed with status " + std::to_string(status) +
                               (message.empty() ? "" : ": " + message));
    }
  }
  ~ScopedMount() {
    // A lazy unmount never fails on a busy mount; the daemon exits when it is gone.
    for (int attempt = 0; attempt < 20; ++attempt) {
      if (run({"fusermount3", "-u", "-q", path_}) == 0) break;
      if (attempt == 19) run({"fusermount3", "-u", "-z", "-q", path_});
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!data_dir_.empty()) wait_for_data_dir();
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  ScopedMount(const ScopedMount&) = delete;
  ScopedMount& operator=(const ScopedMount&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

  // The whole stats.json document, read now.
  nlohmann::json stats() const {
    std::ifstream in(path_ + "/.mimicfs/stats.json");
    if (!in) throw std::runtime_error("cannot read " + path_ + "/.mimicfs/stats.json");
    return nlohmann::json::parse(in);
  }
  // One file's entry ("t1.ibd" or "dir/t1.ibd"); null when there is none.
  nlohmann::json file_stats(const std::string& name) const {
    const nlohmann::json s = stats();
    const std::string key = !name.empty() && name[0] == '/' ? name : "/" + name;
    return s["files"].contains(key) ? s["files"][key] : nlohmann::json();
  }
  // Zeroes the operation counters (allocation state is kept).
  void reset_counters() const {
    if (const int error = ctl("reset"); error != 0) {
      throw std::runtime_error("cannot write " + path_ + "/.mimicfs/ctl: " + std::strerror(error));
    }
  }
  // Writes one command to .mimicfs/ctl ("crash", "fault add RULE", ...): 0, or the
  // errno of the write (EINVAL for a command the volume rejects).
  int ctl(const std::string& command) const {
    const int fd = ::open((path_ + "/.mimicfs/ctl").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    const std::string line = command + "\n";
    const ssize_t written = ::write(fd, line.data(), line.size());
    const int error = written < 0 ? errno : 0;
    ::close(fd);
    return error;
  }
  // Every operation's emulated time so far (clock.emulated_ns), in nanoseconds.
  uint64_t emulated_ns() const { return stats()["clock"]["emulated_ns"].get<uint64_t>(); }
  // close(2) returns before the kernel sends the daemon its RELEASE: until it
  // arrives, a file unlinked while open keeps its blocks and a last close's trim
  // has not happened. Waits (up to 10 s) until no descriptor is open on the
  // volume (stats.json's open.handles is 0); false if one still is.
  bool wait_for_releases() const {
    for (int attempt = 0; attempt < 1000; ++attempt) {
      if (stats()["open"]["handles"].get<uint64_t>() == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  // After the unmount the daemon saves the volume into its data directory and
  // lets go of it: waits (up to a minute) until it has, so that the directory
  // can be mounted again at once.
  void wait_for_data_dir() const {
    const int fd = ::open((data_dir_ + "/mimicfs-data").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    for (int attempt = 0; attempt < 1200; ++attempt) {
      if (flock(fd, LOCK_EX | LOCK_NB) == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::close(fd);
  }

  static std::string binary() {
    const char* configured = std::getenv("MIMICFS_BINARY");
    return configured && *configured ? configured : "mimicfs";
  }
  // Runs argv (searched in PATH) to completion, its stderr into `errors` if given;
  // its exit status, 127 if it could not start.
  static int run(const std::vector<std::string>& args, const std::string& errors = "") {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (!errors.empty()) {
      posix_spawn_file_actions_addopen(&actions, 2, errors.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0600);
    }
    pid_t pid = 0;
    const int spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) return 127;
    int status = 0;
    pid_t waited;
    while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (waited < 0) return 127;  // its status is lost: not a success
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string path_;
  std::string data_dir_;  // --data-dir, if any
};

}  // namespace mimicfs
