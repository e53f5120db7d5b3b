// SPDX-License-Identifier: Apache-2.0
#include "backends/fault_layer.h"

#include <chrono>

#include "backends/caller.h"

namespace mimicfs {

bool FaultLayer::faultable(Op op) {
  switch (op) {
    case Op::kSetattr:
    case Op::kTruncate:
    case Op::kCreate:
    case Op::kMkdir:
    case Op::kSymlink:
    case Op::kLink:
    case Op::kUnlink:
    case Op::kRmdir:
    case Op::kRename:
    case Op::kOpen:
    case Op::kFlush:
    case Op::kRead:
    case Op::kWrite:
    case Op::kFallocate:
    case Op::kPunch:
    case Op::kFsync:
    case Op::kCopyFileRange:
    case Op::kTmpfile:
      return true;
    default:
      return false;
  }
}

void FaultLayer::power_off(bool freeze) {
  std::lock_guard lock(power_mutex_);
  frozen_ = freeze || (powered_off_ && frozen_);
  powered_off_ = true;
}

void FaultLayer::power_on() {
  std::lock_guard lock(power_mutex_);
  powered_off_ = false;
  frozen_ = false;
  ++restarts_;
  powered_on_.notify_all();
}

bool FaultLayer::frozen() {
  std::lock_guard lock(power_mutex_);
  return frozen_;
}

bool FaultLayer::wait_for_power_locked(std::unique_lock<std::mutex>& lock) {
  if (!frozen_ || frozen_operations_ >= kMaxFrozenOperations) return false;
  ++frozen_operations_;
  const uint64_t restarts = restarts_;
  // A caller killed meanwhile ends once its operation returns: it is not
  // kept waiting (in the kernel, uninterruptibly) for the restart.
  const Credentials* caller = CallerScope::credentials();
  while (restarts_ == restarts && !(stopping_ && stopping_())) {
    powered_on_.wait_for(lock, std::chrono::milliseconds(100));
    if (caller == nullptr || restarts_ != restarts) continue;
    // Read without the lock: it reads /proc.
    lock.unlock();
    const bool dying = caller->dying();
    lock.lock();
    if (dying) break;
  }
  --frozen_operations_;
  return true;
}

bool FaultLayer::wait_for_power(const Call& call) {
  if (call.op == Op::kFlush) return false;
  std::unique_lock lock(power_mutex_);  // a unique_lock for the condition variable:
  assert_held(power_mutex_);            // the analysis sees lock_guard's only
  return wait_for_power_locked(lock);
}

void FaultLayer::wait_while_frozen() {
  std::unique_lock lock(power_mutex_);
  assert_held(power_mutex_);
  (void)wait_for_power_locked(lock);
}

Result<void> FaultLayer::enter(const Call& call, Work& work) {
  if (powered_off_ && call.op != Op::kGetattr && call.op != Op::kStatfs &&
      call.op != Op::kRelease) {
    // Sent to the volume before the restart: it answers from a world that ended.
    (void)wait_for_power(call);
    return fail(EIO);
  }
  if (rules_.empty() || !faultable(call.op)) return {};
  std::string path = target().path(call.inode);
  if (!call.name.empty()) path = (path == "/" ? "" : path) + "/" + std::string(call.name);
  const FaultInjector::Fault fault = rules_.check(call.op, path, now_ns_ ? now_ns_() : 0);
  work.fault_latency_ns += fault.latency_ns;
  if (fault.crash == FaultInjector::Crash::kBefore && crash_hook_) {
    // The operation never runs: the power went first.
    crash_hook_(fault.power_cut);
    if (fault.power_cut.freeze) (void)wait_for_power(call);
    return fail(EIO);
  }
  if (fault.crash == FaultInjector::Crash::kAfter) {
    work.crash_after = true;
    work.power_cut = fault.power_cut;
  }
  if (fault.error) return fail(fault.error);
  return {};
}

void FaultLayer::leave(const Call&, Work& work, int) {
  // After the target returned: it holds none of its locks now.
  if (work.crash_after && crash_hook_) {
    work.crash_after = false;
    crash_hook_(work.power_cut);
    work.deferred.clear();  // the crash completed every task the operation queued
  }
}

void FaultLayer::crashed(const std::string& cause) {
  std::lock_guard lock(cause_mutex_);
  last_crash_ = cause;
}

StatsSnapshot FaultLayer::snapshot() {
  StatsSnapshot s = Layer::snapshot();
  s.faults = rules_.to_json();
  s.power = {{"on", powered()}, {"crashes", target().crashes()}};
  {
    std::lock_guard lock(power_mutex_);
    if (frozen_) s.power["frozen_operations"] = frozen_operations_;
  }
  std::lock_guard lock(cause_mutex_);
  if (!last_crash_.empty()) s.power["last_crash"] = last_crash_;
  return s;
}

}  // namespace mimicfs
