// FaultLayer: injects the faults of a FaultInjector's rules (fault_injector.h)
// into the operations that reach the device or change the namespace, by the
// path from the mount root. A firing error rule returns its errno instead of
// running the operation; a latency rule adds to the operation's work
// (Work::fault_latency_ns), which the cost layer above charges.
//
// Lookups, getattr, readdir, readlink, lseek, statfs, xattrs and release are
// never faulted: how often the kernel sends them depends on its caches.
#pragma once

#include "backends/fault_injector.h"
#include "backends/layer.h"

namespace mimicfs {

class FaultLayer final : public Layer {
 public:
  explicit FaultLayer(FileSystem& target) : Layer(target) {}

  FaultInjector& rules() { return rules_; }
  // Adds the rules' state ("faults") to the target's snapshot.
  StatsSnapshot snapshot() override;

  // True for the operations fault rules apply to.
  static bool faultable(Op op);

 protected:
  Result<void> enter(const Call& call, Work& work) override;

 private:
  FaultInjector rules_;
};

}  // namespace mimicfs
