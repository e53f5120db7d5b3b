// SPDX-License-Identifier: Apache-2.0
// FuseAdapter: the only code that knows libfuse's low-level callback table.
//
// Each callback decodes the request, calls the engine through the mount's
// ControlLayer (which answers MOUNT/.mimicfs/ itself), and sends exactly one
// reply. No exception crosses into libfuse: bad_alloc becomes
// ENOMEM, anything else EIO, logged.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "control/control_files.h"
#include "control/control_layer.h"
#include "engine/engine.h"
#include "fusefs/frozen_requests.h"
#include "fusefs/fuse_channel.h"
#include "fusefs/kernel_invalidations.h"

namespace mimicfs {

struct AdapterOptions {
  // How long the kernel may cache names and attributes. The kernel drops a file's
  // cached attributes after each write, truncate or fallocate it sends; what
  // changes them behind its back (allocation at a flush or sync, preallocation
  // trimmed at close, a set-ID bit cleared) is invalidated before the reply, so
  // st_blocks is the volume's current figure whatever the timeout. A crash
  // invalidates every file and the directories whose entries it changed, at
  // once for `ctl crash`, as soon as the kernel can take it for a crash rule
  // (after the reply of the operation it cut). Without a timeout each
  // stat, permission check on a path and read past the cached size costs a
  // GETATTR round trip.
  double entry_timeout = 1.0;
  double attr_timeout = 1.0;
};

class FuseAdapter {
 public:
  // The adapter of one mount, whose view of the volume is `fs`: engine.fs(),
  // or another NFS client (Engine::add_client). Both outlive the adapter.
  FuseAdapter(Engine& engine, FileSystem& fs, AdapterOptions options);
  ~FuseAdapter();
  FuseAdapter(const FuseAdapter&) = delete;
  FuseAdapter& operator=(const FuseAdapter&) = delete;

  // The session serving this adapter, for cache invalidation after a crash.
  void set_session(fuse_session* session) { kernel_.set_session(session); }
  // True once the session is ending (an unmount, a stop signal): what waits
  // for something else than the volume (a lock) gives up.
  bool session_ending() const {
    fuse_session* session = kernel_.session();
    return session != nullptr && fuse_session_exited(session) != 0;
  }
  // Starts the thread that tells the kernel what a crash inside an operation
  // undid (KernelInvalidations::start).
  void start() { kernel_.start(); }
  // The volume was restarted (`ctl restart` through this mount, or through
  // another the same daemon serves): the requests kept while it was frozen
  // are answered now, and the kernel is told what the crash undid before the
  // ctl write is answered.
  void restarted();
  // The session's loop ended: pending invalidations are dropped, and the
  // worker stops before the session goes.
  void detach();

  // The callback table; pass `this` as userdata to fuse_session_new.
  static const fuse_lowlevel_ops& operations();
  // What passes between the kernel and libfuse for this adapter's session.
  FuseChannel& channel() { return channel_; }

  // What the adapter's requests go through: the control files over the
  // mount's view of the volume.
  FileSystem& fs() { return control_layer_; }
  // The mount's view itself (engine.fs(), or its NFS client), as the engine
  // knows the mount.
  FileSystem& view() { return view_; }
  Engine& engine() { return engine_; }
  ControlFiles& control() { return control_; }
  const AdapterOptions& options() const { return options_; }

  // What the kernel of this session is told of changes behind its back.
  KernelInvalidations& kernel() { return kernel_; }
  // Keeps `req` while the volume is frozen, to be answered EIO at the restart
  // (FrozenRequests): true when kept, and the callback replies LaterReply.
  bool keep_while_frozen(fuse_req_t req) { return frozen_.park(req); }

 private:
  Engine& engine_;
  FileSystem& view_;
  ControlFiles control_;
  ControlLayer control_layer_;
  int crash_observer_ = 0;
  const AdapterOptions options_;
  FuseChannel channel_;
  KernelInvalidations kernel_;
  FrozenRequests frozen_;
};

}  // namespace mimicfs
