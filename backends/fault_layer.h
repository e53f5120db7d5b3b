// FaultLayer: injects the faults of a FaultInjector's rules (fault_injector.h)
// into the operations that reach the device or change the namespace, by the
// path from the mount root. A firing error rule returns its errno instead of
// running the operation; a latency rule adds to the operation's work
// (Work::fault_latency_ns), which the cost layer above charges.
//
// Lookups, getattr, readdir, readlink, lseek, statfs, xattrs and release are
// never faulted: how often the kernel sends them depends on its caches.
#pragma once

#include <atomic>

#include "backends/fault_injector.h"
#include "backends/layer.h"

namespace mimicfs {

class FaultLayer final : public Layer {
 public:
  explicit FaultLayer(FileSystem& target) : Layer(target) {}

  FaultInjector& rules() { return rules_; }
  // A volume held off after a power cut (`ctl crash hold`) answers every
  // operation EIO, as a device that is gone, until powered on again (`ctl
  // restart`); getattr, statfs and release still answer, so the mount stays
  // walkable and descriptors can close.
  void power_off() { powered_off_ = true; }
  void power_on() { powered_off_ = false; }
  bool powered() const { return !powered_off_; }
  // Adds the rules' state ("faults") to the target's snapshot.
  StatsSnapshot snapshot() override;

  // True for the operations fault rules apply to.
  static bool faultable(Op op);

 protected:
  Result<void> enter(const Call& call, Work& work) override;

 private:
  FaultInjector rules_;
  std::atomic<bool> powered_off_{false};
};

}  // namespace mimicfs
