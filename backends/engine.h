// Engine: a Volume and its layers, stacked as a mount uses them:
//
//   CountingLayer -> CostLayer -> FaultLayer -> Volume
//
// fs() is the top, what the FUSE adapter and the engine tests call. The layers
// are also reachable by name for what only they know (fault rules, the clock).
#pragma once

#include <memory>

#include "backends/cost_layer.h"
#include "backends/counting_layer.h"
#include "backends/data_store.h"
#include "backends/fault_layer.h"
#include "backends/volume.h"
#include "backends/wall_clock.h"

namespace mimicfs {

class Engine {
 public:
  Engine(Profile profile, std::unique_ptr<DataStore> store, const WallClock& clock,
         LatencyMode latency = {})
      : volume_(std::move(profile), std::move(store), clock),
        faults_(volume_),
        cost_(faults_, latency),
        counting_(cost_) {}
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  FileSystem& fs() { return counting_; }
  Volume& volume() { return volume_; }
  FaultInjector& faults() { return faults_.rules(); }
  CostLayer& cost() { return cost_; }
  void power_off() { faults_.power_off(); }
  void power_on() { faults_.power_on(); }

 private:
  Volume volume_;
  FaultLayer faults_;
  CostLayer cost_;
  CountingLayer counting_;
};

}  // namespace mimicfs
