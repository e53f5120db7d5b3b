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
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "backends/fault_injector.h"
#include "backends/layer.h"

namespace mimicfs {

class FaultLayer final : public Layer {
 public:
  explicit FaultLayer(FileSystem& target) : Layer(target) {}

  // How a crash rule cuts the power.
  using CrashHook = std::function<void(const PowerCut&)>;
  // Set once, before any operation: the Engine's crash and its emulated clock.
  void set_crash_hook(CrashHook hook) { crash_hook_ = std::move(hook); }
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
  // for ctl and stats.json. An operation whose caller is killed meanwhile
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
  static constexpr int kMaxFrozenOperations = 8;
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

  std::atomic<bool> powered_off_{false};
  std::mutex power_mutex_;
  std::condition_variable powered_on_;
  std::function<bool()> stopping_;
  bool frozen_ GUARDED_BY(power_mutex_) = false;
  int frozen_operations_ GUARDED_BY(power_mutex_) = 0;
  // Counts the restarts: a waiter leaves at the next one, even when another
  // freeze follows before it wakes.
  uint64_t restarts_ GUARDED_BY(power_mutex_) = 0;
  CrashHook crash_hook_;
  std::function<uint64_t()> now_ns_;
  std::mutex cause_mutex_;
  std::string last_crash_ GUARDED_BY(cause_mutex_);
};

}  // namespace mimicfs
