// SPDX-License-Identifier: Apache-2.0
// CostLayer: emulated time. After each operation it prices the work the layers
// below report (work.h) with the CostModel, adds it to the EmulatedClock (which,
// in real latency mode, also waits: no lock of the target is held by then), to
// the file the work was for, and records the total in work.emulated_ns for the
// layers above. A failed operation costs only an injected fault's latency.
//
// Deferred work: a task an operation queued (Work::deferred) runs on the
// volume's background worker (WorkerSchedule); it completes, and the core
// applies its effect, when the clock reaches its end. Its cost is not the
// operation's: background work takes no foreground time, but for an
// allocation that found no space and waited for the worker
// (Work::waited_for_deferred): it is charged the wait.
//
// The kernel's own threads (KernelThreads): the operation whose work moves the
// clock past the flusher's or the periodic commit's wake calls
// FileSystem::background after its own work, which costs nothing.
//
// Thread-safety: reading the clock is lock-free, charging it takes the
// timelines' leaf lock (timelines.h); per-file times and the schedules are
// guarded by files_mutex_ and schedule_mutex_, leaf locks never held while
// calling the target.
#pragma once

#include <atomic>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "engine/base/thread_annotations.h"
#include "engine/layers/layer.h"
#include "engine/time/cost_model.h"
#include "engine/time/emulated_clock.h"
#include "engine/time/kernel_threads.h"
#include "engine/time/worker_schedule.h"

namespace mimicfs {

class CostLayer final : public Layer {
 public:
  CostLayer(FileSystem& target, LatencyMode latency);

  void set_latency(LatencyMode mode) { clock_.set_mode(mode); }
  LatencyMode latency() const { return clock_.mode(); }
  // Every operation's emulated time since the start or the last reset.
  uint64_t emulated_ns() const { return clock_.total_ns(); }
  // Time as it passes for the programs on the volume, idle time included: in
  // virtual mode the clock (idle time passes with advance() only); in real
  // mode the host's monotonic time, on the clock's scale.
  uint64_t elapsed_ns() const;
  // The same, but never set back by a statistics reset: for deadlines that
  // outlive one (an NFS server's grace period and leases).
  uint64_t uptime_ns() EXCLUDES(schedule_mutex_);
  // `ctl time advance`: `ns` of idle time pass on the clock (virtual mode);
  // the deferred work and the background threads it reaches run.
  void advance(uint64_t ns, Work& work) EXCLUDES(schedule_mutex_, files_mutex_);
  // A request that passed none of the layers but waited on the server (an
  // NFS lock through a soft timeout or a grace period): its
  // work.fault_latency_ns on its caller's timeline, as an operation's.
  void charge_wait(const Work& work);
  // Files with emulated time kept (live inodes only: a destroyed one is dropped).
  size_t tracked_files();

  // As Layer's; a forget, which leave() does not see, may destroy an inode too.
  OperationReply dispatch(const Operation& operation, Work& work) override;
  CrashReport crash(Work& work) override;
  // `ctl settle`: every deferred task completes now, as if the caller waited
  // for the background worker; the clock does not move.
  size_t complete_all_deferred() override;
  // Adds the clock and each file's emulated time.
  StatsSnapshot snapshot() override;
  Result<FileStats> file_stats(uint64_t inode) override;
  void reset_statistics() override;
  // The emulated time, in total and per file, for a volume image (no task is
  // pending: the volume settled its deferred work first), and back.
  nlohmann::json save() EXCLUDES(files_mutex_, schedule_mutex_);
  void load(const nlohmann::json& saved) EXCLUDES(files_mutex_, schedule_mutex_);

 protected:
  void leave(const Call& call, Work& work, int error) override;

 private:
  void forget_destroyed(const Work& work) EXCLUDES(files_mutex_);
  uint64_t file_ns(uint64_t inode) EXCLUDES(files_mutex_);
  void schedule(const Work& work) EXCLUDES(schedule_mutex_);
  // Completes what the clock has reached.
  void complete_due() EXCLUDES(schedule_mutex_, files_mutex_);
  // The flusher and the periodic commit the clock has reached, if any.
  void run_background(Work& work) EXCLUDES(schedule_mutex_, files_mutex_);
  // next_wake_ns_ from threads_.
  void publish_next_wake() REQUIRES(schedule_mutex_);

  const CostModel costs_;
  EmulatedClock clock_;
  std::mutex files_mutex_;
  std::unordered_map<uint64_t, uint64_t> file_ns_ GUARDED_BY(files_mutex_);  // inode -> ns
  // The background worker's and the kernel's threads' schedules; the clock is
  // reset under the same lock, so that they move with it.
  std::mutex schedule_mutex_;
  WorkerSchedule worker_ GUARDED_BY(schedule_mutex_);
  KernelThreads threads_ GUARDED_BY(schedule_mutex_);
  // threads_.next_wake_on_clock(), read without the lock by every operation.
  std::atomic<uint64_t> next_wake_ns_{std::numeric_limits<uint64_t>::max()};
};

}  // namespace mimicfs
