// SPDX-License-Identifier: Apache-2.0
// Child processes of the command line (`run`, `crashtest`): spawned with the
// current environment, waited for, and passed the terminating signals the
// command line receives meanwhile.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mimicfs {

struct SpawnOptions {
  // Past this the child's process group is killed (SIGKILL); zero: no limit.
  std::chrono::seconds timeout{0};
  // Standard output and error go to this file (appended) instead of ours.
  std::string output_file;
  // Called about every 20 ms while the child runs (in a process group of its
  // own then, as with a timeout), with its group (`mimicfs crashtest` ends the world there at a
  // power cut).
  std::function<void(pid_t group)> watch;
};

struct ChildExit {
  int status = 0;          // the exit status, or 128+N when signal N ended it
  bool timed_out = false;  // killed at the timeout
};

// Runs argv (argv[0] searched in PATH) to its end; nullopt, with errno set, when
// it could not start.
std::optional<ChildExit> spawn_and_wait(const std::vector<std::string>& argv,
                                        const SpawnOptions& options = {});

// While alive, SIGINT, SIGTERM and SIGHUP are passed on to the child being
// waited for and remembered; the previous handlers come back at destruction.
class SignalForwarding {
 public:
  SignalForwarding();
  ~SignalForwarding();
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;
  // The last terminating signal received, or 0.
  static int received();
};

// The mimicfs binary itself, to mount with.
std::string self_path();

}  // namespace mimicfs
