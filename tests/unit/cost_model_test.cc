// SPDX-License-Identifier: Apache-2.0
#include "engine/time/cost_model.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "engine/profile/profile.h"

namespace mimicfs {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// Every [cost] and [page_cache] key distinct, so each term of a formula shows.
Profile costly() {
  Profile p;
  p.round_trip_ns = 100;
  p.metadata_ns = 200;
  p.read_ns = 3'000;
  p.write_ns = 1'000;
  p.fsync_ns = 50'000;
  p.flush_ns = 20'000;
  p.fallocate_ns = 400;
  p.punch_ns = 500;
  p.unlink_ns = 600;
  p.unlink_extent_ns = 7;
  p.unlink_mib_ns = 300;
  p.extent_ns = 11;
  p.gap_fill_ns = 13;
  p.bandwidth_bytes_per_second = 3'000'000'000;  // 3 bytes per ns: transfers round up
  p.max_request_bytes = 1 << 20;
  p.queue_depth = 4;
  p.memory_bandwidth_bytes_per_second = 8'000'000'000;
  p.syscall_ns = 900;
  return p;
}

DeviceWork work(uint64_t requests, uint64_t bytes, uint64_t extra_extents = 0,
                uint64_t gap_fills = 0) {
  return DeviceWork{requests, bytes, extra_extents, gap_fills};
}

TEST(CostModel, PipelinesRequestsByQueueDepth) {
  const Profile p = costly();
  const CostModel costs(p);
  // One round of queue_depth requests costs one latency: round trip + per request.
  EXPECT_EQ(costs.device_writes(work(1, 0)).device_ns, 1'100u);
  EXPECT_EQ(costs.device_writes(work(4, 0)).device_ns, 1'100u);
  EXPECT_EQ(costs.device_writes(work(5, 0)).device_ns, 2 * 1'100u);
  EXPECT_EQ(costs.device_writes(work(8, 0)).device_ns, 2 * 1'100u);
  EXPECT_EQ(costs.device_writes(work(9, 0)).device_ns, 3 * 1'100u);
}

TEST(CostModel, QueueDepthOneSerializesEveryRequest) {
  Profile p = costly();
  p.queue_depth = 1;
  const CostModel costs(p);
  EXPECT_EQ(costs.device_writes(work(7, 0)).device_ns, 7 * 1'100u);
}

TEST(CostModel, ReadsPayReadNsAndWritesPayWriteNs) {
  const Profile p = costly();
  const CostModel costs(p);
  EXPECT_EQ(costs.device_reads(work(1, 0)).device_ns, 100u + 3'000u);
  EXPECT_EQ(costs.device_writes(work(1, 0)).device_ns, 100u + 1'000u);
}

TEST(CostModel, BytesAtBandwidthRoundUp) {
  const Profile p = costly();
  const CostModel costs(p);
  // 1 byte at 3 bytes/ns is a third of a nanosecond: one. 10 bytes: 3.33 -> 4.
  EXPECT_EQ(costs.device_writes(work(1, 1)).device_ns, 1'100u + 1);
  EXPECT_EQ(costs.device_writes(work(1, 10)).device_ns, 1'100u + 4);
  EXPECT_EQ(costs.device_writes(work(1, 3'000)).device_ns, 1'100u + 1'000);
  EXPECT_EQ(costs.device_writes(work(1, 3'001)).device_ns, 1'100u + 1'001);
}

TEST(CostModel, FullFormulaAddsEveryTerm) {
  const Profile p = costly();
  const CostModel costs(p);
  // ceil(6/4) = 2 rounds x (100 + 1000) + ceil(1 MiB / 3) + 5 x 11 + 3 x 13.
  const Cost cost = costs.device_writes(work(6, 1 << 20, 5, 3));
  EXPECT_EQ(cost.host_ns, 0u);
  EXPECT_EQ(cost.device_ns, 2 * 1'100u + 349'526u + 55u + 39u);
  EXPECT_EQ(cost.total(), cost.device_ns);
  // What the device serves one caller at a time: the bytes, extents and holes,
  // not the request latency (timelines.h).
  EXPECT_EQ(cost.transfer_ns, 349'526u + 55u + 39u);
  EXPECT_EQ(cost.commit_ns, 0u);
}

TEST(CostModel, CommitsAreTheJournalsPart) {
  const Profile p = costly();
  const CostModel costs(p);
  EXPECT_EQ(costs.commit().commit_ns, costs.commit().device_ns);
  Work w;
  w.commits = 2;
  w.metadata_updates = 1;
  w.device_writes = work(1, 3'000);
  const Cost cost = costs.of(w);
  EXPECT_EQ(cost.commit_ns, 2 * (100u + 50'000u));
  EXPECT_EQ(cost.transfer_ns, 1'000u);
  EXPECT_EQ(cost.device_ns, 2 * 50'100u + 300u + 1'100u + 1'000u);
}

TEST(CostModel, EmptyWorkCostsNothing) {
  const Profile p = costly();
  const CostModel costs(p);
  EXPECT_EQ(costs.device_writes(DeviceWork{}).total(), 0u);
  EXPECT_EQ(costs.device_reads(DeviceWork{}).total(), 0u);
  EXPECT_TRUE(DeviceWork{}.empty());
}

TEST(CostModel, GapFillsAloneAreDeviceWork) {
  // fallocate into holes: no request, the device still allocates.
  const Profile p = costly();
  const CostModel costs(p);
  EXPECT_FALSE(work(0, 0, 0, 3).empty());
  EXPECT_EQ(costs.device_writes(work(0, 0, 0, 3)).device_ns, 3 * 13u);
}

TEST(CostModel, DeviceWorkAddsUp) {
  DeviceWork total = work(1, 10, 2, 3);
  total += work(4, 50, 6, 7);
  EXPECT_EQ(total.requests, 5u);
  EXPECT_EQ(total.bytes, 60u);
  EXPECT_EQ(total.extra_extents, 8u);
  EXPECT_EQ(total.gap_fills, 10u);
}

TEST(CostModel, CostAddsUpHostAndDevice) {
  Cost cost{1, 2, 1, 0};
  cost += Cost{10, 20, 3, 4};
  EXPECT_EQ(cost.host_ns, 11u);
  EXPECT_EQ(cost.device_ns, 22u);
  EXPECT_EQ(cost.transfer_ns, 4u);
  EXPECT_EQ(cost.commit_ns, 4u);
  EXPECT_EQ(cost.total(), 33u);
  const Cost three = cost.times(3);
  EXPECT_EQ(three.total(), 99u);
  EXPECT_EQ(three.transfer_ns, 12u);
  EXPECT_EQ(three.commit_ns, 12u);
}

TEST(CostModel, RequestsSplitAtMaxRequestBytes) {
  Profile p = costly();
  p.max_request_bytes = 512 * 1024;
  const CostModel costs(p);
  EXPECT_EQ(costs.requests_for(0), 0u);
  EXPECT_EQ(costs.requests_for(1), 1u);
  EXPECT_EQ(costs.requests_for(512 * 1024), 1u);
  EXPECT_EQ(costs.requests_for(512 * 1024 + 1), 2u);
  EXPECT_EQ(costs.requests_for(64 << 20), 128u);
}

TEST(CostModel, BufferedCopyIsHostTime) {
  const Profile p = costly();
  const CostModel costs(p);
  // syscall + bytes at memory bandwidth (8 bytes/ns), rounded up.
  EXPECT_EQ(costs.buffered_copy(0).host_ns, 900u);
  EXPECT_EQ(costs.buffered_copy(1).host_ns, 901u);
  EXPECT_EQ(costs.buffered_copy(8'000).host_ns, 1'900u);
  EXPECT_EQ(costs.buffered_copy(8'001).host_ns, 1'901u);
  EXPECT_EQ(costs.buffered_copy(8'001).device_ns, 0u);
}

TEST(CostModel, MemoryBandwidthZeroMakesCopiesFree) {
  Profile p = costly();
  p.memory_bandwidth_bytes_per_second = 0;
  const CostModel costs(p);
  EXPECT_EQ(costs.buffered_copy(1 << 30).total(), 900u);
}

TEST(CostModel, CommitIsARoundTripAndTheFsync) {
  const Profile p = costly();
  const CostModel costs(p);
  EXPECT_EQ(costs.commit().host_ns, 0u);
  EXPECT_EQ(costs.commit().device_ns, 100u + 50'000u);
}

TEST(CostModel, AFlushIsARoundTripAndTheCacheFlushNotTheJournals) {
  const Profile p = costly();
  const CostModel costs(p);
  EXPECT_EQ(costs.flush().device_ns, 100u + 20'000u);
  EXPECT_EQ(costs.flush().commit_ns, 0u);  // overlaps: no commit to join
  EXPECT_EQ(costs.flush().transfer_ns, 0u);
  Work work;
  work.flushes = 2;  // copy_range: two chunks, one in place, one...
  work.commits = 1;  // ...extending: both are paid
  EXPECT_EQ(costs.of(work).total(), 2 * (100u + 20'000u) + costs.commit().total());
}

TEST(CostModel, AFlushWithoutItsOwnKeyCostsTheCommit) {
  Profile p = costly();
  p.flush_ns = 0;
  EXPECT_EQ(CostModel(p).flush().total(), CostModel(p).commit().total());
}

TEST(CostModel, MetadataOperationsAreARoundTripAndTheirWork) {
  const Profile p = costly();
  const CostModel costs(p);
  EXPECT_EQ(costs.metadata().device_ns, 100u + 200u);
  EXPECT_EQ(costs.open().device_ns, 100u);
  EXPECT_EQ(costs.fallocate().device_ns, 100u + 400u);
  EXPECT_EQ(costs.punch().device_ns, 100u + 500u);
  for (const Cost& cost : {costs.metadata(), costs.open(), costs.fallocate(), costs.punch()}) {
    EXPECT_EQ(cost.host_ns, 0u);
  }
}

TEST(CostModel, UnlinkPaysForEachFreedExtent) {
  const Profile p = costly();
  const CostModel costs(p);
  EXPECT_EQ(costs.unlink(0, 0).device_ns, 100u + 600u);
  EXPECT_EQ(costs.unlink(1, 0).device_ns, 100u + 600u + 7u);
  EXPECT_EQ(costs.unlink(4096, 0).device_ns, 100u + 600u + 4096u * 7u);
  EXPECT_EQ(costs.unlink(4096, 0).host_ns, 0u);
  // 300 ns per MiB of blocks freed, rounded up to the nanosecond.
  EXPECT_EQ(costs.unlink(1, 3 << 20).device_ns, 100u + 600u + 7u + 900u);
  EXPECT_EQ(costs.unlink(0, 4096).device_ns, 100u + 600u + 2u);  // 300/256 = 1.17
  EXPECT_EQ(costs.freeing(2, 1 << 20).device_ns, 2u * 7u + 300u);
}

TEST(CostModel, BandwidthZeroIsUnlimited) {
  Profile p = costly();
  p.bandwidth_bytes_per_second = 0;
  const CostModel costs(p);
  EXPECT_EQ(costs.device_writes(work(1, uint64_t{1} << 50)).device_ns, 1'100u);
}

TEST(CostModel, AllZeroProfileChargesNothing) {
  Profile p;
  const CostModel costs(p);
  EXPECT_EQ(costs.device_writes(work(100, 1 << 30, 10, 10)).total(), 0u);
  EXPECT_EQ(costs.device_reads(work(100, 1 << 30, 10, 10)).total(), 0u);
  EXPECT_EQ(costs.buffered_copy(1 << 30).total(), 0u);
  EXPECT_EQ(costs.commit().total(), 0u);
  EXPECT_EQ(costs.metadata().total(), 0u);
  EXPECT_EQ(costs.unlink(1000, 1 << 30).total(), 0u);
}

TEST(CostModel, HugeByteCountsDoNotOverflowTheProduct) {
  // bytes x 1e9 overflows 64 bits from 18.4 GB; the quotient fits.
  Profile p = costly();
  p.bandwidth_bytes_per_second = 1'000;
  p.queue_depth = 1;
  const CostModel costs(p);
  const uint64_t tebibyte = uint64_t{1} << 40;
  EXPECT_EQ(costs.device_writes(work(1, tebibyte)).device_ns,
            1'100u + tebibyte * 1'000'000u);  // a millisecond per byte
  EXPECT_EQ(costs.requests_for(kMax), kMax / p.max_request_bytes + 1);
}

TEST(CostModel, TimeBeyondSixtyFourBitsSaturates) {
  // A tebibyte at a byte per second is 1.1e21 ns: more than 64 bits hold. The
  // cost saturates instead of wrapping to a small number.
  Profile p = costly();
  p.bandwidth_bytes_per_second = 1;
  p.memory_bandwidth_bytes_per_second = 1;
  const CostModel costs(p);
  const uint64_t tebibyte = uint64_t{1} << 40;
  EXPECT_EQ(costs.device_writes(work(1, tebibyte)).device_ns, kMax);
  EXPECT_EQ(costs.device_reads(work(kMax, kMax, kMax, kMax)).device_ns, kMax);
  EXPECT_EQ(costs.buffered_copy(tebibyte).host_ns, kMax);
}

}  // namespace
}  // namespace mimicfs
