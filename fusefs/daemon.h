// SPDX-License-Identifier: Apache-2.0
// Daemon: every FUSE session one mimicfs process serves, over one Engine: the
// mount it was started for and, on NFS profiles, the clients mounted later by
// `mimicfs mount --client-of` (ctl `client mount DIR`). Each session has its
// adapter, its own view of the volume (its NFS client) and a thread calling
// FuseSession::serve(); unmounting one leaves the others serving.
//
// The stop signals are the process's: every thread keeps them blocked and
// serve() reads them from a signalfd. A stop ends every session: each is
// marked exited and its serving thread woken by kWakeSignal (libfuse's loop
// waits for its workers in an interruptible sem_wait, then cancels them).
//
// Thread-safety: `client mount` comes on a request's thread, serve() runs on
// the main one. One mutex for the session list, never held while a session
// mounts or ends: a request waiting for it would keep its session from ending.
#pragma once

#include <signal.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/base/thread_annotations.h"
#include "engine/engine.h"
#include "fusefs/fuse_adapter.h"
#include "fusefs/fuse_session.h"

namespace mimicfs {

class Daemon {
 public:
  // Interrupts a serving thread's wait once its session is marked exited.
  static constexpr int kWakeSignal = SIGUSR1;

  Daemon(Engine& engine, std::string profile, AdapterOptions adapter, IoUring io_uring);
  // Ends and unmounts every session still there.
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Mounts the engine's own view of the volume (Engine::fs()) on
  // `mountpoint`, not served yet: the one-line reason when it cannot, logged.
  std::string mount_first(const std::string& mountpoint);

  // Serves every session, and those mounted meanwhile, until all are
  // unmounted or one of `stop_signals` (blocked in every thread) arrives.
  // Call after fuse_daemonize: it starts the threads. 0, or the first
  // session's failure as a negative errno.
  int serve(const sigset_t& stop_signals);

 private:
  struct Session {
    std::string mountpoint;
    FileSystem* fs = nullptr;  // its NFS client, or the engine's top
    std::unique_ptr<FuseAdapter> adapter;
    std::unique_ptr<FuseSession> fuse;
    std::thread thread;
    std::atomic<bool> ended{false};
    int status = 0;
  };

  // A session of `fs` mounted on `mountpoint`, or the reason it cannot be.
  std::unique_ptr<Session> mount(const std::string& mountpoint, FileSystem& fs,
                                 std::string& error);
  // ctl `client mount DIR`: another NFS client, served from serve()'s thread.
  Result<void> mount_client(const std::string& mountpoint) EXCLUDES(mutex_);
  void start(Session& session);
  // Unmounts and frees a session whose thread has ended (or never started).
  void end(std::unique_ptr<Session> session);
  bool any_session_exited() EXCLUDES(mutex_);
  // `ctl restart` through any session: every session's adapter answers the
  // requests it kept while frozen and tells its kernel what the power cut
  // undid (FuseAdapter::restarted). One adapter's own hook, which this
  // replaces, would reach its own mount only.
  void restarted() EXCLUDES(mutex_);
  // Whether one of two canonical paths is the other or lies under it.
  static bool nested(const std::string& a, const std::string& b);
  void wake_main();

  Engine& engine_;
  const std::string profile_;
  const AdapterOptions adapter_options_;
  const IoUring io_uring_;
  int wake_fd_ = -1;  // an eventfd: a session ended or was mounted
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::vector<std::unique_ptr<Session>> serving_ GUARDED_BY(mutex_);
  std::vector<std::unique_ptr<Session>> mounted_ GUARDED_BY(mutex_);  // to start
  // Every session's mount point, and those being mounted.
  std::vector<std::string> claimed_ GUARDED_BY(mutex_);
};

}  // namespace mimicfs
