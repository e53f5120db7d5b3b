// SPDX-License-Identifier: Apache-2.0
#include "fusefs/request_buffers.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace mimicfs::request_buffers {
namespace {

// Ignored by default, and used by nothing else in the daemon.
const int kReleaseSignal = SIGURG;

// A worker's state, changed only by atomic exchanges: the releaser signals a
// worker only in kWaiting or kTaken, and the worker leaves kSignalled only
// once the signal's handler has run on it, so no signal of the releaser's
// lands outside read_request.
enum State : int {
  kServing,    // between reads
  kWaiting,    // in read(2), or about to enter or leave it
  kSignalled,  // a signal is on its way (sent in kWaiting or kTaken)
  kTaken,      // its handler ran: the read ended, or, had it not yet begun, waits on
};

struct Worker;
// The calling thread's worker, when it is one, and its reply buffer.
thread_local Worker* this_worker = nullptr;
thread_local std::vector<std::byte> reply;
// The area given to reply_in, used for the replies that fit.
thread_local std::span<std::byte> reply_area;

// The registered workers; never destroyed (a worker may end after main).
std::mutex& registry_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::vector<Worker*>& registry() {
  static auto* workers = new std::vector<Worker*>;
  return *workers;
}

struct Worker {
  Worker();
  ~Worker() {
    std::lock_guard lock(registry_mutex());
    auto& workers = registry();
    workers.erase(std::remove(workers.begin(), workers.end(), this), workers.end());
    // A signal later (one given up on, take_release_signal) finds no worker.
    if (this_worker == this) this_worker = nullptr;
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  const pthread_t thread;
  std::atomic<int> state{kServing};
  // Whether a large request or reply reached pages of the buffers since they
  // were last dropped.
  std::atomic<bool> holds_pages{false};
  // The worker's own: how far large requests and replies reached, and whether
  // to drop the pages before its next read.
  size_t request_reach = 0;
  size_t reply_reach = 0;
  bool drop_pending = false;
  // The releaser's (under the registry's lock): the worker was kTaken when
  // release_idle last looked.
  bool taken_at_last_call = false;
  // end_wait asked the worker's read_request to return EINTR instead of waiting on.
  std::atomic<bool> end_wait{false};
};

void sigset_of_release(sigset_t* set) {
  sigemptyset(set);
  sigaddset(set, kReleaseSignal);
}

// Only the releaser's signals, sent by this process, count. (Not told by
// si_code: a tgkill's read SI_USER in sigtimedwait on Linux 6.18.)
bool sent_by_releaser(const siginfo_t& info) { return info.si_pid == getpid(); }

void on_release_signal(int, siginfo_t* info, void*) {
  if (!sent_by_releaser(*info)) return;
  if (Worker* worker = this_worker; worker != nullptr) {
    int signalled = kSignalled;
    worker->state.compare_exchange_strong(signalled, kTaken);
  }
}

Worker::Worker() : thread(pthread_self()) {
  // Unregistered without the handler: the signal would end no read, and the
  // worker would wait for its handler.
  static const bool handler_installed = [] {
    struct sigaction action{};
    action.sa_sigaction = on_release_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO;  // no SA_RESTART: the signal is to end the read
    if (sigaction(kReleaseSignal, &action, nullptr) == 0) return true;
    spdlog::warn("request buffers: no handler for their release signal ({}): they keep their pages",
                 std::strerror(errno));
    return false;
  }();
  if (!handler_installed) return;
  // The serving thread blocks it for the threads it starts (block_release_signal).
  sigset_t release;
  sigset_of_release(&release);
  pthread_sigmask(SIG_UNBLOCK, &release, nullptr);
  std::lock_guard lock(registry_mutex());
  registry().push_back(this);
}

// MADV_DONTNEED on the whole pages of `buffer` that the first `held` bytes
// reached; pages the buffer shares with its neighbours in the heap are kept.
void drop_pages(void* buffer, size_t length, size_t held) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(buffer);
  const uintptr_t begin = (start + page - 1) / page * page;
  const uintptr_t reached = (start + std::min(held, length) + page - 1) / page * page;
  const uintptr_t end = std::min(reached, (start + length) / page * page);
  if (end <= begin) return;
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0) {
    spdlog::debug("request buffers: madvise failed: errno {}", errno);
  }
}

// malloc_trim gives back the free chunks inside every heap and the top of the
// main one, but not the top of a thread's heap, where the frees of a busy
// worker gather (1.7 MiB of one, measured): glibc trims that top when a chunk
// of 64 KiB or more is freed in its arena, here the one the worker uses.
void trim_own_heap() {
  void* volatile chunk = std::malloc(kLargeBytes);
  std::free(chunk);
}

// Waits for a release signal that never came, given up (release_signals_missed).
std::atomic<size_t> signals_missed{0};

// Takes the releaser's signal on its way to this thread (it is sent right
// after the state became kSignalled) before the worker serves anything. With
// the signal blocked its handler cannot run: the state says whether it ran
// before, else the signal is pending or about to be. A second at most: one
// that never comes (the send failed) must not hang the daemon.
void take_release_signal(const Worker& worker) {
  sigset_t release;
  sigset_of_release(&release);
  pthread_sigmask(SIG_BLOCK, &release, nullptr);
  const timespec limit{1, 0};
  while (worker.state.load() == kSignalled) {
    siginfo_t info{};
    if (sigtimedwait(&release, &info, &limit) < 0) {
      if (errno == EINTR) continue;
      spdlog::warn("request buffers: a release signal never arrived");
      ++signals_missed;
      break;
    }
    if (sent_by_releaser(info)) break;
  }
  pthread_sigmask(SIG_UNBLOCK, &release, nullptr);
}

// The worker's state after a read, made kServing: whether a signal of the
// releaser's reached it.
bool leave_waiting(Worker& worker) {
  int state = worker.state.load();
  for (;;) {
    if (state == kSignalled) {
      take_release_signal(worker);
      worker.state.store(kServing);
      return true;
    }
    if (worker.state.compare_exchange_weak(state, kServing)) return state == kTaken;
  }
}

}  // namespace

void block_release_signal() {
  sigset_t release;
  sigset_of_release(&release);
  pthread_sigmask(SIG_BLOCK, &release, nullptr);
}

ssize_t read_request(int fd, void* buffer, size_t length) {
  thread_local Worker worker;
  this_worker = &worker;
  for (;;) {
    if (worker.end_wait.exchange(false)) {
      errno = EINTR;
      return -1;
    }
    if (worker.drop_pending) {
      // Cleared first: once the pages are gone, the worker holds none.
      worker.holds_pages.store(false);
      drop_pages(buffer, length, worker.request_reach);
      drop_pages(reply.data(), reply.size(), worker.reply_reach);
      worker.request_reach = 0;
      worker.reply_reach = 0;
      worker.drop_pending = false;
      trim_own_heap();
    }
    worker.state.store(kWaiting);
    // end_wait between the loop's top and here found the worker serving and
    // sent nothing: its flag is seen now (both sides' order is sequentially
    // consistent: it set the flag before it looked at the state).
    if (worker.end_wait.load()) {
      (void)leave_waiting(worker);
      continue;
    }
    const ssize_t n = ::read(fd, buffer, length);
    const int error = errno;
    if (leave_waiting(worker)) {
      worker.drop_pending = true;
      // Asked to end the wait: the loop top returns. A request read meanwhile
      // is returned first.
      if (n < 0 && error == EINTR) continue;
    }
    if (n >= static_cast<ssize_t>(kLargeBytes)) {
      worker.request_reach = std::max(worker.request_reach, static_cast<size_t>(n));
      worker.holds_pages.store(true);
    }
    errno = error;
    return n;
  }
}

std::span<std::byte> reply_buffer(size_t size) {
  if (!reply_area.empty() && size <= reply_area.size()) return reply_area.first(size);
  if (reply.size() < size) reply.resize(size);
  if (size >= kLargeBytes && this_worker != nullptr) {
    this_worker->reply_reach = std::max(this_worker->reply_reach, size);
    this_worker->holds_pages.store(true);
  }
  return {reply.data(), size};
}

void reply_in(std::span<std::byte> area) { reply_area = area; }

size_t release_signals_missed() { return signals_missed.load(); }

namespace {

// Signals `worker` (registered: the registry's lock is held) out of its wait
// in read(2). `again`: also when its state says the handler already ran
// (kTaken): it may have run before the read began, which then waits on.
bool signal_waiting(Worker& worker, bool again) {
  int state = kWaiting;
  if (!worker.state.compare_exchange_strong(state, kSignalled)) {
    if (state != kTaken || !again) return false;
    if (!worker.state.compare_exchange_strong(state, kSignalled)) return false;
  }
  worker.taken_at_last_call = false;
  // The worker is alive: it unregisters under the lock.
  if (const int error = pthread_kill(worker.thread, kReleaseSignal); error != 0) {
    spdlog::debug("request buffers: pthread_kill: {}", std::strerror(error));
    int signalled = kSignalled;
    worker.state.compare_exchange_strong(signalled, kWaiting);
    return false;
  }
  return true;
}

}  // namespace

size_t release_idle() {
  size_t asked = 0;
  std::lock_guard lock(registry_mutex());
  for (Worker* worker : registry()) {
    if (!worker->holds_pages.load()) continue;
    // kTaken, and at the call before too: a signal reached the worker before
    // its read began, and it waits on; sent again. (Once, it may be a worker
    // about to leave its read.)
    const bool taken_before =
        std::exchange(worker->taken_at_last_call, worker->state.load() == kTaken);
    if (signal_waiting(*worker, taken_before)) ++asked;
  }
  return asked;
}

void end_wait(pthread_t thread) {
  std::lock_guard lock(registry_mutex());
  for (Worker* worker : registry()) {
    if (!pthread_equal(worker->thread, thread)) continue;
    worker->end_wait.store(true);
    // A worker between reads sees end_wait at its next; one in kTaken may
    // wait in read(2) after its handler ran: signalled again.
    (void)signal_waiting(*worker, true);
    return;
  }
}

}  // namespace mimicfs::request_buffers
