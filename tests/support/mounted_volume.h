// SPDX-License-Identifier: Apache-2.0
// MountedVolume: a real mimicfs mount in a temporary directory for a test's
// lifetime (include/mimicfs/scoped_mount.h's ScopedMount, with the daemon's log
// kept beside it), and the helpers mount tests share. Mount tests drive it with
// real syscalls through the kernel.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "mimicfs/scoped_mount.h"

namespace mimicfs::testing {

// Skips the test where /dev/fuse is unusable, unless MIMICFS_REQUIRE_FUSE=1, in
// which case it fails: CI must not pass by skipping every mount test.
#define MIMICFS_REQUIRE_MOUNTABLE()                                   \
  do {                                                                \
    std::string why_not = ::mimicfs::testing::fuse_unusable_reason(); \
    if (!why_not.empty()) {                                           \
      if (::mimicfs::testing::fuse_required()) FAIL() << why_not;     \
      GTEST_SKIP() << why_not;                                        \
    }                                                                 \
  } while (0)

std::string fuse_unusable_reason();
bool fuse_required();

struct CommandResult {
  int exit_status = -1;  // the exit code, or 128+signal
  std::string out;
  std::string err;
};
// Runs argv[0] (searched in PATH) with the arguments, capturing stdout and stderr.
CommandResult run_command(const std::vector<std::string>& argv);
// The mimicfs binary under test.
std::string mimicfs_binary();
bool is_mounted(const std::string& path);
// The names in directory `dir` but "." and "..", in readdir's order.
std::vector<std::string> names_in(const std::string& dir);
std::string make_temp_dir();

// A profile given as a TOML file (`mimicfs mount --profile-file PATH`) rather
// than a built-in name.
struct ProfileFile {
  std::string path;
};

class MountedVolume;
// Another NFS client of a mounted volume's server (`mount --client-of`).
struct ClientOf {
  const MountedVolume& server;
};

class MountedVolume {
 public:
  // Mounts `profile` (a built-in name) with any extra `mimicfs mount` arguments.
  // On failure, mounted() is false and error() says why.
  explicit MountedVolume(const std::string& profile, std::vector<std::string> extra = {});
  // Mounts the profile in a TOML file, otherwise as above.
  explicit MountedVolume(const ProfileFile& profile, std::vector<std::string> extra = {});
  // Mounts another NFS client of `client.server`, served by its daemon (whose
  // log() this one shares).
  explicit MountedVolume(const ClientOf& client);
  ~MountedVolume();  // unmounts and removes the directory
  MountedVolume(const MountedVolume&) = delete;
  MountedVolume& operator=(const MountedVolume&) = delete;

  bool mounted() const { return mount_.has_value(); }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // The daemon's log (--log-level info), removed with the volume.
  const std::string& log() const { return log_; }

  // .mimicfs/stats.json, parsed.
  nlohmann::json stats() const { return mount_->stats(); }
  // The stats of one file by its name inside the mount, e.g. "data.ibd"; throws
  // when there is none.
  nlohmann::json file_stats(const std::string& name) const;
  // Zeroes the operation counters and emulated times through .mimicfs/ctl.
  void reset_counters() const { mount_->reset_counters(); }
  // Writes one command to .mimicfs/ctl; returns 0 or the errno of the write.
  int ctl(const std::string& command) const { return mount_->ctl(command); }
  // clock.emulated_ns from stats.json.
  uint64_t emulated_ns() const { return mount_->emulated_ns(); }
  // Waits until the kernel has sent every RELEASE (ScopedMount::wait_for_releases).
  bool wait_for_releases() const { return mount_->wait_for_releases(); }

 private:
  void mount(ScopedMount::Options options, const std::vector<std::string>& extra);

  std::optional<ScopedMount> mount_;
  std::string path_;
  std::string log_;
  bool owns_log_ = true;  // a client's is its server's
  std::string error_;
};

}  // namespace mimicfs::testing
