// SPDX-License-Identifier: Apache-2.0
#include "cli/mount_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "cli/client_command.h"
#include "engine/data/host_data_store.h"
#include "engine/time/emulated_clock.h"
#include "fusefs/mount.h"
#include "host/mount_checks.h"

namespace mimicfs {
namespace {

struct MountChoice {
  std::string mountpoint;
  ProfileChoice profile;
  TimeChoice time;
  DaemonChoice daemon;
  bool foreground = false;
  std::string data_dir;
  std::string client_of;
};

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

int mount(const CLI::App& command, MountChoice& choice) {
  set_up_logging(choice.daemon.log_level, choice.daemon.log_file);
  auto profile = chosen_profile(choice.profile);
  if (!profile) return usage_error(profile.error());
  if (auto why = check_mountpoint(choice.mountpoint); !why.empty()) return usage_error(why);
  // libfuse unmounts by this path after a stop signal, from / (the daemon's
  // working directory once it is in the background).
  std::error_code canonical_error;
  const std::string mountpoint =
      std::filesystem::canonical(choice.mountpoint, canonical_error).string();
  if (canonical_error) {
    return usage_error(fmt::format("mountpoint: {}", canonical_error.message()));
  }
  auto latency = LatencyMode::parse(choice.time.latency);
  if (!latency) return usage_error(latency.error());
  if (auto why = check_fault_rules(choice.time.faults); !why.empty()) return usage_error(why);
  if (auto why = check_fuse_device(); !why.empty()) return usage_error(why);
  AdapterOptions adapter;
  adapter.attr_timeout = choice.daemon.attr_timeout;
  MountOptions options{mountpoint, std::move(*profile), choice.foreground, adapter,
                       *latency,   choice.time.faults,  nullptr};
  options.io_uring = choice.daemon.io_uring == "on"    ? MountOptions::IoUring::kOn
                     : choice.daemon.io_uring == "off" ? MountOptions::IoUring::kOff
                                                       : MountOptions::IoUring::kAuto;
  if (command.count("--data-dir") > 0) {
    if (auto why = check_data_dir_apart(choice.data_dir, mountpoint); !why.empty()) {
      return usage_error(why);
    }
    auto store = HostDataStore::open(choice.data_dir);
    if (!store) return usage_error(store.error());
    auto image = (*store)->load_volume();
    if (!image) return usage_error(image.error());
    if (*image) {
      if (auto why = check_saved_profile(choice.data_dir, **image, options.profile);
          !why.empty()) {
        return usage_error(why);
      }
    }
    options.data_dir = store->get();
    options.image = std::move(*image);
    options.store = std::move(*store);
  }
  return mount_and_serve(std::move(options));
}

// The daemon of CLIENT_OF serves the new client with its own settings.
int mount_client(const CLI::App& command, const MountChoice& choice) {
  for (const char* option : {"--profile", "--profile-file", "--set", "--latency", "--fault",
                             "--foreground", "--log-level", "--log-file", "--attr-timeout",
                             "--data-dir"}) {
    if (command.count(option) > 0) {
      return usage_error(fmt::format("mount: {} cannot be given with --client-of: a client is "
                                     "served by the daemon of {}, with its settings",
                                     option, choice.client_of));
    }
  }
  return mount_client_of(choice.client_of, choice.mountpoint);
}

}  // namespace

void add_mount_command(CLI::App& app, CommandAction& action) {
  auto choice = std::make_shared<MountChoice>();
  choice->daemon.attr_timeout = AdapterOptions{}.attr_timeout;  // the adapter's default
  CLI::App* command =
      app.add_subcommand("mount", "Mount an emulated volume on an empty directory");
  add_profile_options(*command, choice->profile);
  add_time_options(*command, choice->time);
  command->add_flag("-f,--foreground", choice->foreground,
                    "Serve in the foreground until unmounted");
  add_daemon_options(*command, choice->daemon);
  command->add_option("--data-dir", choice->data_dir, kDataDirHelp);
  command->add_option("--client-of", choice->client_of,
                      "Mount DIR as another NFS client of the volume mounted on this directory, "
                      "served by its daemon (nfs profiles; see docs/nfs.md)");
  command->add_option("DIR", choice->mountpoint, "Empty directory to mount on")->required();
  command->callback([command, choice, &action] {
    action = [command, choice] {
      return choice->client_of.empty() ? mount(*command, *choice)
                                       : mount_client(*command, *choice);
    };
  });
}

}  // namespace mimicfs
