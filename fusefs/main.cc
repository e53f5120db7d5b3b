// SPDX-License-Identifier: Apache-2.0
// The `mimicfs` command line: mount, run, crashtest, profiles, stats, report, ctl.
#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "backends/edit_distance.h"
#include "backends/emulated_clock.h"
#include "backends/fault_injector.h"
#include "backends/host_data_store.h"
#include "backends/profile.h"
#include "backends/profile_schema.h"
#include "fusefs/client_command.h"
#include "fusefs/completion_command.h"
#include "fusefs/control_command.h"
#include "fusefs/crashtest_command.h"
#include "fusefs/exit_status.h"
#include "fusefs/mount.h"
#include "fusefs/report_command.h"
#include "fusefs/run_command.h"
#include "fusefs/stats_command.h"

#ifndef MIMICFS_VERSION
#define MIMICFS_VERSION "unknown"
#endif

namespace mimicfs {
namespace {

int usage_error(std::string_view message) {
  fmt::print(stderr, "mimicfs: {}\n", message);
  return kExitUsage;
}

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

// The profile --profile NAME or --profile-file FILE chose (nfs when neither),
// with --set overrides applied.
std::expected<Profile, std::string> chosen_profile(const std::string& name, const std::string& file,
                                                   const std::vector<std::string>& overrides) {
  auto profile = file.empty() ? load_builtin_profile(name.empty() ? kDefaultProfile : name)
                              : load_profile_file(file);
  if (!profile) return profile;
  return apply_overrides(std::move(*profile), overrides);
}

// Why `path` cannot be written, before anything runs ("" when it can, or is "").
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

// Why the data directory cannot serve a mount on `mountpoint` ("" when it can):
// it must not be the mountpoint or lie under it.
std::string check_data_dir_apart(const std::string& data_dir, const std::string& mountpoint) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path data = fs::weakly_canonical(data_dir, ec);
  const fs::path mount = fs::weakly_canonical(mountpoint, ec);
  if (ec) return "";  // HostDataStore::open or the mount says what is wrong
  const auto [end, ignored] = std::mismatch(mount.begin(), mount.end(), data.begin(), data.end());
  if (end == mount.end()) {
    return fmt::format("--data-dir {}: inside the mountpoint {}", data_dir, mountpoint);
  }
  return "";
}

// Why the volume saved in `data_dir` cannot be mounted with `profile` ("" when
// it can): a volume keeps the profile it was made with.
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

// The first malformed --fault rule's reason, or "".
std::string check_fault_rules(const std::vector<std::string>& rules) {
  FaultInjector check;
  for (const std::string& rule : rules) {
    if (auto added = check.add(rule); !added) return added.error();
  }
  return {};
}

int run(int argc, char** argv) {
  CLI::App app{
      "mimicfs: a FUSE filesystem that behaves like the storage a database meets in "
      "production (NFS, ext4, xfs, btrfs), with exact allocation accounting.",
      "mimicfs"};
  app.set_version_flag("--version", std::string("mimicfs ") + MIMICFS_VERSION);
  app.require_subcommand(1);

  // mount
  std::string profile_name, profile_file, mountpoint, log_level = "warn", log_file;
  bool foreground = false;
  AdapterOptions adapter;
  CLI::App* mount = app.add_subcommand("mount", "Mount an emulated volume on an empty directory");
  auto* profile_opt = mount->add_option("--profile", profile_name,
                                        "Built-in profile (default nfs; see `mimicfs profiles`)");
  mount->add_option("--profile-file", profile_file, "Profile TOML file (may set base = \"nfs\")")
      ->excludes(profile_opt);
  std::vector<std::string> overrides;
  mount
      ->add_option("--set", overrides,
                   "Override a profile key for this mount, KEY=VALUE (repeatable), e.g. "
                   "--set allocation.speculative_preallocation=false")
      ->allow_extra_args(false);
  std::string latency_text = "virtual";
  std::vector<std::string> fault_rules;
  auto add_time_options = [](CLI::App* command, std::string& latency,
                             std::vector<std::string>& faults) {
    command->add_option("--latency", latency,
                        "virtual (default: costs add up, nothing waits), real, or real:SCALE "
                        "(each operation also waits its cost times SCALE)");
    command
        ->add_option("--fault", faults,
                     "A fault rule (repeatable), e.g. op=fsync,path=/db/*,error=EIO,nth=3; "
                     "see docs/time.md")
        ->allow_extra_args(false);
  };
  add_time_options(mount, latency_text, fault_rules);
  mount->add_flag("-f,--foreground", foreground, "Serve in the foreground until unmounted");
  // The daemon's options, as `mount` and `run` take them.
  auto add_daemon_options = [](CLI::App* command, std::string& level, std::string& file,
                               double& attr_timeout, std::string& io_uring) {
    command->add_option("--log-level", level, "trace, debug, info, warn, error")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
    command->add_option("--log-file", file, "Log here (a background mount has no stderr)");
    command
        ->add_option("--attr-timeout", attr_timeout,
                     "Seconds the kernel may cache attributes (default 1; st_blocks stays "
                     "current: changes behind the kernel's back are invalidated; 0 sends every "
                     "stat to the daemon)")
        ->check(CLI::NonNegativeNumber);
    command
        ->add_option("--io-uring", io_uring,
                     "auto (default): take requests over FUSE io_uring, a queue per CPU, where "
                     "the kernel offers it (Linux 6.14 and later with fuse.enable_uring=Y; the "
                     "faster transport: its threads serve each caller on its own CPU), else "
                     "/dev/fuse; on: the same, with a warning where the kernel does not offer "
                     "it; off: /dev/fuse")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->envname("MIMICFS_IO_URING");
  };
  std::string io_uring_mode = "auto";
  add_daemon_options(mount, log_level, log_file, adapter.attr_timeout, io_uring_mode);
  std::string data_dir;
  constexpr const char* kDataDirHelp =
      "Keep file contents in sparse files under this directory (empty, or one a mimicfs "
      "used before) instead of in memory; see docs/architecture.md";
  mount->add_option("--data-dir", data_dir, kDataDirHelp);
  std::string client_of;
  mount->add_option("--client-of", client_of,
                    "Mount DIR as another NFS client of the volume mounted on this directory, "
                    "served by its daemon (nfs profiles; see docs/nfs.md)");
  mount->add_option("DIR", mountpoint, "Empty directory to mount on")->required();

  // run
  CLI::App* run_app = app.add_subcommand(
      "run", "Mount a temporary volume, run a command on it (MIMICFS_MOUNT), unmount");
  // --profile, --profile-file and --set, as `run` and `crashtest` take them.
  struct ProfileChoice {
    std::string name, file;
    std::vector<std::string> overrides;
  };
  auto add_profile_options = [](CLI::App* command, ProfileChoice& choice) {
    auto* name = command->add_option("--profile", choice.name, "Built-in profile (default nfs)");
    command->add_option("--profile-file", choice.file, "Profile TOML file")->excludes(name);
    command->add_option("--set", choice.overrides, "Override a profile key, KEY=VALUE (repeatable)")
        ->allow_extra_args(false);
  };
  ProfileChoice run_profile;
  std::string run_stats_out;
  std::vector<std::string> run_args;
  add_profile_options(run_app, run_profile);
  run_app->add_option("--stats-out", run_stats_out, "Write the final stats.json here");
  std::string run_data_dir;
  run_app->add_option("--data-dir", run_data_dir, kDataDirHelp);
  std::string run_latency_text = "virtual";
  std::vector<std::string> run_fault_rules;
  add_time_options(run_app, run_latency_text, run_fault_rules);
  std::string run_log_level = "warn", run_log_file, run_io_uring = "auto";
  double run_attr_timeout = AdapterOptions{}.attr_timeout;
  add_daemon_options(run_app, run_log_level, run_log_file, run_attr_timeout, run_io_uring);
  std::string run_client_of;
  run_app->add_option("--client-of", run_client_of,
                      "Mount another NFS client of the volume mounted on this directory instead "
                      "of a new volume (nfs profiles; see docs/nfs.md)");
  run_app->add_option("COMMAND", run_args, "The command and its arguments, after --")->required();

  // crashtest
  CLI::App* crashtest_app = app.add_subcommand(
      "crashtest", "Cut the power at many points of a workload, check the volume after each");
  CrashTestOptions crash_options;
  ProfileChoice crash_profile;
  unsigned crash_timeout_seconds = 120;
  add_profile_options(crashtest_app, crash_profile);
  crashtest_app->add_option("--setup", crash_options.setup,
                            "Shell command run on each fresh volume first, never crashed");
  crashtest_app->add_option("--workload", crash_options.workload, "Shell command to crash")
      ->required();
  crashtest_app
      ->add_option("--check", crash_options.check,
                   "Shell command run after the restart: exit 0 when all is well")
      ->required();
  crashtest_app->add_option("--points", crash_options.points, "Crash points (default 20)");
  crashtest_app->add_option("--seed", crash_options.seed, "Seed of the points (default 1)");
  crashtest_app->add_option("--op", crash_options.ops,
                            "Operations points are chosen among, as a fault rule's op= "
                            "(default *)");
  crashtest_app->add_option("--path", crash_options.path,
                            "... and their path glob, as a fault rule's path= (default *)");
  crashtest_app
      ->add_option("--when", crash_options.when, "before, after or both (default: drawn per point)")
      ->check(CLI::IsMember({"before", "after", "both"}));
  crashtest_app
      ->add_option("--event", crash_options.event,
                   "What happens at each point: power (a power cut, the default) or "
                   "server-restart (NFS profiles: the server restarts, the workload goes on)")
      ->check(CLI::IsMember({"power", "server-restart"}));
  crashtest_app->add_option("--timeout", crash_timeout_seconds,
                            "Seconds each command may run (default 120)");
  crashtest_app->add_option("--json", crash_options.json_out, "Write the results here as JSON");

  // profiles
  CLI::App* profiles = app.add_subcommand("profiles", "List the built-in profiles, or show one");
  std::string show_name;
  CLI::App* show = profiles->add_subcommand("show", "Print a profile's effective TOML");
  show->add_option("NAME", show_name, "Built-in profile name or a TOML file")->required();
  std::vector<std::string> show_overrides;
  show->add_option("--set", show_overrides, "Apply KEY=VALUE first, as mount --set does")
      ->allow_extra_args(false);
  CLI::App* keys = profiles->add_subcommand(
      "keys", "Print every profile key with its unit, range, default and meaning (Markdown)");

  // stats
  CLI::App* stats = app.add_subcommand("stats", "Print a mounted volume's statistics");
  std::string stats_mount;
  StatsView stats_view;
  stats->add_option("MOUNT", stats_mount, "The mountpoint")->required();
  stats->add_option("PATH", stats_view.path, "Only this file (inside the mount)");
  stats->add_flag("--json", stats_view.json,
                  "Print the stats.json document (with --sort, --top or --by-dir, also the "
                  "table's lines as \"rows\")");
  stats
      ->add_option("--sort", stats_view.sort,
                   "Order the files by name (default), or largest first by size, allocated, "
                   "extents, emulated or unsynced")
      ->check(CLI::IsMember({"name", "size", "allocated", "extents", "emulated", "unsynced"}));
  stats->add_option("--top", stats_view.top, "Only the first N files; the rest summed on one line");
  stats->add_flag("--by-dir", stats_view.by_directory, "A line per directory instead of per file");
  auto* width_option = stats->add_option(
      "--width", stats_view.width, "Fit the table in N columns (default: the terminal's; 100 in a pipe)");
  stats->add_flag("--wide", stats_view.wide, "No width limit: every column and whole paths")
      ->excludes(width_option);

  // report
  CLI::App* report = app.add_subcommand("report", "Draw a mounted volume's device layout as SVG");
  std::string report_mount, report_out;
  report->add_option("MOUNT", report_mount, "The mountpoint")->required();
  report->add_option("--out", report_out, "The .svg file to write")->required();
  std::string report_rank = "extents";
  report
      ->add_option("--rank", report_rank,
                   "The 20 files with colours of their own: most extents (default) or allocated")
      ->check(CLI::IsMember({"extents", "allocated"}));

  // ctl
  CLI::App* ctl = app.add_subcommand("ctl", "Send a command to a mounted volume");
  std::string ctl_mount;
  std::vector<std::string> ctl_words;
  ctl->add_option("MOUNT", ctl_mount, "The mountpoint")->required();
  // COMMAND is every word after MOUNT, its own options too (server restart
  // --grace D): ctl takes none after MOUNT (prefix_command).
  ctl->prefix_command();
  ctl->footer(fmt::format("COMMAND: {}", kControlCommands));

  // completion
  CLI::App* completion = app.add_subcommand(
      "completion",
      "Print a bash completion script (install it as "
      "/usr/share/bash-completion/completions/mimicfs, or source it)");
  std::string completion_shell;
  completion->add_option("SHELL", completion_shell, "bash")
      ->required()
      ->check(CLI::IsMember({"bash"}));

  // help
  CLI::App* help = app.add_subcommand("help", "Print this help, or a command's");
  std::string help_topic;
  help->add_option("COMMAND", help_topic, "The command");

  if (const auto unknown = unknown_command(app, argc, argv)) return usage_error(*unknown);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    return usage_error(fmt::format("{} (try --help)", e.what()));
  }

  if (*completion) {
    std::vector<std::string> profiles;
    for (const BuiltinProfile& profile : builtin_profiles()) profiles.emplace_back(profile.name);
    fmt::print("{}", bash_completion(app, profiles));
    return kExitOk;
  }
  if (*help) {
    // Not app.help(): it prints the help of the command parsed, `help` itself.
    if (help_topic.empty()) {
      fmt::print("{}", app.get_formatter()->make_help(&app, "mimicfs", CLI::AppFormatMode::Normal));
      return kExitOk;
    }
    for (const CLI::App* command : app.get_subcommands({})) {
      if (command->get_name() == help_topic && command != help) {
        fmt::print("{}", command->get_formatter()->make_help(command, "mimicfs " + help_topic,
                                                             CLI::AppFormatMode::Normal));
        return kExitOk;
      }
    }
    return usage_error(fmt::format("help: no command \"{}\" (try --help)", help_topic));
  }
  if (*mount && !client_of.empty()) {
    // The daemon of CLIENT_OF serves the new client with its own settings.
    for (const char* option : {"--profile", "--profile-file", "--set", "--latency", "--fault",
                               "--foreground", "--log-level", "--log-file", "--attr-timeout",
                               "--data-dir"}) {
      if (mount->count(option) > 0) {
        return usage_error(fmt::format("mount: {} cannot be given with --client-of: a client is "
                                       "served by the daemon of {}, with its settings",
                                       option, client_of));
      }
    }
    return mount_client_of(client_of, mountpoint);
  }
  if (*mount) {
    set_up_logging(log_level, log_file);
    auto profile = chosen_profile(profile_name, profile_file, overrides);
    if (!profile) return usage_error(profile.error());
    if (auto why = check_mountpoint(mountpoint); !why.empty()) return usage_error(why);
    // libfuse unmounts by this path after a stop signal, from / (the daemon's
    // working directory once it is in the background).
    std::error_code canonical_error;
    mountpoint = std::filesystem::canonical(mountpoint, canonical_error).string();
    if (canonical_error) {
      return usage_error(fmt::format("mountpoint: {}", canonical_error.message()));
    }
    auto latency = LatencyMode::parse(latency_text);
    if (!latency) return usage_error(latency.error());
    if (auto why = check_fault_rules(fault_rules); !why.empty()) return usage_error(why);
    if (auto why = check_fuse_device(); !why.empty()) return usage_error(why);
    MountOptions options{mountpoint, std::move(*profile), foreground, adapter,
                         *latency,   fault_rules,         nullptr};
    options.io_uring = io_uring_mode == "on"    ? MountOptions::IoUring::kOn
                       : io_uring_mode == "off" ? MountOptions::IoUring::kOff
                                                : MountOptions::IoUring::kAuto;
    if (mount->count("--data-dir") > 0) {
      if (auto why = check_data_dir_apart(data_dir, mountpoint); !why.empty()) {
        return usage_error(why);
      }
      auto store = HostDataStore::open(data_dir);
      if (!store) return usage_error(store.error());
      auto image = (*store)->load_volume();
      if (!image) return usage_error(image.error());
      if (*image) {
        if (auto why = check_saved_profile(data_dir, **image, options.profile); !why.empty()) {
          return usage_error(why);
        }
      }
      options.data_dir = store->get();
      options.image = std::move(*image);
      options.store = std::move(*store);
    }
    return mount_and_serve(std::move(options));
  }
  if (*run_app) {
    set_up_logging("warn", "");
    if (!run_client_of.empty()) {
      for (const char* option : {"--profile", "--profile-file", "--set", "--latency", "--fault",
                                 "--log-level", "--log-file", "--attr-timeout", "--data-dir"}) {
        if (run_app->count(option) > 0) {
          return usage_error(fmt::format("run: {} cannot be given with --client-of: the client "
                                         "is served by the daemon of {}, with its settings",
                                         option, run_client_of));
        }
      }
    }
    auto profile = chosen_profile(run_profile.name, run_profile.file, run_profile.overrides);
    if (!profile) return usage_error(profile.error());
    auto latency = LatencyMode::parse(run_latency_text);
    if (!latency) return usage_error(latency.error());
    if (auto why = check_fault_rules(run_fault_rules); !why.empty()) return usage_error(why);
    if (auto why = check_writable("--stats-out", run_stats_out); !why.empty()) {
      return usage_error(why);
    }
    // Checked here for a one-line refusal; the mount opens it again.
    if (run_app->count("--data-dir") > 0) {
      auto store = HostDataStore::open(run_data_dir, /*check_only=*/true);
      if (!store) return usage_error(store.error());
      auto image = (*store)->load_volume();
      if (!image) return usage_error(image.error());
      if (*image) {
        if (auto why = check_saved_profile(run_data_dir, **image, *profile); !why.empty()) {
          return usage_error(why);
        }
      }
    }
    if (auto why = check_writable("--log-file", run_log_file); !why.empty()) {
      return usage_error(why);
    }
    // Passed on as given: the mount checks them as `mimicfs mount` does.
    std::vector<std::string> mount_options = {"--log-level", run_log_level, "--io-uring",
                                              run_io_uring};
    if (run_app->count("--attr-timeout") > 0) {
      mount_options.insert(mount_options.end(),
                           {"--attr-timeout", fmt::format("{}", run_attr_timeout)});
    }
    return run_with_mount(RunOptions{std::move(*profile), run_args, run_stats_out, *latency,
                                     run_fault_rules, run_data_dir, std::move(mount_options),
                                     run_log_file, run_client_of});
  }
  if (*crashtest_app) {
    auto profile = chosen_profile(crash_profile.name, crash_profile.file, crash_profile.overrides);
    if (!profile) return usage_error(profile.error());
    crash_options.profile = std::move(*profile);
    crash_options.timeout = std::chrono::seconds(crash_timeout_seconds);
    return run_crash_test(crash_options);
  }
  if (*profiles) {
    if (*show) {
      auto profile = show_name.ends_with(".toml") ? load_profile_file(show_name)
                                                  : load_builtin_profile(show_name);
      if (profile) profile = apply_overrides(std::move(*profile), show_overrides);
      if (!profile) return usage_error(profile.error());
      fmt::print("{}", profile->to_toml());
      return kExitOk;
    }
    if (*keys) {
      fmt::print("{}", profile_keys_markdown());
      return kExitOk;
    }
    for (const auto& builtin : builtin_profiles()) {
      auto profile = load_builtin_profile(builtin.name);
      fmt::print("{:<8} {}{}\n", builtin.name, profile ? profile->description : profile.error(),
                 builtin.name == kDefaultProfile ? " (default)" : "");
    }
    return kExitOk;
  }
  if (*stats) {
    stats_view.sort_given = stats->count("--sort") > 0;
    return print_stats(stats_mount, stats_view);
  }
  if (*ctl) {
    ctl_words = ctl->remaining();
    if (ctl_words.empty()) {
      return usage_error(fmt::format("ctl: a COMMAND is required ({})", kControlCommands));
    }
    return send_control(ctl_mount, ctl_words);
  }
  if (*report) {
    return write_report(
        report_mount, report_out,
        report_rank == "allocated" ? ReportRanking::kAllocated : ReportRanking::kExtents);
  }
  return kExitUsage;
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
