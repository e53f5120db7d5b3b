// SPDX-License-Identifier: Apache-2.0
// `mimicfs completion bash`: a bash completion script generated from the
// command line's own definitions (its subcommands and their options), so
// that it never drifts from them, with the built-in profiles as the values
// of --profile. The package installs it as
// /usr/share/bash-completion/completions/mimicfs.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cli/command_options.h"

namespace mimicfs {

// The script for `app` (the `mimicfs` command): words offered after each
// subcommand path, and `profiles` after --profile.
std::string bash_completion(CLI::App& app, const std::vector<std::string>& profiles);

// `mimicfs completion bash`: prints the script for `app`.
void add_completion_command(CLI::App& app, CommandAction& action);

}  // namespace mimicfs
