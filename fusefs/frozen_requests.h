// SPDX-License-Identifier: Apache-2.0
// FrozenRequests: the requests that come while the volume is frozen (`ctl
// crash freeze`, a crash rule's restart=freeze), kept without a thread each
// and answered EIO at the restart. The program that sent one learns nothing of
// the cut meanwhile, however many it sends: a server with 64 threads in flight
// freezes whole, and the daemon's workers stay free for .mimicfs and the
// next requests. (The engine's own wait, FaultLayer::wait_while_frozen, holds
// a worker per request and so stops at kMaxFrozenOperations.)
//
// A kept request whose caller is dying is answered at once, which the dying
// process never sees: at its FUSE_INTERRUPT (the kernel sends one when a
// signal comes to a process waiting on a request it has sent,
// fs/fuse/dev.c's request_wait_answer), and within 100 ms otherwise (the
// kernel sends only one, and a fatal signal after a handled one would wait
// for the restart). Only requests read from /dev/fuse are kept: a FUSE over
// io_uring entry commits its reply when the callback returns
// (FuseRing::on_ring_thread), so those wait in the engine as before. So do
// an NFS client's: its layer answers some requests itself (a crashed
// client's EIO, ESTALE, a write-back error) and a hard mount's outage outlasts
// a restart, which the engine's own wait keeps.
//
// Thread-safety: park() on any request's thread, the interrupt on libfuse's,
// the answers on this object's own thread; one mutex, never held while a
// reply is sent.
#pragma once

#include <sys/types.h>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <thread>

#include "engine/base/thread_annotations.h"
#include "engine/engine.h"

namespace mimicfs {

class FrozenRequests {
 public:
  explicit FrozenRequests(Engine& engine) : engine_(engine) {}
  // Answers what is still kept (stop() first).
  ~FrozenRequests();
  FrozenRequests(const FrozenRequests&) = delete;
  FrozenRequests& operator=(const FrozenRequests&) = delete;

  // Keeps `req` when the volume is frozen and the request can be answered
  // later: true when kept, and the caller sends no reply.
  bool park(fuse_req_t req) EXCLUDES(mutex_);
  // The session ends: every kept request is answered EIO, and the thread ends.
  void stop() EXCLUDES(mutex_);
  // The volume was restarted: answer now what it releases (the thread looks
  // every 100 ms anyway, for a restart told elsewhere).
  void wake() EXCLUDES(mutex_);
  // Requests kept now.
  size_t kept() EXCLUDES(mutex_);

 private:
  struct Kept {
    uint64_t id;  // a request's memory may be another's once answered
    fuse_req_t req;
    uint64_t restarts;  // Engine::restarts() when it came: answered past it
    uid_t uid;
    gid_t gid;
    pid_t tid;
  };
  static void interrupted(fuse_req_t req, void* self);
  // The thread: answers what a restart or a caller's death releases.
  void answer_released() EXCLUDES(mutex_);
  // Takes the kept requests `release` picks out of the list.
  template <typename Release>
  std::list<Kept> take(Release&& release) REQUIRES(mutex_);
  void answer(const std::list<Kept>& requests);

  Engine& engine_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::list<Kept> kept_ GUARDED_BY(mutex_);
  uint64_t last_id_ GUARDED_BY(mutex_) = 0;
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::thread thread_ GUARDED_BY(mutex_);  // started at the first request kept
};

}  // namespace mimicfs
