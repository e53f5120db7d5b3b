// SPDX-License-Identifier: Apache-2.0
// KernelInvalidations: tells the kernel of one session what changed behind
// its back, so that it asks the volume again: attributes that moved (a flush's
// allocation, a set-ID bit cleared), pages another NFS client made old, and
// the entries and pages a power cut undid (fuse_lowlevel_notify_inval_inode
// and _entry).
//
// The kernel's invalidation of pages waits for the locks of those pages,
// which a request being served may hold until its reply; what cannot be told
// at once (a crash inside an operation, pages a WRITE holds) goes to a worker
// thread that tells it after.
//
// Thread-safety: any thread; queue_mutex_ is a leaf lock, never held while
// the kernel is told.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "engine/base/thread_annotations.h"
#include "engine/engine.h"

namespace mimicfs {

class FuseAdapter;

class KernelInvalidations {
 public:
  // `engine` says whether the volume is powered (drop_pages).
  explicit KernelInvalidations(Engine& engine) : engine_(engine) {}
  ~KernelInvalidations() { stop(); }
  KernelInvalidations(const KernelInvalidations&) = delete;
  KernelInvalidations& operator=(const KernelInvalidations&) = delete;

  fuse_session* session() const { return session_.load(); }

  // These inodes' attributes changed (Work::changed_attributes); safe inside
  // a request, before its reply.
  void invalidate_attributes(const std::vector<uint64_t>& inodes);
  // `inode`'s pages and attributes (an NFS client found new data:
  // Work::drop_cached_pages); safe inside a GETATTR or LOOKUP, before its
  // reply. On a volume held off or frozen, by the worker.
  void drop_pages(uint64_t inode) EXCLUDES(queue_mutex_);
  // The same, by the worker once the request that asks has been answered (a
  // WRITE holds the pages it writes until then).
  void drop_pages_after_reply(uint64_t inode) EXCLUDES(queue_mutex_);
  // The entries and pages a crash undid, now (`ctl crash`, which holds no
  // lock of these files) or by the worker after the reply of the operation
  // it cut (a crash rule).
  void invalidate(const CrashReport& report);
  void invalidate_later(CrashReport report) EXCLUDES(queue_mutex_);

  // True while reports are queued or being told: an open then asks the kernel
  // to drop the file's pages itself (no keep_cache), so it never finds pages
  // of the world a crash ended. It does not wait for the worker: under a
  // freeze that waits for the restart.
  bool pending() const { return pending_.load() > 0; }
  // Waits until the worker told everything queued, at most `limit`.
  void wait(std::chrono::milliseconds limit) EXCLUDES(queue_mutex_);

 private:
  // Its session's life is the adapter's to order (FuseAdapter::detach).
  friend class FuseAdapter;
  // The session told; none before it is set, or after stop().
  void set_session(fuse_session* session) { session_.store(session); }
  // Starts the worker: after fuse_daemonize (a thread does not survive its
  // fork), on the serving thread, so that it does not inherit a request
  // thread's CPU and policy (a ring thread's: fusefs/fuse_ring.h).
  void start() EXCLUDES(queue_mutex_);
  // Drops what is queued, ends the worker and forgets the session.
  void stop() EXCLUDES(queue_mutex_);

  void start_worker() REQUIRES(queue_mutex_);
  // The worker: tells the kernel each report queued, until stop().
  void tell_queued() EXCLUDES(queue_mutex_);

  Engine& engine_;
  std::atomic<fuse_session*> session_{nullptr};
  std::mutex queue_mutex_;
  std::condition_variable queue_changed_;
  std::deque<CrashReport> queue_ GUARDED_BY(queue_mutex_);
  bool telling_ GUARDED_BY(queue_mutex_) = false;  // the worker took a report
  bool stopping_ GUARDED_BY(queue_mutex_) = false;
  // Reports queued or being told; read without the lock by opens.
  std::atomic<int> pending_{0};
  // Started by start(), or at the first report queued where nothing called it.
  std::thread worker_;
};

}  // namespace mimicfs
