// SPDX-License-Identifier: Apache-2.0
// CountingLayer: the operation counters of stats.json. After each operation it
// records its class, its bytes (work.bytes), its errno and the emulated time
// the cost layer below set (work.emulated_ns). forget() is not counted.
//
// Thread-safety: OperationCounters' (atomics; errors under their own leaf mutex).
#pragma once

#include "engine/layers/layer.h"

namespace mimicfs {

class CountingLayer final : public Layer {
 public:
  explicit CountingLayer(FileSystem& target) : Layer(target) {}

  // Adds the operation counters ("ops").
  StatsSnapshot snapshot() override;
  void reset_statistics() override;
  // The counters for a volume image, and back.
  nlohmann::json save() const { return counters_.save(); }
  void load(const nlohmann::json& saved) { counters_.load(saved); }

 protected:
  void leave(const Call& call, Work& work, int error) override;

 private:
  OperationCounters counters_;
};

}  // namespace mimicfs
