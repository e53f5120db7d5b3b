// SPDX-License-Identifier: Apache-2.0
#include "cli/command_options.h"

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/layers/fault_injector.h"
#include "host/exit_status.h"

namespace mimicfs {

int usage_error(std::string_view message) {
  fmt::print(stderr, "mimicfs: {}\n", message);
  return kExitUsage;
}

void add_profile_options(CLI::App& command, ProfileChoice& choice) {
  auto* name = command.add_option("--profile", choice.name,
                                  "Built-in profile (default nfs; see `mimicfs profiles`)");
  command.add_option("--profile-file", choice.file, "Profile TOML file (may set base = \"nfs\")")
      ->excludes(name);
  command
      .add_option("--set", choice.overrides,
                  "Override a profile key, KEY=VALUE (repeatable), e.g. "
                  "--set allocation.speculative_preallocation=false")
      ->allow_extra_args(false);
}

std::expected<Profile, std::string> chosen_profile(const ProfileChoice& choice) {
  auto profile = choice.file.empty()
                     ? load_builtin_profile(choice.name.empty() ? kDefaultProfile : choice.name)
                     : load_profile_file(choice.file);
  if (!profile) return profile;
  return apply_overrides(std::move(*profile), choice.overrides);
}

void add_time_options(CLI::App& command, TimeChoice& choice) {
  command.add_option("--latency", choice.latency,
                     "virtual (default: costs add up, nothing waits), real, or real:SCALE "
                     "(each operation also waits its cost times SCALE)");
  command
      .add_option("--fault", choice.faults,
                  "A fault rule (repeatable), e.g. op=fsync,path=/db/*,error=EIO,nth=3; "
                  "see docs/time.md")
      ->allow_extra_args(false);
}

void add_daemon_options(CLI::App& command, DaemonChoice& choice) {
  command.add_option("--log-level", choice.log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  command.add_option("--log-file", choice.log_file, "Log here (a background mount has no stderr)");
  command
      .add_option("--attr-timeout", choice.attr_timeout,
                  "Seconds the kernel may cache attributes (default 1; st_blocks stays "
                  "current: changes behind the kernel's back are invalidated; 0 sends every "
                  "stat to the daemon)")
      ->check(CLI::NonNegativeNumber);
  command
      .add_option("--io-uring", choice.io_uring,
                  "auto (default): take requests over FUSE io_uring, a queue per CPU, where "
                  "the kernel offers it (Linux 6.14 and later with fuse.enable_uring=Y; the "
                  "faster transport: its threads serve each caller on its own CPU), else "
                  "/dev/fuse; on: the same, with a warning where the kernel does not offer "
                  "it; off: /dev/fuse")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->envname("MIMICFS_IO_URING");
}

void set_up_logging(const std::string& level, const std::string& log_file) {
  std::shared_ptr<spdlog::logger> logger;
  if (log_file.empty()) {
    logger = spdlog::stderr_color_mt("mimicfs");
  } else {
    logger = spdlog::basic_logger_mt("mimicfs", log_file);
  }
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

std::string check_writable(std::string_view option, const std::string& path) {
  if (path.empty()) return "";
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path file(path);
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  if (fs::is_directory(file, ec)) return fmt::format("{} {}: is a directory", option, path);
  if (!fs::is_directory(dir, ec)) {
    return fmt::format("{} {}: no directory {}", option, path, dir.string());
  }
  const bool exists = fs::exists(file, ec);
  if (access(exists ? path.c_str() : dir.c_str(), W_OK) != 0) {
    return fmt::format("{} {}: {} not writable ({})", option, path,
                       exists ? "the file is" : "its directory is", std::strerror(errno));
  }
  return "";
}

std::string check_saved_profile(const std::string& data_dir, const ImageJson& image,
                                const Profile& profile) {
  const auto saved = image.find("profile");
  if (saved == image.end() || !saved->is_object() || !saved->contains("name") ||
      !saved->contains("toml") || !(*saved)["name"].is_string() || !(*saved)["toml"].is_string()) {
    return fmt::format("--data-dir {}: volume.meta names no profile (corrupt?)", data_dir);
  }
  const std::string name = (*saved)["name"].get<std::string>();
  if (name != profile.name) {
    return fmt::format(
        "--data-dir {}: holds a volume made with profile {}; it cannot be mounted as {} "
        "(give --profile {}, or an empty directory)",
        data_dir, name, profile.name, name);
  }
  if ((*saved)["toml"].get<std::string>() != profile.to_toml()) {
    return fmt::format(
        "--data-dir {}: holds a volume made with profile {} and other settings than this "
        "mount's (--set or --profile-file); give the same ones (`mimicfs profiles show` "
        "prints a profile's)",
        data_dir, name);
  }
  return "";
}

std::string check_fault_rules(const std::vector<std::string>& rules) {
  FaultInjector check;
  for (const std::string& rule : rules) {
    if (auto added = check.add(rule); !added) return added.error();
  }
  return {};
}

}  // namespace mimicfs
