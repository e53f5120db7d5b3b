// SPDX-License-Identifier: Apache-2.0
#include "host/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <thread>

extern char** environ;

namespace mimicfs {
namespace {

std::atomic<pid_t> g_child{0};  // negative: a process group
std::atomic<int> g_signal{0};
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[std::size(kForwarded)];

void forward_signal(int signal) {
  g_signal = signal;
  if (const pid_t pid = g_child.load(); pid != 0) kill(pid, signal);
}

}  // namespace

std::optional<ChildExit> spawn_and_wait(const std::vector<std::string>& args,
                                        const SpawnOptions& options) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!options.output_file.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, options.output_file.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // Its own process group, so that a timeout ends whatever it started too.
  const bool timed = options.timeout.count() > 0;
  const bool polled = timed || options.watch;
  if (polled) {
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
  }
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, argv[0], &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    errno = error;
    return std::nullopt;
  }
  // A child in its own group gets the signal with everything it started.
  g_child = polled ? -pid : pid;
  ChildExit exit;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  int status = 0;
  pid_t waited = 0;
  while (true) {
    waited = waitpid(pid, &status, polled ? WNOHANG : 0);
    if (waited < 0 && errno == EINTR) continue;
    if (waited != 0) break;
    // The watch first: it may be what lets a killed child finish dying.
    if (options.watch) options.watch(pid);
    if (timed && !exit.timed_out && std::chrono::steady_clock::now() >= deadline) {
      exit.timed_out = true;
      kill(-pid, SIGKILL);
      if (!options.watch) {
        while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
        }
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  g_child = 0;
  if (waited < 0) {
    exit.status = 1;  // its status is lost (SIGCHLD ignored?): not a success
  } else if (WIFSIGNALED(status)) {
    exit.status = 128 + WTERMSIG(status);
  } else {
    exit.status = WEXITSTATUS(status);
  }
  return exit;
}

SignalForwarding::SignalForwarding() {
  g_signal = 0;
  struct sigaction forward {};
  forward.sa_handler = forward_signal;
  sigemptyset(&forward.sa_mask);
  for (size_t i = 0; i < std::size(kForwarded); ++i) {
    sigaction(kForwarded[i], &forward, &g_previous[i]);
  }
}

SignalForwarding::~SignalForwarding() {
  for (size_t i = 0; i < std::size(kForwarded); ++i) {
    sigaction(kForwarded[i], &g_previous[i], nullptr);
  }
}

int SignalForwarding::received() { return g_signal.load(); }

std::string self_path() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("mimicfs") : path.string();
}

}  // namespace mimicfs
