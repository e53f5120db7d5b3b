#include "fusefs/run_command.h"

#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "fusefs/exit_status.h"
#include "fusefs/mount.h"

extern char** environ;

namespace mimicfs {
namespace {

std::atomic<pid_t> g_command{0};
std::atomic<int> g_signal{0};  // the last terminating signal the run received

// Passes a terminating signal on to what runs (the mount, then the command) and
// remembers it, so a signal between the two still ends the run.
void forward_signal(int signal) {
  g_signal = signal;
  if (const pid_t pid = g_command.load(); pid > 0) kill(pid, signal);
}

// Runs argv to completion; its exit status, 128+N for signal N, or nullopt when
// it could not start.
std::optional<int> spawn_and_wait(const std::vector<std::string>& args, char** env) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int error = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), env)) {
    errno = error;
    return std::nullopt;
  }
  g_command = pid;
  int status = 0;
  pid_t waited;
  while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  g_command = 0;
  if (waited < 0) return 1;  // its status is lost (SIGCHLD ignored?): not a success
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// The mimicfs binary itself, to mount with (a background mount returns once ready).
std::string self_path() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("mimicfs") : path.string();
}

int setup_error(const std::string& message) {
  fmt::print(stderr, "mimicfs run: {}\n", message);
  return kExitUsage;
}

// Unmounts, lazily when the command left something busy behind, so the
// directory is never left mounted.
void unmount(const std::string& dir) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (spawn_and_wait({"fusermount3", "-u", "-q", dir}, environ) == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  fmt::print(stderr, "mimicfs run: {} is busy; unmounting it lazily\n", dir);
  spawn_and_wait({"fusermount3", "-u", "-z", "-q", dir}, environ);
}

}  // namespace

int run_with_mount(const RunOptions& options) {
  if (options.command.empty()) return setup_error("no command given (mimicfs run -- CMD ...)");
  if (auto why = check_fuse_device(); !why.empty()) return setup_error(why);

  char dir_template[] = "/tmp/mimicfs-run.XXXXXX";
  if (!mkdtemp(dir_template)) {
    return setup_error(fmt::format("cannot create a mount directory: {}", std::strerror(errno)));
  }
  const std::string dir = dir_template;
  // The effective profile, --set overrides included, for the mount to load.
  const std::string profile_file = dir + ".toml";
  std::ofstream(profile_file) << options.profile.to_toml();

  // From here on a terminating signal goes to whatever runs (the mount, then the
  // command); the run itself always gets to unmount.
  struct sigaction forward {};
  forward.sa_handler = forward_signal;
  sigemptyset(&forward.sa_mask);
  struct sigaction previous[3];
  const int signals[] = {SIGINT, SIGTERM, SIGHUP};
  for (int i = 0; i < 3; ++i) sigaction(signals[i], &forward, &previous[i]);
  auto restore_signals = [&] {
    for (int i = 0; i < 3; ++i) sigaction(signals[i], &previous[i], nullptr);
  };

  std::vector<std::string> mount_command = {self_path(),  "mount",     "--profile-file",
                                            profile_file, dir,         "--log-file",
                                            dir + ".log", "--latency", options.latency.to_string()};
  for (const std::string& rule : options.faults) {
    mount_command.push_back("--fault");
    mount_command.push_back(rule);
  }
  const auto mounted = spawn_and_wait(mount_command, environ);
  std::error_code removed;
  std::filesystem::remove(profile_file, removed);
  if (mounted != kExitOk || g_signal != 0) {
    // A mount interrupted half-way may be in place: take it down before leaving.
    if (mounted == kExitOk) unmount(dir);
    spawn_and_wait({"fusermount3", "-u", "-q", dir}, environ);
    restore_signals();
    std::ifstream log(dir + ".log");
    std::string last, line;
    while (std::getline(log, line)) last = line;
    std::error_code ec;
    std::filesystem::remove(dir + ".log", ec);
    std::filesystem::remove(dir, ec);
    if (g_signal != 0) return 128 + g_signal;
    return setup_error(fmt::format("could not mount {}{}", dir, last.empty() ? "" : ": " + last));
  }

  // The command sees MIMICFS_MOUNT; everything else of the environment is as given.
  setenv("MIMICFS_MOUNT", dir.c_str(), 1);
  const auto status = spawn_and_wait(options.command, environ);
  const int spawn_error = errno;
  unsetenv("MIMICFS_MOUNT");

  bool stats_written = true;
  if (!options.stats_out.empty()) {
    std::ifstream in(dir + "/.mimicfs/stats.json");
    std::ostringstream stats;
    stats << in.rdbuf();
    std::ofstream out(options.stats_out);
    out << stats.str();
    stats_written = in.good() && out.good() && !stats.str().empty();
  }
  unmount(dir);
  restore_signals();
  std::error_code ec;
  std::filesystem::remove(dir, ec);
  std::filesystem::remove(dir + ".log", ec);

  if (!status) {
    fmt::print(stderr, "mimicfs run: cannot run {}: {}\n", options.command[0],
               std::strerror(spawn_error));
    return 127;  // as a shell says of a command it cannot find
  }
  if (!stats_written) {
    fmt::print(stderr, "mimicfs run: could not write the stats to {}\n", options.stats_out);
    return *status == 0 ? kExitFailure : *status;
  }
  return *status;
}

}  // namespace mimicfs
