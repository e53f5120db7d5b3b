// SPDX-License-Identifier: Apache-2.0
#include "engine/time/cost_model.h"

#include <algorithm>
#include <limits>

namespace mimicfs {
namespace {

using Wide = unsigned __int128;

// Sums are taken in 128 bits: a cost past 64-bit nanoseconds (a terabyte at a
// byte per second) saturates instead of wrapping to a small number.
uint64_t saturate(Wide ns) {
  return ns > std::numeric_limits<uint64_t>::max() ? std::numeric_limits<uint64_t>::max()
                                                   : static_cast<uint64_t>(ns);
}

uint64_t div_up(uint64_t value, uint64_t unit) { return value / unit + (value % unit != 0); }

// bytes at `per_second`, in ns.
Wide transfer_ns(uint64_t bytes, uint64_t per_second) {
  if (per_second == 0 || bytes == 0) return 0;
  return (Wide{bytes} * 1'000'000'000u + per_second - 1) / per_second;
}

}  // namespace

CostModel::CostModel(const Profile& profile) : profile_(profile) {}

uint64_t CostModel::requests_for(uint64_t bytes) const {
  return device_requests(bytes, profile_.max_request_bytes);
}

Cost CostModel::device(uint64_t per_request_ns, const DeviceWork& work) const {
  if (work.empty()) return {};
  // Requests in flight overlap: each round of queue_depth costs one latency.
  const uint64_t rounds = div_up(work.requests, profile_.queue_depth);
  const Wide busy = transfer_ns(work.bytes, profile_.bandwidth_bytes_per_second) +
                    Wide{work.extra_extents} * profile_.extent_ns +
                    Wide{work.gap_fills} * profile_.gap_fill_ns;
  Cost cost;
  cost.device_ns =
      saturate(Wide{rounds} * (Wide{profile_.round_trip_ns} + per_request_ns) + busy);
  cost.transfer_ns = std::min(saturate(busy), cost.device_ns);
  return cost;
}

Cost CostModel::device_writes(const DeviceWork& work) const {
  return device(profile_.write_ns, work);
}

Cost CostModel::device_reads(const DeviceWork& work) const {
  return device(profile_.read_ns, work);
}

Cost CostModel::buffered_copy(uint64_t bytes) const {
  return {saturate(profile_.syscall_ns +
                   transfer_ns(bytes, profile_.memory_bandwidth_bytes_per_second)),
          0};
}

Cost CostModel::commit() const {
  const uint64_t ns = profile_.round_trip_ns + profile_.fsync_ns;
  return {0, ns, 0, ns};
}

// Request latency, which overlaps other callers' (the block layer merges
// flushes issued while one is in flight); not the journal's commit, which a
// caller could otherwise join (timelines.h). 0: as fsync_ns.
Cost CostModel::flush() const {
  return {0, profile_.round_trip_ns + (profile_.flush_ns != 0 ? profile_.flush_ns : profile_.fsync_ns)};
}

Cost CostModel::metadata() const { return {0, profile_.round_trip_ns + profile_.metadata_ns}; }

Cost CostModel::open() const { return {0, profile_.round_trip_ns}; }

Cost CostModel::fallocate() const { return {0, profile_.round_trip_ns + profile_.fallocate_ns}; }

Cost CostModel::punch() const { return {0, profile_.round_trip_ns + profile_.punch_ns}; }

Cost CostModel::freeing(uint64_t extents, uint64_t bytes) const {
  constexpr uint64_t kMiB = 1 << 20;
  return {0, saturate(Wide{extents} * profile_.unlink_extent_ns +
                      (Wide{bytes} * profile_.unlink_mib_ns + kMiB - 1) / kMiB)};
}

Cost CostModel::unlink(uint64_t freed_extents, uint64_t freed_bytes) const {
  Cost cost{0, profile_.round_trip_ns + profile_.unlink_ns};
  cost += freeing(freed_extents, freed_bytes);
  return cost;
}

Cost CostModel::of(const Work& work) const {
  Cost cost;
  cost += metadata().times(work.metadata_updates);
  cost += open().times(work.opens);
  if (work.cache_copies > 0) {
    cost += Cost{
        saturate(Wide{work.cache_copies} * profile_.syscall_ns +
                 transfer_ns(work.cache_copy_bytes, profile_.memory_bandwidth_bytes_per_second)),
        0};
  }
  cost += device_reads(work.device_reads);
  cost += device_writes(work.device_writes);
  cost += commit().times(work.commits);
  cost += flush().times(work.flushes);
  cost += fallocate().times(work.fallocates);
  cost += punch().times(work.punches);
  if (work.unlinks > 0) {
    cost += Cost{0, saturate(Wide{work.unlinks} * (profile_.round_trip_ns + profile_.unlink_ns))};
  }
  cost += freeing(work.extents_freed, work.bytes_freed);
  return cost;
}

Cost CostModel::of(const DeferredTask& task) const {
  switch (task.kind) {
    case DeferredTask::Kind::kReclaim:
      return freeing(task.extents, task.bytes);
  }
  return {};
}

}  // namespace mimicfs
