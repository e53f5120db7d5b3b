// SPDX-License-Identifier: Apache-2.0
#include "fusefs/run_command.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "fusefs/child_process.h"
#include "fusefs/exit_status.h"
#include "fusefs/mount.h"
#include "fusefs/temporary_mount.h"

namespace mimicfs {
namespace {

int setup_error(const std::string& message) {
  fmt::print(stderr, "mimicfs run: {}\n", message);
  return kExitUsage;
}

}  // namespace

int run_with_mount(const RunOptions& options) {
  if (options.command.empty()) return setup_error("no command given (mimicfs run -- CMD ...)");
  if (auto why = check_fuse_device(); !why.empty()) return setup_error(why);

  // From here on a terminating signal goes to whatever runs (the mount, then the
  // command); the run itself always gets to unmount.
  SignalForwarding forwarding;
  auto mount = options.client_of.empty()
                   ? TemporaryMount::mount(options.profile, options.latency, options.faults,
                                           options.data_dir, options.mount_options,
                                           options.log_file)
                   : TemporaryMount::client_of(options.client_of);
  if (!mount) {
    if (SignalForwarding::received() != 0) return 128 + SignalForwarding::received();
    return setup_error(mount.error());
  }
  const std::string& dir = (*mount)->dir();

  // The command sees MIMICFS_MOUNT; everything else of the environment is as given.
  setenv("MIMICFS_MOUNT", dir.c_str(), 1);
  const auto exit = spawn_and_wait(options.command);
  const int spawn_error = errno;
  unsetenv("MIMICFS_MOUNT");

  bool stats_written = true;
  if (!options.stats_out.empty()) {
    const std::string stats = (*mount)->stats();
    std::ofstream out(options.stats_out);
    out << stats;
    stats_written = out.good() && !stats.empty();
  }
  mount->reset();  // unmounted and removed

  if (!exit) {
    fmt::print(stderr, "mimicfs run: cannot run {}: {}\n", options.command[0],
               std::strerror(spawn_error));
    return 127;  // as a shell says of a command it cannot find
  }
  if (!stats_written) {
    fmt::print(stderr, "mimicfs run: could not write the stats to {}\n", options.stats_out);
    return exit->status == 0 ? kExitFailure : exit->status;
  }
  return exit->status;
}

}  // namespace mimicfs
