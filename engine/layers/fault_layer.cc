// SPDX-License-Identifier: Apache-2.0
#include "engine/layers/fault_layer.h"

#include <algorithm>
#include <chrono>

#include "engine/fs/caller.h"

namespace mimicfs {

namespace {

FaultLayer::TimeoutMode timeout_mode(const Profile& profile) {
  if (profile.timeout_mode == "soft") return FaultLayer::TimeoutMode::kSoft;
  if (profile.timeout_mode == "softerr") return FaultLayer::TimeoutMode::kSoftErr;
  return FaultLayer::TimeoutMode::kHard;
}

// The RPC layer's major timeout for TCP: the timeout grows by timeo at each
// retransmission and gives up at timeo x (retrans + 1), never past 600 s
// (xprt_calc_majortimeo; NFS_MAX_TCP_TIMEOUT bounds to_maxval).
uint64_t major_timeout_ns(const Profile& profile) {
  constexpr uint64_t kMaxTcpTimeoutNs = 600'000'000'000;
  const uint64_t timeo = std::min(profile.timeo_ns, kMaxTcpTimeoutNs);
  return std::min(timeo * (uint64_t{profile.retrans} + 1), kMaxTcpTimeoutNs);
}

}  // namespace

FaultLayer::FaultLayer(FileSystem& target)
    : Layer(target),
      timeout_mode_(timeout_mode(target.profile())),
      major_timeout_ns_(major_timeout_ns(target.profile())),
      retrans_(target.profile().retrans) {}

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
    case Op::kFdatasync:
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
  restarts_published_.store(restarts_);
  powered_on_.notify_all();
}

bool FaultLayer::frozen() {
  std::lock_guard lock(power_mutex_);
  return frozen_;
}

std::optional<uint64_t> FaultLayer::frozen_at() {
  if (!powered_off_) return std::nullopt;  // the common case, without the lock
  std::lock_guard lock(power_mutex_);
  if (!frozen_) return std::nullopt;
  return restarts_;
}

uint64_t FaultLayer::restarts() { return restarts_published_.load(); }

bool FaultLayer::wait_locked(std::unique_lock<std::mutex>& lock,
                             const std::function<bool()>& waiting) {
  if (frozen_operations_ >= kMaxFrozenOperations) return false;
  ++frozen_operations_;
  // A caller killed meanwhile ends once its operation returns: it is not
  // kept waiting (in the kernel, uninterruptibly) for the restart.
  const Credentials* caller = CallerScope::credentials();
  while (waiting() && !(stopping_ && stopping_())) {
    powered_on_.wait_for(lock, std::chrono::milliseconds(100));
    if (caller == nullptr || !waiting()) continue;
    // Read without the lock: it reads /proc.
    lock.unlock();
    const bool dying = caller->dying();
    lock.lock();
    if (dying) break;
  }
  --frozen_operations_;
  return true;
}

bool FaultLayer::wait_for_power_locked(std::unique_lock<std::mutex>& lock) {
  if (!frozen_) return false;
  const uint64_t restarts = restarts_;
  return wait_locked(lock, [&]() REQUIRES(power_mutex_) { return restarts_ == restarts; });
}

void FaultLayer::server_down() {
  std::lock_guard lock(power_mutex_);
  if (!server_down_) ++outages_;
  server_down_ = true;
}

void FaultLayer::server_up() {
  std::lock_guard lock(power_mutex_);
  end_outage();
}

void FaultLayer::end_outage() {
  if (!server_down_) return;
  server_down_ = false;
  ++server_ups_;
  server_up_at_ns_ = now_ns_ ? now_ns_() : 0;
  powered_on_.notify_all();
}

void FaultLayer::server_restart(uint64_t grace_ns) {
  std::lock_guard lock(power_mutex_);
  ++server_restarts_;
  const uint64_t now = elapsed_ns_ ? elapsed_ns_() : 0;
  grace_end_ns_.store(grace_ns == 0 ? 0 : now + grace_ns, std::memory_order_relaxed);
  end_outage();
}

uint64_t FaultLayer::grace_retry_ns(uint64_t remaining_ns) {
  constexpr uint64_t kRetryMinNs = 100'000'000;     // NFS4_POLL_RETRY_MIN: HZ / 10
  constexpr uint64_t kRetryMaxNs = 15'000'000'000;  // NFS4_POLL_RETRY_MAX: 15 * HZ
  uint64_t waited = 0;
  for (uint64_t delay = kRetryMinNs; waited < remaining_ns;
       delay = std::min(delay * 2, kRetryMaxNs)) {
    waited += delay;
  }
  return waited;
}

bool FaultLayer::held_in_grace(Op op) {
  switch (op) {
    case Op::kOpen:
    case Op::kCreate:
    case Op::kTmpfile:
    case Op::kUnlink:
    case Op::kRmdir:
    case Op::kRename:
      return true;
    default:
      return false;
  }
}

void FaultLayer::wait_out_grace(Work& work) {
  const uint64_t end = grace_end_ns_.load(std::memory_order_relaxed);
  const uint64_t now = elapsed_ns_ ? elapsed_ns_() : 0;
  if (end == 0) return;
  if (now >= end) {
    // Over: later requests need not look (unless a new restart set another end).
    uint64_t expected = end;
    grace_end_ns_.compare_exchange_strong(expected, 0, std::memory_order_relaxed);
    return;
  }
  work.fault_latency_ns += grace_retry_ns(end - now);
  std::lock_guard lock(power_mutex_);
  ++grace_waits_;
}

Result<void> FaultLayer::wait_for_server(Work& work) {
  std::unique_lock lock(power_mutex_);
  assert_held(power_mutex_);
  if (!server_down_) return {};
  if (timeout_mode_ != TimeoutMode::kHard) {
    // The RPC layer's major timeout: the program sees it after this long.
    ++major_timeouts_;
    retransmissions_ += retrans_;
    work.fault_latency_ns += major_timeout_ns_;
    return fail(timeout_mode_ == TimeoutMode::kSoftErr ? ETIMEDOUT : EIO);
  }
  const uint64_t sent_ns = now_ns_ ? now_ns_() : 0;
  const uint64_t ups = server_ups_;
  ++server_waiters_;
  const bool waited =
      wait_locked(lock, [&]() REQUIRES(power_mutex_) { return server_ups_ == ups; });
  --server_waiters_;
  if (!waited || server_ups_ == ups) {
    // Past the waiters' limit, or the caller died, or the daemon stops.
    work.never_sent = true;
    return fail(EIO);
  }
  // "server not responding, still trying": a major timeout every cycle of the
  // emulated time that passed (`ctl time advance`). That time is not charged
  // again: the clock moved on by it, and the request starts after it.
  const uint64_t waited_ns = server_up_at_ns_ - std::min(server_up_at_ns_, sent_ns);
  const uint64_t cycles = major_timeout_ns_ == 0 ? 0 : waited_ns / major_timeout_ns_;
  major_timeouts_ += cycles;
  retransmissions_ += cycles * retrans_;
  return {};
}

void FaultLayer::reset_statistics() {
  {
    std::lock_guard lock(power_mutex_);
    outages_ = server_down_ ? 1 : 0;
    server_restarts_ = 0;
    grace_waits_ = 0;
    major_timeouts_ = 0;
    retransmissions_ = 0;
  }
  Layer::reset_statistics();
}

// What must still answer while the server is down: the mount root's
// attributes, which every path walk to .mimicfs/ctl (`server up`) checks
// (default_permissions), a close (a reader's sends nothing, a writer's
// writes waited already: the emulated client sends each when it is made),
// and a release (an NFSv3 client sends no CLOSE; the REMOVE of a last
// close's silly name waits, as Linux's asynchronous one retries).
bool FaultLayer::waits_for_server(const Call& call) {
  switch (call.op) {
    case Op::kGetattr:
      return call.inode != kRootInode;
    case Op::kFlush:
    case Op::kRelease:
      return false;
    default:
      return true;
  }
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
  // First the server, then its volume: a power cut while a request waited
  // for the server ends it as one sent before the cut.
  if (server_down_ && waits_for_server(call)) {
    const uint64_t crashes = target().crashes();
    if (auto answered = wait_for_server(work); !answered) return answered;
    if (target().crashes() != crashes) {
      work.never_sent = true;
      return fail(EIO);
    }
  }
  if (powered_off_ && call.op != Op::kGetattr && call.op != Op::kStatfs &&
      call.op != Op::kRelease) {
    // Sent to the volume before the restart: it answers from a world that ended.
    (void)wait_for_power(call);
    work.never_sent = true;
    return fail(EIO);
  }
  FaultInjector::Fault fault;
  if (!rules_.empty() && faultable(call.op)) {
    std::string path = target().path(call.inode);
    if (!call.name.empty()) path = (path == "/" ? "" : path) + "/" + std::string(call.name);
    fault = rules_.check(call.op, path, now_ns_ ? now_ns_() : 0);
  }
  // Before the operation, which then meets the new grace period.
  if (fault.server_restart && server_restart_hook_) server_restart_hook_();
  if (grace_end_ns_.load(std::memory_order_relaxed) != 0 && held_in_grace(call.op)) {
    wait_out_grace(work);
  }
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
    if (frozen_) s.power["frozen_operations"] = frozen_operations_ + kept_outside_.load();
    if (target().profile().nfs) {
      s.server = {{"up", !server_down_},
                  {"outages", outages_},
                  {"restarts", server_restarts_},
                  {"in_grace", grace_end_ns_.load(std::memory_order_relaxed) >
                                   (elapsed_ns_ ? elapsed_ns_() : 0)},
                  {"grace_waits", grace_waits_},
                  {"waiting", server_waiters_},
                  {"major_timeouts", major_timeouts_},
                  {"retransmissions", retransmissions_}};
    }
  }
  std::lock_guard lock(cause_mutex_);
  if (!last_crash_.empty()) s.power["last_crash"] = last_crash_;
  return s;
}

}  // namespace mimicfs
