// SPDX-License-Identifier: Apache-2.0
#include "engine/layers/counting_layer.h"

namespace mimicfs {

void CountingLayer::leave(const Call& call, Work& work, int error) {
  counters_.record(call.op, error == 0 ? work.bytes : 0, error);
  if (work.emulated_ns > 0) counters_.add_time(call.op, work.emulated_ns);
}

StatsSnapshot CountingLayer::snapshot() {
  StatsSnapshot s = Layer::snapshot();
  s.ops = counters_.snapshot();
  return s;
}

void CountingLayer::reset_statistics() {
  Layer::reset_statistics();
  counters_.reset();
}

}  // namespace mimicfs
