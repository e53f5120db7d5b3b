#include "tests/support/mounted_volume.h"

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
  mount({"--profile", profile}, extra);
}

MountedVolume::MountedVolume(const ProfileFile& profile, std::vector<std::string> extra) {
  mount({"--profile-file", profile.path}, extra);
}

void MountedVolume::mount(std::vector<std::string> profile_arguments,
                          const std::vector<std::string>& extra) {
  path_ = make_temp_dir();
  log_ = path_ + ".log";
  std::vector<std::string> argv = {mimicfs_binary(), "mount"};
  argv.insert(argv.end(), profile_arguments.begin(), profile_arguments.end());
  argv.insert(argv.end(), {"--log-file", log_, "--log-level", "info"});
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(path_);
  CommandResult r = run_command(argv);
  mounted_ = r.exit_status == 0 && is_mounted(path_);
  if (!mounted_) error_ = "mount failed (status " + std::to_string(r.exit_status) + "): " + r.err;
}

MountedVolume::~MountedVolume() {
  if (mounted_) {
    // A lazy unmount never fails on a busy mount; the daemon exits when it is gone.
    for (int attempt = 0; attempt < 50 && is_mounted(path_); ++attempt) {
      if (run_command({"fusermount3", "-u", path_}).exit_status != 0) {
        run_command({"fusermount3", "-u", "-z", path_});
      }
      if (is_mounted(path_)) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  std::error_code ec;
  std::filesystem::remove(path_, ec);
  std::filesystem::remove(log_, ec);
}

nlohmann::json MountedVolume::stats() const {
  std::ifstream in(path_ + "/.mimicfs/stats.json");
  if (!in) throw std::runtime_error("cannot open stats.json in " + path_);
  return nlohmann::json::parse(in);
}

nlohmann::json MountedVolume::file_stats(const std::string& name) const {
  nlohmann::json all = stats();
  const std::string key = "/" + name;
  if (!all["files"].contains(key)) throw std::runtime_error("no stats for " + key);
  return all["files"][key];
}

void MountedVolume::reset_counters() const {
  std::ofstream ctl(path_ + "/.mimicfs/ctl");
  ctl << "reset\n";
  ctl.flush();
  if (!ctl) throw std::runtime_error("ctl reset failed in " + path_);
}

int MountedVolume::ctl(const std::string& command) const {
  const int fd = ::open((path_ + "/.mimicfs/ctl").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const std::string line = command + "\n";
  const ssize_t written = ::write(fd, line.data(), line.size());
  const int error = written < 0 ? errno : 0;
  ::close(fd);
  return error;
}

uint64_t MountedVolume::emulated_ns() const {
  return stats()["clock"]["emulated_ns"].get<uint64_t>();
}

}  // namespace mimicfs::testing
