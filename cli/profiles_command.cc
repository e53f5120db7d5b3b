// SPDX-License-Identifier: Apache-2.0
#include "cli/profiles_command.h"

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/profile/profile.h"
#include "engine/profile/profile_schema.h"
#include "host/exit_status.h"

namespace mimicfs {
namespace {

int list_profiles() {
  for (const auto& builtin : builtin_profiles()) {
    auto profile = load_builtin_profile(builtin.name);
    fmt::print("{:<8} {}{}\n", builtin.name, profile ? profile->description : profile.error(),
               builtin.name == kDefaultProfile ? " (default)" : "");
  }
  return kExitOk;
}

int show_profile(const std::string& name, const std::vector<std::string>& overrides) {
  auto profile = name.ends_with(".toml") ? load_profile_file(name) : load_builtin_profile(name);
  if (profile) profile = apply_overrides(std::move(*profile), overrides);
  if (!profile) return usage_error(profile.error());
  fmt::print("{}", profile->to_toml());
  return kExitOk;
}

}  // namespace

void add_profiles_command(CLI::App& app, CommandAction& action) {
  struct Choice {
    std::string name;
    std::vector<std::string> overrides;
  };
  auto choice = std::make_shared<Choice>();
  CLI::App* profiles = app.add_subcommand("profiles", "List the built-in profiles, or show one");
  CLI::App* show = profiles->add_subcommand("show", "Print a profile's effective TOML");
  show->add_option("NAME", choice->name, "Built-in profile name or a TOML file")->required();
  show->add_option("--set", choice->overrides, "Apply KEY=VALUE first, as mount --set does")
      ->allow_extra_args(false);
  CLI::App* keys = profiles->add_subcommand(
      "keys", "Print every profile key with its unit, range, default and meaning (Markdown)");
  profiles->callback([choice, show, keys, &action] {
    if (*show) {
      action = [choice] { return show_profile(choice->name, choice->overrides); };
    } else if (*keys) {
      action = [] {
        fmt::print("{}", profile_keys_markdown());
        return kExitOk;
      };
    } else {
      action = list_profiles;
    }
  });
}

}  // namespace mimicfs
