// SPDX-License-Identifier: Apache-2.0
// `mimicfs profiles`: the built-in profiles, one line each; `profiles show
// NAME|FILE [--set K=V]` prints a profile's effective TOML; `profiles keys`
// every key's unit, range, default and meaning (docs/profiles.md's table).
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command_options.h"

namespace mimicfs {

void add_profiles_command(CLI::App& app, CommandAction& action);

}  // namespace mimicfs
