// SPDX-License-Identifier: Apache-2.0
#include "host/temporary_mount.h"

#include <fcntl.h>
#include <sys/file.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "host/child_process.h"
#include "host/exit_status.h"

namespace mimicfs {
namespace {

// Unmounts, lazily when something left it busy, so the directory is never left mounted.
void unmount(const std::string& dir) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    const auto done = spawn_and_wait({"fusermount3", "-u", "-q", dir});
    if (done && done->status == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  fmt::print(stderr, "mimicfs: {} is busy; unmounting it lazily\n", dir);
  (void)spawn_and_wait({"fusermount3", "-u", "-z", "-q", dir});
}

// After the unmount the daemon saves the volume into its data directory, then
// lets go of it (the flock on its marker): waits for that, up to a minute, so
// that `run` returns with the volume saved.
void wait_for_data_dir(const std::string& data_dir) {
  const int fd = ::open((data_dir + "/mimicfs-data").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  for (int attempt = 0; attempt < 1200; ++attempt) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::close(fd);
}

void remove_quietly(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

}  // namespace

std::expected<std::string, std::string> make_temporary_directory(std::string_view prefix) {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string parent = tmpdir && *tmpdir ? tmpdir : "/tmp";
  std::string path = fmt::format("{}/{}.XXXXXX", parent, prefix);
  if (!mkdtemp(path.data())) {
    return std::unexpected(fmt::format("in {}: {}", parent, std::strerror(errno)));
  }
  return path;
}

std::expected<std::unique_ptr<TemporaryMount>, std::string> TemporaryMount::mount(
    const Profile& profile, const LatencyMode& latency, const std::vector<std::string>& faults,
    const std::string& data_dir, const std::vector<std::string>& mount_options,
    const std::string& log_file) {
  const auto made = make_temporary_directory("mimicfs-run");
  if (!made) return std::unexpected("cannot create a mount directory: " + made.error());
  const std::string dir = *made;
  // The effective profile, --set overrides included, for the mount to load.
  const std::string profile_file = dir + ".toml";
  std::ofstream(profile_file) << profile.to_toml();
  const std::string log = log_file.empty() ? dir + ".log" : log_file;
  const std::string own_log = log_file.empty() ? log : "";
  std::vector<std::string> command = {self_path(), "mount",     "--profile-file",
                                      profile_file, dir,        "--log-file",
                                      log,          "--latency", latency.to_string()};
  for (const std::string& rule : faults) {
    command.push_back("--fault");
    command.push_back(rule);
  }
  if (!data_dir.empty()) command.insert(command.end(), {"--data-dir", data_dir});
  command.insert(command.end(), mount_options.begin(), mount_options.end());
  const auto mounted = spawn_and_wait(command);
  remove_quietly(profile_file);
  const bool ok = mounted && mounted->status == kExitOk;
  if (ok && SignalForwarding::received() == 0)
    return std::unique_ptr<TemporaryMount>(new TemporaryMount(dir, data_dir, own_log));
  // A mount interrupted half-way may be in place: take it down before leaving.
  if (ok) unmount(dir);
  (void)spawn_and_wait({"fusermount3", "-u", "-q", dir});
  std::ifstream log_lines(log);
  std::string last, line;
  while (std::getline(log_lines, line)) last = line;
  if (!own_log.empty()) remove_quietly(own_log);
  remove_quietly(dir);
  if (SignalForwarding::received() != 0) return std::unexpected("interrupted");
  return std::unexpected(fmt::format("could not mount {}{}", dir, last.empty() ? "" : ": " + last));
}

std::expected<std::unique_ptr<TemporaryMount>, std::string> TemporaryMount::client_of(
    const std::string& server) {
  const auto made = make_temporary_directory("mimicfs-run");
  if (!made) return std::unexpected("cannot create a mount directory: " + made.error());
  const std::string dir = *made;
  // Its one-line refusal goes to stderr as it is.
  const auto mounted = spawn_and_wait({self_path(), "mount", "--client-of", server, dir});
  if (mounted && mounted->status == kExitOk && SignalForwarding::received() == 0) {
    return std::unique_ptr<TemporaryMount>(new TemporaryMount(dir, "", ""));
  }
  if (mounted && mounted->status == kExitOk) unmount(dir);
  remove_quietly(dir);
  if (SignalForwarding::received() != 0) return std::unexpected("interrupted");
  return std::unexpected(fmt::format("could not mount {} as a client of {}", dir, server));
}

TemporaryMount::~TemporaryMount() {
  unmount(dir_);
  if (!data_dir_.empty()) wait_for_data_dir(data_dir_);
  remove_quietly(dir_);
  if (!own_log_.empty()) remove_quietly(own_log_);
}

std::string TemporaryMount::stats() const {
  std::ifstream in(dir_ + "/.mimicfs/stats.json");
  std::ostringstream text;
  text << in.rdbuf();
  return in.good() || in.eof() ? text.str() : std::string();
}

int TemporaryMount::ctl(std::string_view command) const {
  const int fd = open((dir_ + "/.mimicfs/ctl").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const ssize_t written = write(fd, command.data(), command.size());
  const int error = written == static_cast<ssize_t>(command.size()) ? 0 : errno;
  close(fd);
  return error;
}

}  // namespace mimicfs
