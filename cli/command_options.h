// SPDX-License-Identifier: Apache-2.0
// What the `mimicfs` commands share: how a command adds itself to the program,
// the options several take (a profile, time and faults, the daemon's), and
// the checks that turn bad input into one line and exit status 2.
#pragma once

#include <CLI/CLI.hpp>
#include <expected>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/volume_image.h"
#include "engine/profile/profile.h"

namespace mimicfs {

// What the program does once its command line is parsed: a command's
// add_*_command() sets it from the parsed subcommand's callback.
using CommandAction = std::function<int()>;

// Prints "mimicfs: MESSAGE" and returns kExitUsage.
int usage_error(std::string_view message);

// --profile, --profile-file and --set.
struct ProfileChoice {
  std::string name, file;
  std::vector<std::string> overrides;
};
void add_profile_options(CLI::App& command, ProfileChoice& choice);
// The profile chosen (nfs when neither), with the overrides applied.
std::expected<Profile, std::string> chosen_profile(const ProfileChoice& choice);

// --latency and --fault.
struct TimeChoice {
  std::string latency = "virtual";
  std::vector<std::string> faults;
};
void add_time_options(CLI::App& command, TimeChoice& choice);

// The daemon's own options: --log-level, --log-file, --attr-timeout, --io-uring.
struct DaemonChoice {
  std::string log_level = "warn", log_file;
  double attr_timeout = 1.0;  // mount sets AdapterOptions' default; run passes it on only when given
  std::string io_uring = "auto";
};
void add_daemon_options(CLI::App& command, DaemonChoice& choice);

inline constexpr const char* kDataDirHelp =
    "Keep file contents in sparse files under this directory (empty, or one a mimicfs "
    "used before) instead of in memory; see docs/architecture.md";

// The process's logger: to stderr, or to `log_file` when given.
void set_up_logging(const std::string& level, const std::string& log_file);

// Why `path` cannot be written, before anything runs ("" when it can, or is "").
std::string check_writable(std::string_view option, const std::string& path);
// The first malformed --fault rule's reason, or "".
std::string check_fault_rules(const std::vector<std::string>& rules);
// Why the volume saved in `data_dir` cannot be mounted with `profile` ("" when
// it can): a volume keeps the profile it was made with.
std::string check_saved_profile(const std::string& data_dir, const ImageJson& image,
                                const Profile& profile);

}  // namespace mimicfs
