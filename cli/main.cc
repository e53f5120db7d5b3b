// SPDX-License-Identifier: Apache-2.0
// The `mimicfs` program: each command adds itself (its options and what it
// does once parsed) from its own file; this one builds the command line,
// parses it, and runs what the command chose.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cli/command_options.h"
#include "cli/completion_command.h"
#include "cli/crashtest_command.h"
#include "cli/ctl_command.h"
#include "cli/mount_command.h"
#include "cli/profiles_command.h"
#include "cli/report_command.h"
#include "cli/run_command.h"
#include "cli/stats_command.h"
#include "engine/base/edit_distance.h"
#include "host/exit_status.h"

#ifndef MIMICFS_VERSION
#define MIMICFS_VERSION "unknown"
#endif

namespace mimicfs {
namespace {

// The first argument when it is not an option and names no command: one line
// that names it and the closest command (CLI11 would say only that a command
// is required).
std::optional<std::string> unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return std::nullopt;
  const std::string_view given = argv[1];
  const CLI::App* closest = nullptr;
  size_t closest_distance = SIZE_MAX;
  for (const CLI::App* command : app.get_subcommands({})) {
    if (command->get_name() == given) return std::nullopt;
    const size_t distance = edit_distance(given, command->get_name());
    if (distance < closest_distance) {
      closest = command;
      closest_distance = distance;
    }
  }
  std::string message = fmt::format("unknown command \"{}\"", given);
  // A suggestion only where it is plausibly a typo: at most a third of it wrong.
  if (closest != nullptr && closest_distance * 3 <= std::max(given.size(), size_t{3})) {
    message += fmt::format(" (did you mean \"{}\"?)", closest->get_name());
  } else {
    message += " (try --help)";
  }
  return message;
}

// `mimicfs help [COMMAND]`. Not app.help(): it prints the help of the command
// parsed, `help` itself.
void add_help_command(CLI::App& app, CommandAction& action) {
  auto topic = std::make_shared<std::string>();
  CLI::App* help = app.add_subcommand("help", "Print this help, or a command's");
  help->add_option("COMMAND", *topic, "The command");
  help->callback([&app, help, topic, &action] {
    action = [&app, help, topic] {
      if (topic->empty()) {
        fmt::print("{}",
                   app.get_formatter()->make_help(&app, "mimicfs", CLI::AppFormatMode::Normal));
        return kExitOk;
      }
      for (const CLI::App* command : app.get_subcommands({})) {
        if (command->get_name() == *topic && command != help) {
          fmt::print("{}", command->get_formatter()->make_help(command, "mimicfs " + *topic,
                                                               CLI::AppFormatMode::Normal));
          return kExitOk;
        }
      }
      return usage_error(fmt::format("help: no command \"{}\" (try --help)", *topic));
    };
  });
}

int run(int argc, char** argv) {
  CLI::App app{
      "mimicfs: a FUSE filesystem that behaves like the storage a database meets in "
      "production (NFS, ext4, xfs, btrfs), with exact allocation accounting.",
      "mimicfs"};
  app.set_version_flag("--version", std::string("mimicfs ") + MIMICFS_VERSION);
  app.require_subcommand(1);
  CommandAction action;
  add_mount_command(app, action);
  add_run_command(app, action);
  add_crashtest_command(app, action);
  add_profiles_command(app, action);
  add_stats_command(app, action);
  add_report_command(app, action);
  add_ctl_command(app, action);
  add_completion_command(app, action);
  add_help_command(app, action);

  if (const auto unknown = unknown_command(app, argc, argv)) return usage_error(*unknown);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    return usage_error(fmt::format("{} (try --help)", e.what()));
  }
  return action ? action() : kExitUsage;
}

}  // namespace
}  // namespace mimicfs

int main(int argc, char** argv) {
  try {
    return mimicfs::run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "mimicfs: {}\n", e.what());
    return mimicfs::kExitFailure;
  }
}
