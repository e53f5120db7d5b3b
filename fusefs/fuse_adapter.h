// SPDX-License-Identifier: Apache-2.0
// FuseAdapter: the only code that knows libfuse's low-level callback table.
//
// Each callback decodes the request, calls the engine (or ControlFiles), and
// sends exactly one reply. No exception crosses into libfuse: bad_alloc becomes
// ENOMEM, anything else EIO, logged.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "control/control_files.h"
#include "engine/engine.h"
#include "fusefs/frozen_requests.h"
#include "fusefs/fuse_channel.h"

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
  void set_session(fuse_session* session) { session_.store(session); }
  // True once the session is ending (an unmount, a stop signal): what waits
  // for something else than the volume (a lock) gives up.
  bool session_ending() const {
    fuse_session* session = session_.load();
    return session != nullptr && fuse_session_exited(session) != 0;
  }
  // Starts the thread that tells the kernel what a crash inside an operation
  // undid: call after fuse_daemonize (a thread does not survive its fork), on
  // the serving thread, so that it does not start on a request's thread and
  // inherit its CPU and policy (a ring thread's: fusefs/fuse_ring.h).
  void start();
  // The session's loop ended: pending invalidations are dropped, and the
  // worker stops before the session goes.
  void detach();

  // The callback table; pass `this` as userdata to fuse_session_new.
  static const fuse_lowlevel_ops& operations();
  // What passes between the kernel and libfuse for this adapter's session.
  FuseChannel& channel() { return channel_; }

  FileSystem& fs() { return fs_; }
  Engine& engine() { return engine_; }
  ControlFiles& control() { return control_; }
  const AdapterOptions& options() const { return options_; }

  // Tells the kernel that these inodes' attributes changed behind its back
  // (Work::changed_attributes); safe inside a request, before its reply.
  void invalidate_attributes(const std::vector<uint64_t>& inodes);
  // Drops the kernel's cached pages and attributes of `inode`: an NFS client
  // revalidated it and found new data (Work::drop_cached_pages). Safe inside
  // a GETATTR or LOOKUP, before its reply.
  void drop_pages(uint64_t inode);
  // The same, by the worker once the request that asks has been answered
  // (a WRITE holds the pages it writes until then).
  void drop_pages_after_reply(uint64_t inode);

  // True while a crash rule's invalidations are queued or being told to the
  // kernel: an open then asks the kernel to drop the file's cached pages itself
  // (no keep_cache), so it never finds pages of the world the crash ended. It
  // does not wait for the worker: under a freeze that waits for the restart.
  bool invalidations_pending() const { return pending_.load() > 0; }

  // Waits until the worker told the kernel everything queued, at most `limit`.
  void wait_for_invalidations(std::chrono::milliseconds limit);

  // Keeps `req` while the volume is frozen, to be answered EIO at the restart
  // (FrozenRequests): true when kept, and the callback replies LaterReply.
  bool keep_while_frozen(fuse_req_t req) { return frozen_.park(req); }

 private:
  // Tells the kernel to forget entries and file pages a crash undid.
  void invalidate(const CrashReport& report);
  // The same for a crash inside an operation (a crash rule): the request may
  // hold locks the kernel's invalidation needs until its reply is sent, so a
  // worker does it after.
  void invalidate_later(CrashReport report);
  void start_worker_locked();  // with queue_mutex_ held

  Engine& engine_;
  FileSystem& fs_;
  ControlFiles control_;
  int crash_observer_ = 0;
  const AdapterOptions options_;
  FuseChannel channel_;
  std::atomic<fuse_session*> session_{nullptr};
  std::mutex queue_mutex_;
  std::condition_variable queue_changed_;
  std::deque<CrashReport> queue_;  // guarded by queue_mutex_
  bool invalidating_ = false;      // guarded by queue_mutex_
  // Reports queued or being told to the kernel; read without the lock by opens.
  std::atomic<int> pending_{0};
  bool stopping_ = false;          // guarded by queue_mutex_
  // Started by start(), after fuse_daemonize's fork (or at the first crash
  // inside an operation, where nothing called start()).
  std::thread worker_;
  FrozenRequests frozen_;
};

}  // namespace mimicfs
