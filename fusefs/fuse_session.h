// SPDX-License-Identifier: Apache-2.0
// FuseSession: one mount of a FuseAdapter, and what serves it: the session's
// FuseChannel (routed through libfuse's custom I/O), its FUSE over io_uring
// transport (FuseRing) and libfuse 3.14's own multi-threaded loop for
// /dev/fuse. Everything a session needs is its own: a process may serve
// several, each on a thread of its own calling serve().
//
// libfuse's loop starts a worker when a request finds none waiting, up to
// kMaxThreads, and keeps them until the loop ends (max_idle_threads is
// kMaxThreads, so none ends: a lower idle limit makes libfuse 3.14 end and
// start a thread per request under a load of a few callers). A worker keeps its request buffer (1 MiB
// and a page), its read-reply buffer and malloc's per-thread caches, so the
// memory the workers hold is bounded by their number, not returned once the
// load has gone.
//
// The stop signals are the process's, not the session's: Daemon reads them on
// its main thread and ends every session (fuse_session_exit, then a signal
// that interrupts the loop's wait). So does FuseRing::fail's SIGTERM to the
// process, when a ring fails after it served.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <memory>
#include <string>

#include "engine/layers/fault_layer.h"
#include "engine/nfs/nfs_client_layer.h"
#include "fusefs/fuse_ring.h"

namespace mimicfs {

class FuseAdapter;

enum class IoUring {
  kAuto,  // the ring where the kernel offers it, /dev/fuse quietly where not
  kOn,    // likewise, with a warning where the kernel does not offer it
  kOff,   // /dev/fuse alone
};

class FuseSession {
 public:
  // libfuse's workers at most: more than the operations a frozen volume, an
  // NFS client's removals waiting for a close and the lock requests waiting
  // for a lock hold, so that ctl, stats.json, the RELEASE and the unlock
  // awaited still find one.
  static constexpr unsigned kMaxThreads = 16;
  static_assert(kMaxThreads > FaultLayer::kMaxFrozenOperations + NfsClientLayer::kMaxWaiters +
                                  RecordLocks::kMaxWaiters + 1);

  // Mounts `adapter` on `mountpoint` (fsname mimicfs-`profile`); error() says
  // why not, logged. `adapter` outlives the session.
  FuseSession(FuseAdapter& adapter, const std::string& mountpoint, const std::string& profile,
              IoUring io_uring);
  // Unmounts, if the kernel still has the mount.
  ~FuseSession();
  FuseSession(const FuseSession&) = delete;
  FuseSession& operator=(const FuseSession&) = delete;

  // Empty once mounted, else the one-line reason.
  const std::string& error() const { return error_; }
  fuse_session* get() const { return session_; }

  // Serves until the session exits (an unmount, a stop signal, a failed
  // read); every worker and ring thread has ended when it returns, and the
  // adapter is detached. libfuse's result: 0 after an unmount, the stop
  // signal's number, or a negative errno when serving failed (-ENOTCONN: the
  // session never mounted).
  int serve();

 private:
  void tear_down();

  FuseAdapter& adapter_;
  std::string error_;
  fuse_session* session_ = nullptr;
  bool mounted_ = false;
  std::unique_ptr<FuseRing> ring_;
};

}  // namespace mimicfs
