// SPDX-License-Identifier: Apache-2.0
// `mimicfs run`: a temporary mount for the length of one command.
//
// Mounts the profile on a new directory, runs the command with MIMICFS_MOUNT set
// to it, writes the final stats.json where asked, and unmounts and removes the
// directory whatever the command did (failed, was killed, or was interrupted:
// SIGINT, SIGTERM and SIGHUP are passed on to it). Returns the command's exit
// status (128+N when signal N ended it), or kExitUsage after a one-line message
// when the set-up fails. With `client_of` the temporary mount is another NFS
// client of the volume mounted there, and the profile and mount settings are
// that volume's.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/command_options.h"
#include "engine/profile/profile.h"
#include "engine/time/emulated_clock.h"

namespace mimicfs {

struct RunOptions {
  Profile profile;
  std::vector<std::string> command;  // argv; command[0] is searched in PATH
  std::string stats_out;             // "" for none
  LatencyMode latency;               // passed to the mount
  std::vector<std::string> faults;   // fault rules, passed to the mount
  std::string data_dir;              // --data-dir, passed to the mount ("" for none)
  std::vector<std::string> mount_options;  // --io-uring, --attr-timeout, --log-level, as given
  std::string log_file;              // --log-file: the mount's log, kept ("" for none)
  std::string client_of;             // --client-of: a client of this mount's server instead
};

int run_with_mount(const RunOptions& options);

// `mimicfs run`: its options; once parsed, its checks, then run_with_mount.
void add_run_command(CLI::App& app, CommandAction& action);

}  // namespace mimicfs
