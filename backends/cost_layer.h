// CostLayer: emulated time. After each operation it prices the work the layers
// below report (work.h) with the CostModel, adds it to the EmulatedClock (which,
// in real latency mode, also waits: no lock of the target is held by then), to
// the file the work was for, and records the total in work.emulated_ns for the
// layers above. A failed operation costs only an injected fault's latency.
//
// Thread-safety: the clock is lock-free; per-file times are guarded by
// files_mutex_, a leaf lock never held while calling the target.
#pragma once

#include <mutex>
#include <unordered_map>

#include "backends/cost_model.h"
#include "backends/emulated_clock.h"
#include "backends/layer.h"

namespace mimicfs {

class CostLayer final : public Layer {
 public:
  CostLayer(FileSystem& target, LatencyMode latency);

  void set_latency(LatencyMode mode) { clock_.set_mode(mode); }
  LatencyMode latency() const { return clock_.mode(); }
  // Every operation's emulated time since the start or the last reset.
  uint64_t emulated_ns() const { return clock_.total_ns(); }
  // Files with emulated time kept (live inodes only: a destroyed one is dropped).
  size_t tracked_files();

  void forget(uint64_t inode, uint64_t references, Work& work) override;
  CrashReport crash(Work& work) override;
  // Adds the clock and each file's emulated time.
  StatsSnapshot snapshot() override;
  Result<FileStats> file_stats(uint64_t inode) override;
  void reset_statistics() override;

 protected:
  void leave(const Call& call, Work& work, int error) override;

 private:
  void forget_destroyed(const Work& work);  // takes files_mutex_
  uint64_t file_ns(uint64_t inode);         // takes files_mutex_

  const CostModel costs_;
  EmulatedClock clock_;
  std::mutex files_mutex_;
  std::unordered_map<uint64_t, uint64_t> file_ns_;  // inode -> ns; guarded by files_mutex_
};

}  // namespace mimicfs
