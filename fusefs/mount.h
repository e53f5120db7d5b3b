// SPDX-License-Identifier: Apache-2.0
// Mounting a Volume through the kernel and serving it until unmounted.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/data_store.h"
#include "engine/data/host_data_store.h"
#include "engine/profile/profile.h"
#include "engine/time/emulated_clock.h"
#include "fusefs/fuse_adapter.h"
#include "fusefs/fuse_session.h"

namespace mimicfs {

struct MountOptions {
  std::string mountpoint;
  Profile profile;
  bool foreground = false;
  AdapterOptions adapter;
  LatencyMode latency;              // --latency
  std::vector<std::string> faults;  // --fault rules, already checked
  std::unique_ptr<DataStore> store;  // --data-dir's store, opened; null: file contents in memory
  // The same store, which the volume is saved into at unmount (null: none),
  // and the volume it saved last time, checked against the profile (none: new).
  HostDataStore* data_dir = nullptr;
  std::optional<ImageJson> image;
  // --io-uring: FUSE over io_uring (fuse_ring.h) where the kernel offers it,
  // quietly (auto, the default) or with a warning where it does not (on); or
  // /dev/fuse alone (off).
  using IoUring = mimicfs::IoUring;
  IoUring io_uring = IoUring::kAuto;
};

// Mounts and serves until SIGINT, SIGTERM, SIGHUP or an unmount. Without
// `foreground` it returns in the parent (kExitOk) once the mount is in place and
// serves from a detached child. With a data directory the saved volume is
// restored first (one line and kExitUsage when it cannot be), and the volume is
// saved into it after the unmount. Returns an exit status (exit_status.h).
int mount_and_serve(MountOptions options);

}  // namespace mimicfs
