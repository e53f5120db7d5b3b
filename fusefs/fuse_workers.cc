// SPDX-License-Identifier: Apache-2.0
#include "fusefs/fuse_workers.h"

#include <linux/fuse.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>
#include <system_error>

#include "fusefs/request_buffers.h"

namespace mimicfs {
namespace {

// What the stop signals' handler reaches: one run() at a time.
std::atomic<fuse_session*> stopping_session{nullptr};
std::atomic<int> stopping_wake_fd{-1};
volatile sig_atomic_t stop_signal = 0;

constexpr std::array<int, 3> kStopSignals = {SIGINT, SIGTERM, SIGHUP};

// As libfuse's: the session exits; and run() wakes. Both async-signal-safe.
void on_stop_signal(int signal) {
  const int saved_errno = errno;
  stop_signal = signal;
  if (fuse_session* session = stopping_session.load()) fuse_session_exit(session);
  if (const int fd = stopping_wake_fd.load(); fd >= 0) (void)eventfd_write(fd, 1);
  errno = saved_errno;
}

// Whether a request, as read, is one a worker serves without a reply in a
// moment (a FORGET): libfuse's loop starts no worker for it either.
bool is_forget(const fuse_buf& buffer, int length) {
  if ((buffer.flags & FUSE_BUF_IS_FD) != 0 || length < static_cast<int>(sizeof(fuse_in_header))) {
    return false;
  }
  fuse_in_header header;
  std::memcpy(&header, buffer.mem, sizeof header);
  return header.opcode == FUSE_FORGET || header.opcode == FUSE_BATCH_FORGET;
}

}  // namespace

FuseWorkers::FuseWorkers(fuse_session* session, size_t max_workers)
    : session_(session),
      max_workers_(max_workers < 1 ? 1 : max_workers),
      wake_fd_(eventfd(0, EFD_CLOEXEC)),
      wake_fd_error_(wake_fd_ < 0 ? errno : 0) {}

FuseWorkers::~FuseWorkers() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void FuseWorkers::wake() const { (void)eventfd_write(wake_fd_, 1); }

size_t FuseWorkers::ready() const {
  size_t count = 0;
  for (const Worker& worker : workers_) count += worker.waiting && !worker.leaving;
  return count;
}

size_t FuseWorkers::staying() const {
  size_t count = 0;
  for (const Worker& worker : workers_) count += !worker.leaving && !worker.done;
  return count;
}

bool FuseWorkers::start_worker() {
  if (staying() >= max_workers_) return false;
  // As libfuse's workers: the stop signals go to the other threads (and to
  // the ring's, which a worker starts at INIT, as before).
  sigset_t stop_signals, before;
  sigemptyset(&stop_signals);
  for (int signal : kStopSignals) sigaddset(&stop_signals, signal);
  sigaddset(&stop_signals, SIGQUIT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &before);
  Worker& worker = workers_.emplace_back();
  worker.waiting = true;  // on its way to its first read: it counts as ready
  bool started = true;
  try {
    worker.thread = std::thread([this, &worker] { serve(&worker); });
    worker.handle = worker.thread.native_handle();
    ++started_;
  } catch (const std::system_error& e) {
    spdlog::warn("cannot start a worker thread: {}", e.what());
    workers_.pop_back();
    started = false;
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return started;
}

std::list<FuseWorkers::Worker> FuseWorkers::take_done() {
  std::list<Worker> done;
  for (auto it = workers_.begin(); it != workers_.end();) {
    auto next = std::next(it);
    if (it->done) done.splice(done.end(), workers_, it);
    it = next;
  }
  return done;
}

void FuseWorkers::join(std::list<Worker> done) {
  // Outside the lock: a thread's end gives its malloc cache back, under the
  // arenas' locks, which a trim may hold for milliseconds.
  for (Worker& worker : done) worker.thread.join();
}

void FuseWorkers::serve(Worker* self) {
  pthread_setname_np(pthread_self(), "mimicfs-worker");
  fuse_buf buffer{};  // libfuse gives it its memory at the first read
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (self->leaving || fuse_session_exited(session_)) break;
      self->waiting = true;
    }
    const int received = fuse_session_receive_buf(session_, &buffer);
    {
      std::lock_guard lock(mutex_);
      self->waiting = false;
      if (received == -EINTR || received == -EAGAIN) continue;  // the loop's top says
      if (received <= 0) {
        // 0: the device is gone (an unmount; libfuse has the session exit).
        if (received < 0) {
          error_ = received;
          spdlog::error("reading /dev/fuse: {}", std::strerror(-received));
        }
        fuse_session_exit(session_);
        break;
      }
      // As libfuse's loop: the next request finds a worker waiting for it
      // (a FORGET is served at once, with no reply).
      if (ready() == 0 && !is_forget(buffer, received)) (void)start_worker();
    }
    fuse_session_process_buf(session_, &buffer);
  }
  std::free(buffer.mem);
  {
    std::lock_guard lock(mutex_);
    self->done = true;
  }
  wake();
}

int FuseWorkers::run() {
  if (wake_fd_ < 0) {
    spdlog::error("cannot serve /dev/fuse: eventfd: {}", std::strerror(wake_fd_error_));
    return -wake_fd_error_;
  }
  struct sigaction stop{};
  stop.sa_handler = on_stop_signal;
  sigemptyset(&stop.sa_mask);
  stop.sa_flags = 0;  // no SA_RESTART: a wait the signal lands in ends
  std::array<struct sigaction, kStopSignals.size()> before{};
  stop_signal = 0;
  stopping_session.store(session_);
  stopping_wake_fd.store(wake_fd_);
  for (size_t i = 0; i < kStopSignals.size(); ++i) sigaction(kStopSignals[i], &stop, &before[i]);

  {
    std::lock_guard lock(mutex_);
    if (!start_worker()) error_ = -EAGAIN;
  }
  for (;;) {
    std::list<Worker> done;
    bool stop = false;
    {
      std::lock_guard lock(mutex_);
      done = take_done();
      stop = error_ != 0 || fuse_session_exited(session_) || workers_.empty();
      // Workers that ended may have left none waiting (a worker starts one
      // only when it takes a request): one waits for the next.
      if (!stop && ready() == 0) (void)start_worker();
    }
    join(std::move(done));
    if (stop) break;
    eventfd_t events = 0;
    (void)eventfd_read(wake_fd_, &events);  // a worker ended, or a stop signal (EINTR)
  }
  // Every worker ends: those waiting for a request are told to stop waiting,
  // again until they have (a signal that came just before a read began leaves
  // it waiting).
  {
    std::lock_guard lock(mutex_);
    for (Worker& worker : workers_) worker.leaving = true;
  }
  for (;;) {
    std::list<Worker> done;
    bool all_done = false;
    {
      std::lock_guard lock(mutex_);
      done = take_done();
      all_done = workers_.empty();
      for (const Worker& worker : workers_) {
        if (!worker.done) request_buffers::end_wait(worker.handle);
      }
    }
    join(std::move(done));  // never destroyed joinable
    if (all_done) break;
    pollfd woken{wake_fd_, POLLIN, 0};
    if (poll(&woken, 1, 100) > 0) {
      eventfd_t events = 0;
      (void)eventfd_read(wake_fd_, &events);
    }
  }
  int error = 0;
  {
    std::lock_guard lock(mutex_);
    error = error_;
  }

  for (size_t i = 0; i < kStopSignals.size(); ++i) sigaction(kStopSignals[i], &before[i], nullptr);
  stopping_wake_fd.store(-1);
  stopping_session.store(nullptr);
  // The session stays exited (no fuse_session_reset, unlike libfuse's loop):
  // the ring's threads waiting on a frozen volume see it while they stop.
  if (error != 0) return error;
  return stop_signal;
}

size_t FuseWorkers::end_idle() {
  std::lock_guard lock(mutex_);
  size_t keep = 1;
  size_t asked = 0;
  for (Worker& worker : workers_) {
    if (!worker.waiting) continue;
    if (worker.leaving) {
      // Still waiting: the last signal came just before its read began.
      request_buffers::end_wait(worker.handle);
      continue;
    }
    if (keep > 0) {
      --keep;
      continue;
    }
    worker.leaving = true;
    request_buffers::end_wait(worker.handle);
    ++asked;
  }
  return asked;
}

size_t FuseWorkers::workers() {
  std::lock_guard lock(mutex_);
  return workers_.size();
}

uint64_t FuseWorkers::started() {
  std::lock_guard lock(mutex_);
  return started_;
}

}  // namespace mimicfs
