// SPDX-License-Identifier: Apache-2.0
// FuseRing: FUSE over io_uring (Linux 6.14 and later), the transport that
// brings each CPU's requests to the daemon through a queue of that CPU's own.
//
// Why. On /dev/fuse every request goes through one queue that every daemon
// thread reads, with a read() to take a request and a writev() to answer it.
// With FUSE_OVER_IO_URING the kernel keeps one queue per CPU, puts a request
// in the queue of the CPU its caller runs on, and the daemon answers it and
// takes the next in one system call.
//
// Each queue's threads are pinned to its CPU and run at the SCHED_IDLE
// policy (keep_to_cpu), as newer libfuse's own ring pins them
// (lib/fuse_uring.c; its SCHED_IDLE is written but switched off). Pinned, a
// request is served on the CPU of the caller that waits for it; SCHED_IDLE
// makes the scheduler count that CPU as idle while only a ring thread runs
// there, so the caller that the reply wakes is woken where it slept and
// preempts the thread at once. At the normal policy the caller moved to the
// other CPU at every reply (its own looked busy), and its next request went
// to that CPU's queue: every round trip woke a halted vCPU. Unpinned, the
// thread was woken on the other CPU where it last ran, with the same cost.
// The figures: docs/performance.md, "The ring's threads".
// A mount takes the ring by default where the kernel offers it (root set
// fuse.enable_uring=Y); `--io-uring off` keeps to /dev/fuse.
//
// How, with libfuse 3.14, which knows nothing of it. FuseChannel offers the
// feature in the INIT reply when the kernel does (module parameter
// fuse.enable_uring=Y) and prepare() succeeded. Each queue has
// kEntriesPerQueue threads, each with an io_uring of its own and one ring
// entry: a header buffer and a payload buffer registered with the kernel
// (FUSE_IO_URING_CMD_REGISTER). A thread rebuilds the request as /dev/fuse
// would have delivered it (the header and the operation's fixed arguments are
// copied in front of the payload, which stays where the kernel wrote it),
// hands it to libfuse (fuse_session_process_buf), takes the reply libfuse
// writes through the channel (take_reply) and sends it back with the fetch of
// the next request (FUSE_IO_URING_CMD_COMMIT_AND_FETCH): one system call per
// request.
//
// An entry's payload pages that a large request or reply reached are given
// back after kIdleBeforeRelease without a request, by the entry's thread
// (Entry::release_pages): the kernel copies requests into an entry and
// replies out of it only inside that thread's io_uring_enter, so the thread
// may drop them between two such calls. (libfuse's /dev/fuse workers keep
// theirs: there are at most FuseSession::kMaxThreads of them.)
//
// What it relies on of the kernel beyond the ABI: fuse_uring_abi.h.
//
// Every entry registers at start: the kernel hands a request that arrives
// while each entry of its CPU's queue is busy to the next of them that
// commits, never to one registered later. So a queue has more entries than
// requests can wait at once on one CPU (8 on a frozen volume, docs/time.md,
// and 4 waiting for a lock, docs/nfs.md), and a restart or an unlock sent
// from that CPU still finds one.
//
// Not through the ring, as the kernel sends them: INIT, FORGET and INTERRUPT
// (read from /dev/fuse by libfuse's workers, which keep running) and the
// daemon's notifications (written to /dev/fuse).
//
// An entry the kernel refuses to register (out of memory; EINVAL would be a
// bug of ours) is logged and its thread ends: the queue serves with the
// others (with fewer than 9, a restart sent from its CPU may wait behind the
// 8 operations a frozen volume holds: logged). Once the kernel refused one it
// no longer holds requests back for the ring (fs/fuse/dev_uring.c sets
// fc->io_uring to 0), and while some queue has no entry it never turns to the
// ring: a queue whose entries were all refused leaves the mount on /dev/fuse,
// which its workers serve anyway, the other queues' threads end, and
// stats.json's transport says so. A ring that fails after it serves (an
// io_uring error other than the unmount's) cannot fall back to /dev/fuse:
// the daemon logs it and stops, as on SIGTERM, rather than leave its callers
// waiting.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <spdlog/common.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/base/thread_annotations.h"
#include "engine/layers/fault_layer.h"
#include "engine/nfs/record_locks.h"
#include "fusefs/fuse_uring_abi.h"

namespace mimicfs {

class FuseChannel;

class FuseRing {
 public:
  // FUSE_OVER_IO_URING in the INIT flags (fuse_uring_abi.h).
  static constexpr uint64_t kInitFlag = fuse_uring_abi::kInitFlag;
  // Entries, each with its thread, per CPU queue: the operations a frozen
  // volume holds, the lock requests that wait (for as long as the lock is
  // held: an unlock from this CPU must find an entry), the restart, and one
  // to spare. An NFS client's removals
  // waiting for a close (NfsClientLayer::kMaxWaiters) need none of their own:
  // they wait at most kCloseGrace, so a RELEASE queued behind them is late,
  // never lost.
  static constexpr int kEntriesPerQueue =
      FaultLayer::kMaxFrozenOperations + RecordLocks::kMaxWaiters + 2;
  // An entry whose payload pages a large request or reply reached gives them
  // back after this long without a request; smaller ones (under kLargeBytes)
  // touch a few pages, which stay.
  static constexpr std::chrono::milliseconds kIdleBeforeRelease{1000};
  static constexpr size_t kLargeBytes = 64 << 10;
  // Beyond this many possible CPUs the daemon keeps to /dev/fuse rather than
  // start kEntriesPerQueue threads for each.
  static constexpr size_t kMaxQueues = 64;

  // Serves `session`, whose requests pass through `channel` as /dev/fuse's do.
  FuseRing(fuse_session* session, FuseChannel& channel);
  ~FuseRing();  // stop()
  FuseRing(const FuseRing&) = delete;
  FuseRing& operator=(const FuseRing&) = delete;

  // At the INIT reply, before it is sent: starts every queue's threads (one
  // queue per possible CPU, as the kernel numbers them), each of which sets up
  // its io_uring and its buffers of `payload_bytes`. True when all did: the
  // reply may then offer FUSE_OVER_IO_URING. False, logged, with nothing left
  // running, otherwise (io_uring refused, CPUs numbered with gaps, too many):
  // as a warning when the ring was `asked_for` (--io-uring on), else as
  // information.
  bool prepare(size_t payload_bytes, bool asked_for);
  // Once the INIT reply reached the kernel: the threads register their
  // entries, and the kernel serves requests through the ring once every queue
  // has one.
  void start();
  // Ends every thread, each after the request it is serving; requests the
  // kernel still queues wait for the unmount, which fails them. Idempotent.
  void stop();

  // True once start() ran, until the kernel refused every entry of a queue:
  // requests come through the ring (once every queue has an entry).
  bool serving() const { return serving_.load(); }
  size_t queues() const { return serving() ? queue_count_ : 0; }
  // Requests served through the ring since the mount.
  uint64_t requests() const { return requests_.load(); }

  // libfuse's reply, as FuseChannel's writev sees it: true when it answers the
  // ring request the calling thread serves; it is then copied into the
  // thread's entry (a read's data is already there: read_replies_into, fuse_reply.h),
  // which the thread commits once libfuse returns.
  static bool take_reply(const iovec* iov, int count) noexcept;
  // True on a ring thread serving a request: its reply must come before the
  // callback returns (the entry commits it then), so it cannot be kept for
  // later (frozen_requests.h).
  static bool on_ring_thread() noexcept;

 private:
  class Entry;

  // A thread's life: set up (telling `ready`), wait for start(), register,
  // then serve until stop() or the unmount.
  void serve(uint16_t queue, std::promise<bool> ready);
  // Pins the calling thread to the queue's CPU, at the SCHED_IDLE policy
  // (why: the header); unpinned at the normal policy where the CPU is not
  // the daemon's to use.
  static void keep_to_cpu(uint16_t queue);
  // Blocks until start() or stop(); true for start.
  bool wait_for_start();
  // An io_uring failure the ring cannot recover from: logged, and the daemon
  // told to stop (SIGTERM to itself, as libfuse's handler takes it).
  void fail(uint16_t queue, const char* what, int error);
  // The kernel refused to register one of `queue`'s entries (`error`): logged;
  // once it refused them all, /dev/fuse serves (serving() turns false).
  void refused(uint16_t queue, int error);

  fuse_session* const session_;
  FuseChannel& channel_;
  size_t payload_bytes_ = 0;  // set by prepare, before any thread starts
  spdlog::level::level_enum refusal_ = spdlog::level::info;  // likewise
  size_t queue_count_ = 0;
  int stop_fd_ = -1;  // an eventfd every thread polls: written once, by stop()
  std::atomic<bool> serving_{false};
  std::atomic<bool> stop_requested_{false};
  std::atomic<uint64_t> requests_{0};

  std::mutex mutex_;
  std::condition_variable started_or_stopping_;
  bool started_ GUARDED_BY(mutex_) = false;
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_ GUARDED_BY(mutex_);
  std::map<uint16_t, int> refused_ GUARDED_BY(mutex_);  // entries refused, by queue
};

}  // namespace mimicfs
