// SPDX-License-Identifier: Apache-2.0
// ControlFiles: the hidden MOUNT/.mimicfs/ directory, like a NAS's .snapshot:
// reachable by path, never listed, so a server scanning its data directory is not
// disturbed.
//
//   .mimicfs/stats.json  read: the StatsSnapshot as JSON, taken at open
//   .mimicfs/ctl         write a command (one per write; control_command.h)
//   .mimicfs/layout.json read: every file's extents and device positions, taken at open
//
// and the per-file xattrs user.mimicfs.{extents,fragments,unwritten_extents,
// allocated_bytes,holes,delayed_bytes,preallocated_bytes}, readable by name on
// every regular file and not listed (so cp -a and tar do not try to copy them). Knows nothing of
// libfuse.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace mimicfs {

class ControlFiles {
 public:
  static constexpr std::string_view kDirectoryName = ".mimicfs";
  // MOUNT/.mimicfs/FILE, for the commands that read or write it.
  static std::string path_in(const std::string& mountpoint, std::string_view file);
  static constexpr std::string_view kXattrPrefix = "user.mimicfs.";
  // Inode numbers below FileSystem::kFirstFileInode, which the volume never uses.
  static constexpr uint64_t kDirectoryInode = 2;
  static constexpr uint64_t kStatsInode = 3;
  static constexpr uint64_t kCtlInode = 4;
  static constexpr uint64_t kLayoutInode = 5;

  // The control files of the mount whose view of the volume is `fs` (its NFS
  // client, or the engine's top).
  ControlFiles(Engine& engine, FileSystem& fs) : engine_(engine), fs_(fs) {}

  static bool owns(uint64_t inode) { return inode >= kDirectoryInode && inode <= kLayoutInode; }
  // True for the name that may not be created in the root: ".mimicfs".
  static bool reserved(uint64_t parent, std::string_view name) {
    return parent == FileSystem::kRootInode && name == kDirectoryName;
  }

  // The control entry `name` in `parent`, or nullopt when the lookup is not ours.
  std::optional<Result<Attributes>> lookup(uint64_t parent, const std::string& name) const;
  Result<Attributes> getattr(uint64_t inode) const;
  Result<std::vector<DirectoryEntry>> read_directory(uint64_t inode) const;
  // What a reader of `inode` sees, fixed at open.
  Result<std::string> open_contents(uint64_t inode, int flags) const;
  // Executes one command written to ctl. EINVAL, logged, and nothing changed for
  // an unknown command or a malformed argument. `work` gets what the command did
  // to the volume (`sync`: the files whose attributes changed).
  Result<void> execute(std::string_view command, Work& work);

  // Set before any operation: called after `restart` powers the volume on,
  // before the ctl write is answered (the pending invalidations: the
  // adapter's own, or, where a daemon serves several mounts, every mount's).
  void after_restart(std::function<void()> hook) { after_restart_ = std::move(hook); }

  // Set once, before any operation: the crash observer (Engine::on_crash) of
  // this mount, told of a `ctl crash` written here at once.
  void set_crash_observer(int id) { crash_observer_ = id; }

  // Set once, before any operation: what `client mount DIR` calls (the
  // daemon's); an errno, logged, when the client cannot be mounted. Without
  // it the command gets EOPNOTSUPP.
  using ClientMounter = std::function<Result<void>(const std::string& mountpoint)>;
  void mount_clients_with(ClientMounter mounter) { mount_client_ = std::move(mounter); }

  // Set once, before any operation: stats.json's "fuse" object, what the
  // daemon's side of FUSE says of itself (the transport), which the engine
  // knows nothing of.
  void describe_fuse(std::function<nlohmann::json()> describe) {
    describe_fuse_ = std::move(describe);
  }

  // user.mimicfs.* on a regular file, or nullopt when `name` is not ours.
  std::optional<Result<std::string>> virtual_xattr(uint64_t inode, const std::string& name);

 private:
  Attributes attributes(uint64_t inode) const;
  Engine& engine_;
  FileSystem& fs_;
  std::function<void()> after_restart_;
  ClientMounter mount_client_;
  int crash_observer_ = 0;
  std::function<nlohmann::json()> describe_fuse_;
};

}  // namespace mimicfs
