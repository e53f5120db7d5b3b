// SPDX-License-Identifier: Apache-2.0
#include "tests/support/mounted_volume.h"

#include <dirent.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace mimicfs::testing {

bool fuse_required() {
  const char* v = std::getenv("MIMICFS_REQUIRE_FUSE");
  return v && std::string(v) == "1";
}

std::string fuse_unusable_reason() {
  const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::string("/dev/fuse unusable: ") + std::strerror(errno);
  ::close(fd);
  if (run_command({"fusermount3", "-V"}).exit_status != 0) return "fusermount3 not found";
  return {};
}

std::string mimicfs_binary() { return MIMICFS_BINARY; }

std::string make_temp_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "mimicfs-test-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  return names;
}

bool is_mounted(const std::string& path) {
  std::ifstream mounts("/proc/mounts");
  std::string device, mountpoint, rest;
  while (mounts >> device >> mountpoint && std::getline(mounts, rest)) {
    if (mountpoint == path) return true;
  }
  return false;
}

namespace {

std::string drain(int fd) {
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) out.append(buffer, n);
  ::close(fd);
  return out;
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  const int spawn_error = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  CommandResult result;
  if (spawn_error != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    result.exit_status = 127;
    result.err = std::string("cannot run ") + argv[0] + ": " + std::strerror(spawn_error);
    return result;
  }
  // A background mount's daemon inherits nothing from these pipes (stdio goes
  // to /dev/null when it detaches), so both reach EOF when the command exits.
  std::string err;
  std::thread err_reader([&] { err = drain(err_pipe[0]); });
  result.out = drain(out_pipe[0]);
  err_reader.join();
  result.err = std::move(err);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

MountedVolume::MountedVolume(const std::string& profile, std::vector<std::string> extra) {
  ScopedMount::Options options;
  options.profile = profile;
  mount(std::move(options), extra);
}

MountedVolume::MountedVolume(const ProfileFile& profile, std::vector<std::string> extra) {
  ScopedMount::Options options;
  options.profile_file = profile.path;
  mount(std::move(options), extra);
}

MountedVolume::MountedVolume(const ClientOf& client) {
  ScopedMount::Options options;
  options.binary = mimicfs_binary();
  options.client_of = client.server.path();
  try {
    mount_.emplace(options);
    path_ = mount_->path();
  } catch (const std::exception& e) {
    error_ = e.what();
  }
  log_ = client.server.log();
  owns_log_ = false;
}

void MountedVolume::mount(ScopedMount::Options options, const std::vector<std::string>& extra) {
  options.binary = mimicfs_binary();
  log_ = make_temp_dir() + "/mimicfs.log";
  options.extra_arguments = {"--log-file", log_, "--log-level", "info"};
  options.extra_arguments.insert(options.extra_arguments.end(), extra.begin(), extra.end());
  try {
    mount_.emplace(options);
    path_ = mount_->path();
  } catch (const std::exception& e) {
    error_ = e.what();
  }
}

MountedVolume::~MountedVolume() {
  mount_.reset();  // unmounts and removes the directory
  std::error_code ec;
  if (owns_log_) std::filesystem::remove_all(std::filesystem::path(log_).parent_path(), ec);
}

nlohmann::json MountedVolume::file_stats(const std::string& name) const {
  nlohmann::json stats = mount_->file_stats(name);
  if (stats.is_null()) throw std::runtime_error("no stats for /" + name);
  return stats;
}

}  // namespace mimicfs::testing
