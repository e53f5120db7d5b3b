// SPDX-License-Identifier: Apache-2.0
#include "control/control_files.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <filesystem>

#include "control/control_command.h"
#include "engine/time/duration.h"

namespace mimicfs {

std::string ControlFiles::path_in(const std::string& mountpoint, std::string_view file) {
  return (std::filesystem::path(mountpoint) / kDirectoryName / file).string();
}

Attributes ControlFiles::attributes(uint64_t inode) const {
  Attributes a;
  a.inode = inode;
  a.nlink = 1;
  a.block_size = 4096;
  if (inode == kDirectoryInode) {
    a.mode = S_IFDIR | 0555;
    a.nlink = 2;
  } else if (inode == kStatsInode || inode == kLayoutInode) {
    a.mode = S_IFREG | 0444;
  } else {
    a.mode = S_IFREG | 0200;
  }
  return a;
}

std::optional<Result<Attributes>> ControlFiles::lookup(uint64_t parent,
                                                       const std::string& name) const {
  if (reserved(parent, name)) return attributes(kDirectoryInode);
  if (parent != kDirectoryInode) return std::nullopt;
  if (name == "stats.json") return attributes(kStatsInode);
  if (name == "ctl") return attributes(kCtlInode);
  if (name == "layout.json") return attributes(kLayoutInode);
  if (name == ".") return attributes(kDirectoryInode);
  if (name == "..") return fs_.getattr(FileSystem::kRootInode);
  return fail(ENOENT);
}

Result<Attributes> ControlFiles::getattr(uint64_t inode) const { return attributes(inode); }

Result<std::vector<DirectoryEntry>> ControlFiles::read_directory(uint64_t inode) const {
  if (inode != kDirectoryInode) return fail(ENOTDIR);
  return std::vector<DirectoryEntry>{{".", kDirectoryInode, S_IFDIR},
                                     {"..", FileSystem::kRootInode, S_IFDIR},
                                     {"ctl", kCtlInode, S_IFREG},
                                     {"layout.json", kLayoutInode, S_IFREG},
                                     {"stats.json", kStatsInode, S_IFREG}};
}

Result<std::string> ControlFiles::open_contents(uint64_t inode, int flags) const {
  const int access = flags & O_ACCMODE;
  if (inode == kDirectoryInode) return fail(EISDIR);
  if (inode == kStatsInode) {
    if (access != O_RDONLY) return fail(EACCES);
    nlohmann::json stats = to_json(fs_.snapshot());
    if (describe_fuse_) stats["fuse"] = describe_fuse_();
    return stats.dump(2) + "\n";
  }
  if (inode == kLayoutInode) {
    if (access != O_RDONLY) return fail(EACCES);
    return to_json(fs_.layout()).dump() + "\n";
  }
  if (access == O_RDONLY) return fail(EACCES);
  return std::string();
}

Result<void> ControlFiles::execute(std::string_view text, Work& work) {
  auto command = parse_control_command(text);
  if (!command) {
    spdlog::warn("ctl: {}", command.error());
    return fail(EINVAL);
  }
  if (std::holds_alternative<ResetCommand>(*command)) {
    fs_.reset_statistics();  // an NFS client's resets every client's
    spdlog::info("ctl: counters reset");
  } else if (const auto* crash = std::get_if<CrashCommand>(&*command)) {
    if (!crash->client) {
      engine_.crash(crash->cut, false, crash_observer_);
    } else if (!engine_.crash_client(fs_, crash->cut.hold, crash_observer_)) {
      spdlog::warn("ctl: crash --client: not an NFS profile (client.nfs), there is no client");
      return fail(EINVAL);
    } else {
      spdlog::warn("ctl: client crash{}", crash->cut.hold ? "; it stays down until `restart`" : "");
    }
  } else if (std::holds_alternative<SyncCommand>(*command)) {
    if (!engine_.powered()) return fail(EIO);  // held off: nothing reaches the volume
    fs_.sync_all(work);
    spdlog::info("ctl: everything is durable");
  } else if (std::holds_alternative<RestartCommand>(*command)) {
    // A held client's restart, or the volume's (both, when both are held).
    const bool client_up = engine_.restart_client(fs_);
    if (client_up) spdlog::info("ctl: client up");
    if (!client_up || !engine_.powered()) engine_.power_on();
    if (after_restart_) after_restart_();
    spdlog::info("ctl: powered on");
  } else if (std::holds_alternative<SettleCommand>(*command)) {
    spdlog::info("ctl: {} deferred tasks completed", fs_.complete_all_deferred());
  } else if (std::holds_alternative<FaultClearCommand>(*command)) {
    engine_.faults().clear();
    spdlog::info("ctl: fault rules cleared");
  } else if (const auto* add = std::get_if<FaultAddCommand>(&*command)) {
    if (auto added = engine_.faults().add(add->rule); !added) {
      spdlog::warn("ctl: {}", added.error());
      return fail(EINVAL);
    }
    spdlog::info("ctl: fault rule added: {}", add->rule);
  } else if (const auto* latency = std::get_if<LatencyCommand>(&*command)) {
    engine_.cost().set_latency(latency->mode);
    spdlog::info("ctl: latency {}", latency->mode.to_string());
  } else if (const auto* time = std::get_if<TimeAdvanceCommand>(&*command)) {
    // Real latency mode's clock is the host's: time passes by itself.
    if (engine_.cost().latency().real) {
      spdlog::warn("ctl: time advance needs virtual latency (the clock is {})",
                   engine_.cost().latency().to_string());
      return fail(EINVAL);
    }
    engine_.advance(time->ns, work);
    spdlog::info("ctl: {} of idle time passed", format_duration(time->ns));
  } else if (const auto* server = std::get_if<ServerCommand>(&*command)) {
    using Action = ServerCommand::Action;
    const char* const what = server->action == Action::kDown ? "down"
                             : server->action == Action::kUp ? "up"
                                                             : "restart";
    const bool served = server->action == Action::kRestart
                            ? engine_.restart_server(server->grace_ns)
                            : engine_.set_server_up(server->action == Action::kUp);
    if (!served) {
      spdlog::warn("ctl: server {}: not an NFS profile (client.nfs), there is no server", what);
      return fail(EINVAL);
    }
    spdlog::info("ctl: server {}", what);
  } else if (const auto* client = std::get_if<ClientMountCommand>(&*command)) {
    if (!mount_client_) return fail(EOPNOTSUPP);
    return mount_client_(client->mountpoint);
  }
  return {};
}

std::optional<Result<std::string>> ControlFiles::virtual_xattr(uint64_t inode,
                                                               const std::string& name) {
  if (!name.starts_with(kXattrPrefix)) return std::nullopt;
  auto stats = fs_.file_stats(inode);
  if (!stats) return std::unexpected(stats.error());
  const std::string key = name.substr(kXattrPrefix.size());
  uint64_t value;
  if (key == "extents") {
    value = stats->extents;
  } else if (key == "fragments") {
    value = stats->fragments;
  } else if (key == "unwritten_extents") {
    value = stats->unwritten_extents;
  } else if (key == "allocated_bytes") {
    value = stats->allocated_bytes;
  } else if (key == "holes") {
    value = stats->holes;
  } else if (key == "delayed_bytes") {
    value = stats->delayed_bytes;
  } else if (key == "preallocated_bytes") {
    value = stats->preallocated_bytes;
  } else if (key == "first_group") {
    if (!stats->first_group) return fail(ENODATA);  // no block yet
    value = *stats->first_group;
  } else {
    return fail(ENODATA);
  }
  return std::to_string(value);
}

}  // namespace mimicfs
