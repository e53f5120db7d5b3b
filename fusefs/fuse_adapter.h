// FuseAdapter: the only code that knows libfuse's low-level callback table.
//
// Each callback decodes the request, calls the engine (or ControlFiles), and
// sends exactly one reply. No exception crosses into libfuse: bad_alloc becomes
// ENOMEM, anything else EIO, logged.
#pragma once

#include <atomic>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "backends/engine.h"
#include "fusefs/control_files.h"

namespace mimicfs {

struct AdapterOptions {
  // How long the kernel may cache names and attributes. Attributes default to 0 so
  // st_blocks is always the volume's current figure (tests read it after writes).
  double entry_timeout = 1.0;
  double attr_timeout = 0.0;
};

class FuseAdapter {
 public:
  FuseAdapter(Engine& engine, AdapterOptions options);

  // The session serving this adapter, for cache invalidation after `ctl crash`.
  void set_session(fuse_session* session) { session_.store(session); }

  // The callback table; pass `this` as userdata to fuse_session_new.
  static const fuse_lowlevel_ops& operations();

  FileSystem& fs() { return engine_.fs(); }
  ControlFiles& control() { return control_; }
  const AdapterOptions& options() const { return options_; }

 private:
  // Tells the kernel to forget entries and file pages a crash undid.
  void invalidate(const CrashReport& report);

  Engine& engine_;
  ControlFiles control_;
  const AdapterOptions options_;
  std::atomic<fuse_session*> session_{nullptr};
};

}  // namespace mimicfs
