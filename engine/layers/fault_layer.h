// SPDX-License-Identifier: Apache-2.0
// FaultLayer: injects the faults of a FaultInjector's rules (fault_injector.h)
// into the operations that reach the device or change the namespace, by the
// path from the mount root. A firing error rule returns its errno instead of
// running the operation; a latency rule adds to the operation's work
// (Work::fault_latency_ns), which the cost layer above charges.
//
// A crash rule cuts the power through the hook the Engine sets: before the
// operation (which then gets EIO) or after it completes.
//
// Lookups, getattr, readdir, readlink, lseek, statfs, xattrs and release are
// never faulted: how often the kernel sends them depends on its caches.
//
// A server outage (NFS profiles: `ctl server down` ... `server up`): every
// request that reaches the server meanwhile times out, as nfs(5) says for the
// mount's client.timeout_mode. `hard` retries until the server answers: the
// request waits for server_up() and is charged the emulated time that passed.
// `soft` gives up after the RPC layer's major timeout, timeo x (retrans + 1)
// with TCP's linear backoff (net/sunrpc/xprt.c: xprt_reset_majortimeo), and
// fails with EIO; `softerr` with ETIMEDOUT. The mount root's getattr, a close
// and a release do not wait (waits_for_server).
//
// A server restart (`ctl server restart`) ends an outage, if one is under
// way, with a new boot of the server, and opens its grace period: until it
// ends, in the clients' time (elapsed), an OPEN, a REMOVE or a RENAME gets
// NFS4ERR_GRACE (nfsd4_open, nfsd4_remove, nfsd4_rename), as does a new LOCK,
// and the client retries it with nfs4_delay's backoff (100 ms doubling to
// 15 s: nfs4_update_delay): the request is charged the time to the first retry
// past the grace's end. The clients' lock reclaim is NfsClients'.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "engine/layers/fault_injector.h"
#include "engine/layers/layer.h"

namespace mimicfs {

class FaultLayer final : public Layer {
 public:
  explicit FaultLayer(FileSystem& target);

  // How a crash rule cuts the power.
  using CrashHook = std::function<void(const PowerCut&)>;
  // Set once, before any operation: the Engine's crash and its emulated clock.
  void set_crash_hook(CrashHook hook) { crash_hook_ = std::move(hook); }
  // Set once, before any operation: the Engine's server restart (server=restart).
  void set_server_restart_hook(std::function<void()> hook) {
    server_restart_hook_ = std::move(hook);
  }
  void set_clock(std::function<uint64_t()> now_ns) { now_ns_ = std::move(now_ns); }
  // Records the cause of the latest power cut, for stats.json's `power`.
  void crashed(const std::string& cause);

  FaultInjector& rules() { return rules_; }
  // A volume held off after a power cut (`ctl crash hold`) answers every
  // operation EIO, as a device that is gone, until powered on again (`ctl
  // restart`); getattr, statfs and release still answer, so the mount stays
  // walkable and descriptors can close.
  //
  // A frozen one (`ctl crash freeze`) makes the operations wait instead, until
  // the restart answers them EIO: the programs that sent them learn nothing of
  // the cut, as on a machine whose power went, while a runner ends them
  // (`mimicfs crashtest`). A close's flush still gets EIO at once (a dying
  // process closes its files and the kernel cannot interrupt it), and past
  // kMaxFrozenOperations waiters the rest get EIO, so the daemon keeps threads
  // for ctl and stats.json. (The adapter keeps the requests it can without a
  // thread instead, fusefs/frozen_requests.h: those never wait here.) An operation whose caller is killed meanwhile
  // (Credentials::dying) stops waiting within 100 ms: the kernel keeps a
  // killed process in an uninterruptible wait until its request is answered,
  // and a test's timeout could never end it.
  // A hold after a freeze keeps the volume frozen until the restart.
  void power_off(bool freeze);
  bool frozen();
  // Waits for power_on() when the volume is frozen (within the waiters' limit):
  // an operation through a descriptor from before the cut, answered EIO after.
  void wait_while_frozen();
  // Set once, before any operation: true once the daemon stops (the waiters
  // give up, or the session could never end).
  void stop_waiting_when(std::function<bool()> stopping) { stopping_ = std::move(stopping); }
  void power_on();
  bool powered() const { return !powered_off_; }
  // The restarts so far when the volume is frozen, nullopt when it is not. A
  // request the adapter keeps instead of waiting here (fusefs/frozen_requests.h)
  // is answered once restarts() has moved past it.
  std::optional<uint64_t> frozen_at() EXCLUDES(power_mutex_);
  uint64_t restarts();  // without the lock
  // Requests kept that way now: counted in stats.json's frozen_operations.
  void count_kept(int change) { kept_outside_.fetch_add(change); }
  // Frozen operations and those waiting through a hard mount's outage.
  static constexpr int kMaxFrozenOperations = 8;

  // nfs(5)'s hard, soft and softerr (client.timeout_mode).
  enum class TimeoutMode { kHard, kSoft, kSoftErr };
  // The server's outage (client.nfs only: the caller checks).
  void server_down() EXCLUDES(power_mutex_);
  void server_up() EXCLUDES(power_mutex_);
  bool server_is_up() const { return !server_down_; }
  // `ctl server restart`: the server boots again and its grace period of
  // `grace_ns` starts.
  void server_restart(uint64_t grace_ns) EXCLUDES(power_mutex_);
  // A power cut of everything: no client is left to reclaim anything.
  void end_grace() { grace_end_ns_.store(0, std::memory_order_relaxed); }
  // A request that reaches the server outside the layers (an NFS lock):
  // waits for it or times out, as enter() does for the rest, and, when the
  // grace period holds it (`in_grace`: a new LOCK or LOCKT), is charged the
  // retries until it ends.
  Result<void> reach_server(Work& work, bool in_grace) {
    if (server_down_) {
      if (auto answered = wait_for_server(work); !answered) return answered;
    }
    if (in_grace && grace_end_ns_.load(std::memory_order_relaxed) != 0) wait_out_grace(work);
    return {};
  }
  // The server's time: emulated uptime, idle time included. Set once.
  void set_elapsed_clock(std::function<uint64_t()> now_ns) { elapsed_ns_ = std::move(now_ns); }
  // The time nfs4_delay's retries of a request refused for `remaining_ns`
  // more of grace take: the first retry at or past its end.
  static uint64_t grace_retry_ns(uint64_t remaining_ns);
  // Zeroes the server's counters too (an outage under way counts once).
  void reset_statistics() override;
  // Adds the rules' state ("faults") to the target's snapshot.
  StatsSnapshot snapshot() override;
  // A volume without power has no flusher and no journal thread.
  BackgroundReport background(uint64_t now_ns, bool flush, bool commit, Work& work) override {
    if (!powered()) return {};
    return Layer::background(now_ns, flush, commit, work);
  }

  // True for the operations fault rules apply to.
  static bool faultable(Op op);

 protected:
  Result<void> enter(const Call& call, Work& work) override;
  void leave(const Call& call, Work& work, int error) override;

 private:
  FaultInjector rules_;
  // Waits for power_on() when the volume is frozen; false when it may not wait.
  bool wait_for_power(const Call& call);
  bool wait_for_power_locked(std::unique_lock<std::mutex>& lock) REQUIRES(power_mutex_);
  // Waits while `waiting` holds, the daemon runs and the caller lives, within
  // the waiters' limit; false when it may not wait.
  bool wait_locked(std::unique_lock<std::mutex>& lock, const std::function<bool()>& waiting)
      REQUIRES(power_mutex_);
  static bool waits_for_server(const Call& call);
  // The server answers again: the requests waiting for it go on.
  void end_outage() REQUIRES(power_mutex_);
  // NFSv4's OPEN, REMOVE and RENAME: what the grace period refuses.
  static bool held_in_grace(Op op);
  // Charges `work` the retries of a request the grace period refuses, if it
  // has not ended.
  void wait_out_grace(Work& work) EXCLUDES(power_mutex_);
  // A request sent while the server is down: waits for it (hard) or times out.
  Result<void> wait_for_server(Work& work) EXCLUDES(power_mutex_);

  const TimeoutMode timeout_mode_;
  const uint64_t major_timeout_ns_;
  const uint32_t retrans_;
  std::atomic<bool> server_down_{false};
  uint64_t server_ups_ GUARDED_BY(power_mutex_) = 0;  // a waiter leaves at the next
  uint64_t server_up_at_ns_ GUARDED_BY(power_mutex_) = 0;  // emulated
  uint64_t outages_ GUARDED_BY(power_mutex_) = 0;
  uint64_t major_timeouts_ GUARDED_BY(power_mutex_) = 0;
  uint64_t retransmissions_ GUARDED_BY(power_mutex_) = 0;
  int server_waiters_ GUARDED_BY(power_mutex_) = 0;
  uint64_t server_restarts_ GUARDED_BY(power_mutex_) = 0;
  uint64_t grace_waits_ GUARDED_BY(power_mutex_) = 0;
  // When the grace period ends, in elapsed ns; 0 once it has (read without
  // the lock: no request looks further while 0).
  std::atomic<uint64_t> grace_end_ns_{0};
  std::function<uint64_t()> elapsed_ns_;

  std::atomic<bool> powered_off_{false};
  std::mutex power_mutex_;
  std::condition_variable powered_on_;
  std::function<bool()> stopping_;
  bool frozen_ GUARDED_BY(power_mutex_) = false;
  int frozen_operations_ GUARDED_BY(power_mutex_) = 0;
  std::atomic<int> kept_outside_{0};
  // Counts the restarts: a waiter leaves at the next one, even when another
  // freeze follows before it wakes.
  uint64_t restarts_ GUARDED_BY(power_mutex_) = 0;
  std::atomic<uint64_t> restarts_published_{0};  // restarts_, for readers without the lock
  CrashHook crash_hook_;
  std::function<void()> server_restart_hook_;
  std::function<uint64_t()> now_ns_;
  std::mutex cause_mutex_;
  std::string last_crash_ GUARDED_BY(cause_mutex_);
};

}  // namespace mimicfs
