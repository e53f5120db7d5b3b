// SPDX-License-Identifier: Apache-2.0
// `mimicfs mount`: checks everything it is given, then mounts and serves
// (fusefs/mount.h), or mounts another NFS client of a mounted volume
// (--client-of, client_command.h). The one command that links the daemon.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command_options.h"

namespace mimicfs {

void add_mount_command(CLI::App& app, CommandAction& action);

}  // namespace mimicfs
