// SPDX-License-Identifier: Apache-2.0
// FuseWorkers: the threads that take requests from /dev/fuse and serve them,
// in place of libfuse 3.14's fuse_session_loop_mt, which never ends an idle
// worker: its max_idle_threads (-1 by default) ends one the moment more than
// that many wait, so a program that sends one request at a time makes it
// start and end a thread per request. A worker that stays keeps what the
// requests it served left it: its 1 MiB request buffer (whose pages the heap
// trimmer has it drop, request_buffers.h), and malloc's per-thread caches of
// freed chunks (tcache), which glibc empties only when the thread ends, and
// whose chunks keep heap pages resident. After a burst of 19 threads the
// daemon kept 9 MiB.
//
// As libfuse's loop: a worker that takes a request (but a FORGET) when no
// other waits for one starts another first, up to max_workers (16), so below
// that a request does not wait for a worker while others are busy; each
// serves its request through libfuse (fuse_session_process_buf); the stop
// signals are blocked in the workers. Unlike it: end_idle() (the heap
// trimmer's check: after a quiet second that followed work, and every tenth
// second under a load that never ends) ends the workers waiting for a
// request, all but one; their caches go back to malloc as they end, and the
// trimmer checks once more to give the pages back. A worker that ended is
// started again by the next request that finds none waiting: under a
// steady load, the spare workers end and start again about once in ten
// seconds.
//
// The serving thread (run) waits on an eventfd that a worker that ends and a
// stop signal (SIGINT, SIGTERM, SIGHUP, whose handlers run() installs for its
// duration: libfuse's would only mark the session exited, and nothing would
// wake a thread waiting for a request) write to. An unmount ends every
// worker's read (ENODEV). Once the session has exited every worker is asked to
// end (request_buffers::end_wait ends a wait in read(2)) and joined.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <thread>

#include "backends/thread_annotations.h"

namespace mimicfs {

class FuseWorkers {
 public:
  FuseWorkers(fuse_session* session, size_t max_workers);
  ~FuseWorkers();
  FuseWorkers(const FuseWorkers&) = delete;
  FuseWorkers& operator=(const FuseWorkers&) = delete;

  // Serves until the session exits (an unmount, a stop signal, a failed
  // read); every worker has ended when it returns. A negative errno when a
  // read failed, else the number of the stop signal it caught, else 0 (an
  // unmount, or a signal libfuse's handler caught before run() began): the
  // results fuse_session_loop_mt gives, but for that signal's number.
  int run() EXCLUDES(mutex_);
  // Asks the workers waiting for a request to end, all but one; returns how
  // many. Any thread.
  size_t end_idle() EXCLUDES(mutex_);
  // Workers now, and started since run() began.
  size_t workers() EXCLUDES(mutex_);
  uint64_t started() EXCLUDES(mutex_);

 private:
  struct Worker {
    std::thread thread;
    pthread_t handle{};
    bool waiting = false;  // in fuse_session_receive_buf, or on its way to its first
    bool leaving = false;  // asked to end: it ends before its next read
    bool done = false;     // ended: to be joined
  };

  void serve(Worker* self) EXCLUDES(mutex_);
  // Starts a worker, unless max_workers stay; false when none was started
  // (logged when the thread cannot be made).
  bool start_worker() REQUIRES(mutex_);
  // Workers waiting for a request and not leaving.
  size_t ready() const REQUIRES(mutex_);
  // Workers neither leaving nor ended: what max_workers counts.
  size_t staying() const REQUIRES(mutex_);
  // The workers that ended, out of the list, to be joined without the lock.
  std::list<Worker> take_done() REQUIRES(mutex_);
  static void join(std::list<Worker> done);
  // Wakes run().
  void wake() const;

  fuse_session* const session_;
  const size_t max_workers_;
  const int wake_fd_;        // an eventfd; -1 if it could not be made
  const int wake_fd_error_;  // why not (run() fails with it)
  std::mutex mutex_;
  std::list<Worker> workers_ GUARDED_BY(mutex_);
  uint64_t started_ GUARDED_BY(mutex_) = 0;
  int error_ GUARDED_BY(mutex_) = 0;  // a read's negative errno
};

}  // namespace mimicfs
