// FuseRing: FUSE over io_uring (Linux 6.14 and later), the transport that
// serves a request on the CPU of the program that made it.
//
// Why. On /dev/fuse a request wakes whichever daemon thread the kernel picks,
// and the scheduler puts it where a CPU is idle: on a 2-vCPU machine, nearly
// always the other CPU than the caller's. Every round trip then pays two
// cross-CPU wake-ups; with the caller and the daemon pinned to one CPU the
// same 1-byte writes run 2x as fast (README, Performance). With
// FUSE_OVER_IO_URING the kernel keeps one queue per CPU, puts a request in the
// queue of the CPU its caller runs on, and a thread pinned to that CPU serves
// it while the caller sleeps: no cross-CPU wake-up either way.
//
// How, with libfuse 3.14, which knows nothing of it. FuseChannel offers the
// feature in the INIT reply when the kernel does (module parameter
// fuse.enable_uring=Y) and prepare() succeeded. Each queue has threads, each
// with an io_uring of its own and one ring entry: a header buffer and a
// payload buffer registered with the kernel (FUSE_IO_URING_CMD_REGISTER). A
// thread rebuilds the request as /dev/fuse would have delivered it (the
// header and the operation's fixed arguments are copied in front of the
// payload, which stays where the kernel wrote it), hands it to libfuse
// (fuse_session_process_buf), takes the reply libfuse writes through the
// channel (take_reply) and sends it back with the fetch of the next request
// (FUSE_IO_URING_CMD_COMMIT_AND_FETCH): one system call per request.
//
// A queue starts with one thread and grows, as libfuse's loop does: when a
// thread takes a request and none of its queue's others is waiting, it starts
// another, up to kMaxThreadsPerQueue, so a request that waits (real latency,
// a frozen volume) does not hold up the next one from its CPU.
//
// Not through the ring, as the kernel sends them: INIT, FORGET and INTERRUPT
// (read from /dev/fuse by libfuse's loop, which keeps running) and the
// daemon's notifications (written to /dev/fuse).
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/thread_annotations.h"

namespace mimicfs {

class FuseRing {
 public:
  // FUSE_OVER_IO_URING in the INIT flags (bit 9 of flags2): not in Debian
  // 12's linux/fuse.h (6.1).
  static constexpr uint64_t kInitFlag = uint64_t{1} << 41;
  // As many requests in service per CPU as libfuse's loop runs threads.
  static constexpr int kMaxThreadsPerQueue = 16;

  explicit FuseRing(fuse_session* session);
  ~FuseRing();  // stop()
  FuseRing(const FuseRing&) = delete;
  FuseRing& operator=(const FuseRing&) = delete;

  // At the INIT reply, before it is sent: starts the first thread of each
  // queue (one queue per possible CPU), which sets up its io_uring and its
  // buffers of `payload_bytes`. True when every queue is ready: the reply may
  // then offer FUSE_OVER_IO_URING. False, logged, with nothing left running,
  // when any could not (io_uring refused, CPUs numbered with gaps, ...).
  bool prepare(size_t payload_bytes);
  // Once the INIT reply reached the kernel: the threads register their
  // entries, and the kernel serves requests through the ring once every queue
  // has one.
  void start();
  // Ends every thread, each after the request it is serving; the kernel's
  // requests still queued wait for the unmount, which fails them. Idempotent.
  void stop();

  // The number of queues (0 before prepare) and of threads serving them.
  size_t queues() const { return queue_count_; }
  int threads() const;

  // libfuse's reply, as FuseChannel's writev sees it: true when it answers the
  // ring request the calling thread serves; it is then copied into the
  // thread's entry, which the thread commits once libfuse returns.
  static bool take_reply(const iovec* iov, int count);

 private:
  struct Queue;
  class Entry;

  // Starts a thread for `queue`; its entry registers at once when the ring
  // has started. `ready`, when given, learns whether its set-up succeeded.
  void add_thread(Queue& queue, std::shared_ptr<std::promise<bool>> ready) REQUIRES(mutex_);
  void serve(Queue& queue, std::shared_ptr<std::promise<bool>> ready);
  // Blocks until start() or stop(); true for start.
  bool wait_for_start();

  fuse_session* const session_;
  size_t payload_bytes_ = 0;
  size_t queue_count_ = 0;
  std::vector<std::unique_ptr<Queue>> queues_;  // set by prepare, before any thread

  mutable std::mutex mutex_;
  std::condition_variable started_or_stopping_;
  bool started_ GUARDED_BY(mutex_) = false;
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_ GUARDED_BY(mutex_);
  std::atomic<bool> stop_requested_{false};  // read by the threads between requests
};

}  // namespace mimicfs
