// SPDX-License-Identifier: Apache-2.0
#include "cli/ctl_command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "control/control_command.h"
#include "control/control_files.h"
#include "host/exit_status.h"

namespace mimicfs {
namespace {

int send_control(const std::string& mountpoint, const std::vector<std::string>& words) {
  std::string command;
  for (const auto& w : words) command += (command.empty() ? "" : " ") + w;
  // Checked here too, so the reason reaches the terminal, not only the mount's log.
  const auto parsed = parse_control_command(command);
  if (!parsed) {
    fmt::print(stderr, "mimicfs ctl: {}\n", parsed.error());
    return kExitUsage;
  }
  command += "\n";
  const std::string file = ControlFiles::path_in(mountpoint, "ctl");
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    fmt::print(stderr, "mimicfs ctl: {} is not a mimicfs mount (cannot open {}: {})\n", mountpoint,
               file, std::strerror(errno));
    return kExitUsage;
  }
  const ssize_t written = ::write(fd, command.data(), command.size());
  const int error = errno;
  ::close(fd);
  if (written < 0) {
    const auto* crash = std::get_if<CrashCommand>(&*parsed);
    if (error == EINVAL && crash != nullptr && crash->client) {
      fmt::print(stderr, "mimicfs ctl: {} has no NFS client to crash (not an NFS profile)\n",
                 mountpoint);
      return kExitUsage;
    }
    if (error == EINVAL && std::holds_alternative<ServerCommand>(*parsed)) {
      fmt::print(stderr, "mimicfs ctl: {} has no server to take down, up or restart (not an NFS profile)\n",
                 mountpoint);
      return kExitUsage;
    }
    if (error == EINVAL) {
      fmt::print(stderr, "mimicfs ctl: the volume rejected \"{}\" (known: {}); its log says why\n",
                 command.substr(0, command.size() - 1), kControlCommands);
      return kExitUsage;
    }
    fmt::print(stderr, "mimicfs ctl: {}: {}\n", file, std::strerror(error));
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

void add_ctl_command(CLI::App& app, CommandAction& action) {
  auto mountpoint = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand("ctl", "Send a command to a mounted volume");
  command->add_option("MOUNT", *mountpoint, "The mountpoint")->required();
  // COMMAND is every word after MOUNT, its own options too (server restart
  // --grace D): ctl takes none after MOUNT (prefix_command).
  command->prefix_command();
  command->footer(fmt::format("COMMAND: {}", kControlCommands));
  command->callback([command, mountpoint, &action] {
    action = [command, mountpoint] {
      const std::vector<std::string> words = command->remaining();
      if (words.empty()) {
        return usage_error(fmt::format("ctl: a COMMAND is required ({})", kControlCommands));
      }
      return send_control(*mountpoint, words);
    };
  });
}

}  // namespace mimicfs
