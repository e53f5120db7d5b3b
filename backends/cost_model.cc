#include "backends/cost_model.h"

namespace mimicfs {
namespace {

// bytes at `per_second`, in ns; 128-bit so a terabyte at a byte per second fits.
uint64_t transfer_ns(uint64_t bytes, uint64_t per_second) {
  if (per_second == 0 || bytes == 0) return 0;
  const unsigned __int128 ns = static_cast<unsigned __int128>(bytes) * 1'000'000'000u;
  return static_cast<uint64_t>((ns + per_second - 1) / per_second);
}

}  // namespace

CostModel::CostModel(const Profile& profile) : profile_(profile) {}

uint64_t CostModel::requests_for(uint64_t bytes) const {
  return (bytes + profile_.max_request_bytes - 1) / profile_.max_request_bytes;
}

Cost CostModel::device(uint64_t per_request_ns, const DeviceWork& work) const {
  if (work.empty()) return {};
  // Requests in flight overlap: each round of queue_depth costs one latency.
  const uint64_t rounds = (work.requests + profile_.queue_depth - 1) / profile_.queue_depth;
  Cost cost;
  cost.device_ns = rounds * (profile_.round_trip_ns + per_request_ns) +
                   transfer_ns(work.bytes, profile_.bandwidth_bytes_per_second) +
                   work.extra_extents * profile_.extent_ns + work.gap_fills * profile_.gap_fill_ns;
  return cost;
}

Cost CostModel::device_writes(const DeviceWork& work) const {
  return device(profile_.write_ns, work);
}

Cost CostModel::device_reads(const DeviceWork& work) const {
  return device(profile_.read_ns, work);
}

Cost CostModel::buffered_copy(uint64_t bytes) const {
  return {profile_.syscall_ns + transfer_ns(bytes, profile_.memory_bandwidth_bytes_per_second), 0};
}

Cost CostModel::commit() const { return {0, profile_.round_trip_ns + profile_.fsync_ns}; }

Cost CostModel::metadata() const { return {0, profile_.round_trip_ns + profile_.metadata_ns}; }

Cost CostModel::open() const { return {0, profile_.round_trip_ns}; }

Cost CostModel::fallocate() const { return {0, profile_.round_trip_ns + profile_.fallocate_ns}; }

Cost CostModel::punch() const { return {0, profile_.round_trip_ns + profile_.punch_ns}; }

Cost CostModel::unlink(uint64_t freed_extents) const {
  return {0,
          profile_.round_trip_ns + profile_.unlink_ns + freed_extents * profile_.unlink_extent_ns};
}

}  // namespace mimicfs
