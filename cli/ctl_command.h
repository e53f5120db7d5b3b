// SPDX-License-Identifier: Apache-2.0
// `mimicfs ctl MOUNT COMMAND...`: one command (control_command.h's grammar)
// written to MOUNT/.mimicfs/ctl, checked here first so that the reason for a
// refusal reaches the terminal, not only the mount's log.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command_options.h"

namespace mimicfs {

void add_ctl_command(CLI::App& app, CommandAction& action);

}  // namespace mimicfs
