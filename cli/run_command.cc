// SPDX-License-Identifier: Apache-2.0
#include "cli/run_command.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "engine/data/host_data_store.h"
#include "host/child_process.h"
#include "host/exit_status.h"
#include "host/mount_checks.h"
#include "host/temporary_mount.h"

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

namespace {

struct RunChoice {
  ProfileChoice profile;
  TimeChoice time;
  DaemonChoice daemon;
  std::string stats_out;
  std::string data_dir;
  std::string client_of;
  std::vector<std::string> command;
};

int run(const CLI::App& command, const RunChoice& choice) {
  set_up_logging("warn", "");
  if (!choice.client_of.empty()) {
    for (const char* option : {"--profile", "--profile-file", "--set", "--latency", "--fault",
                               "--log-level", "--log-file", "--attr-timeout", "--data-dir"}) {
      if (command.count(option) > 0) {
        return usage_error(fmt::format("run: {} cannot be given with --client-of: the client "
                                       "is served by the daemon of {}, with its settings",
                                       option, choice.client_of));
      }
    }
  }
  auto profile = chosen_profile(choice.profile);
  if (!profile) return usage_error(profile.error());
  auto latency = LatencyMode::parse(choice.time.latency);
  if (!latency) return usage_error(latency.error());
  if (auto why = check_fault_rules(choice.time.faults); !why.empty()) return usage_error(why);
  if (auto why = check_writable("--stats-out", choice.stats_out); !why.empty()) {
    return usage_error(why);
  }
  // Checked here for a one-line refusal; the mount opens it again.
  if (command.count("--data-dir") > 0) {
    auto store = HostDataStore::open(choice.data_dir, /*check_only=*/true);
    if (!store) return usage_error(store.error());
    auto image = (*store)->load_volume();
    if (!image) return usage_error(image.error());
    if (*image) {
      if (auto why = check_saved_profile(choice.data_dir, **image, *profile); !why.empty()) {
        return usage_error(why);
      }
    }
  }
  if (auto why = check_writable("--log-file", choice.daemon.log_file); !why.empty()) {
    return usage_error(why);
  }
  // Passed on as given: the mount checks them as `mimicfs mount` does.
  std::vector<std::string> mount_options = {"--log-level", choice.daemon.log_level, "--io-uring",
                                            choice.daemon.io_uring};
  if (command.count("--attr-timeout") > 0) {
    mount_options.insert(mount_options.end(),
                         {"--attr-timeout", fmt::format("{}", choice.daemon.attr_timeout)});
  }
  return run_with_mount(RunOptions{std::move(*profile), choice.command, choice.stats_out,
                                   *latency, choice.time.faults, choice.data_dir,
                                   std::move(mount_options), choice.daemon.log_file,
                                   choice.client_of});
}

}  // namespace

void add_run_command(CLI::App& app, CommandAction& action) {
  auto choice = std::make_shared<RunChoice>();
  CLI::App* command = app.add_subcommand(
      "run", "Mount a temporary volume, run a command on it (MIMICFS_MOUNT), unmount");
  add_profile_options(*command, choice->profile);
  command->add_option("--stats-out", choice->stats_out, "Write the final stats.json here");
  command->add_option("--data-dir", choice->data_dir, kDataDirHelp);
  add_time_options(*command, choice->time);
  add_daemon_options(*command, choice->daemon);
  command->add_option("--client-of", choice->client_of,
                      "Mount another NFS client of the volume mounted on this directory instead "
                      "of a new volume (nfs profiles; see docs/nfs.md)");
  command->add_option("COMMAND", choice->command, "The command and its arguments, after --")
      ->required();
  command->callback([command, choice, &action] {
    action = [command, choice] { return run(*command, *choice); };
  });
}

}  // namespace mimicfs
