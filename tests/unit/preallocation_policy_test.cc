// SPDX-License-Identifier: Apache-2.0
#include "engine/space/preallocation_policy.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string_view>
#include <vector>

namespace mimicfs {
namespace {

Profile builtin(std::string_view name) {
  auto profile = load_builtin_profile(name);
  if (!profile) throw std::runtime_error(profile.error());
  return *profile;
}

// An append of `count` blocks to a file whose blocks end at `end`.
AllocationRequest append(uint64_t end, uint64_t count) {
  return AllocationRequest{end, count, end, end + count};
}

// The windows a stream of `count`-block appends gets, as request + extra.
std::vector<uint64_t> windows(const PreallocationPolicy& policy, uint64_t count, int appends) {
  PreallocationState state;
  std::vector<uint64_t> out;
  uint64_t end = 0;
  for (int i = 0; i < appends; ++i) {
    const uint64_t extra = policy.extra_blocks(append(end, count), state);
    out.push_back(count + extra);
    end += count + extra;
  }
  return out;
}

// --- InodeWindows

// A stream's windows double from the request up to the maximum, then stay there:
// two files appended together interleave in ever larger chunks (seed 003).
TEST(InodeWindows, WindowDoublesFromTheRequestUpToTheMax) {
  const InodeWindows policy(64);
  EXPECT_EQ(policy.kind(), PreallocationKind::kInodeReservation);
  EXPECT_EQ(windows(policy, 4, 7), (std::vector<uint64_t>{4, 8, 16, 32, 64, 64, 64}));
}

// A request of at least the maximum gets no extra and no smaller window later.
TEST(InodeWindows, RequestLargerThanTheMaxGetsNoExtra) {
  const InodeWindows policy(16);
  PreallocationState state;
  EXPECT_EQ(policy.extra_blocks(append(0, 40), state), 0u);
  EXPECT_EQ(policy.extra_blocks(append(40, 4), state), 12u);  // back to the max window
}

// Filling a hole before the file's last block is not a stream: no window, and
// the stream's next window is unchanged.
TEST(InodeWindows, NoWindowBeforeTheLastMappedBlock) {
  const InodeWindows policy(64);
  PreallocationState state;
  ASSERT_EQ(policy.extra_blocks(append(0, 4), state), 0u);
  ASSERT_EQ(policy.extra_blocks(append(4, 4), state), 4u);  // window 8; next 16
  EXPECT_EQ(policy.extra_blocks(AllocationRequest{2, 1, 12, 12}, state), 0u);
  EXPECT_EQ(state.next_window, 16u);
  EXPECT_EQ(policy.extra_blocks(append(12, 4), state), 12u);
}

// --- SpeculativeEndOfFile

// An allocation at EOF maps blocks up to the next power of two of the file's
// size; from twice the minimum on, strictly beyond it, so the file doubles. At
// most the maximum extra.
TEST(SpeculativeEndOfFile, ExtraReachesTheNextPowerOfTwo) {
  const SpeculativeEndOfFile policy(16, 1024);
  EXPECT_EQ(policy.kind(), PreallocationKind::kBeyondEndOfFile);
  PreallocationState state;
  EXPECT_EQ(policy.extra_blocks(append(16, 8), state), 8u);       // 24 -> 32
  EXPECT_EQ(policy.extra_blocks(append(8, 8), state), 0u);        // 16 is a power of two
  EXPECT_EQ(policy.extra_blocks(append(32, 8), state), 24u);      // 40 -> 64
  EXPECT_EQ(policy.extra_blocks(append(56, 8), state), 64u);      // 64 -> 128: doubles
  EXPECT_EQ(policy.extra_blocks(append(100, 5), state), 23u);     // 105 -> 128
  EXPECT_EQ(policy.extra_blocks(append(5000, 8), state), 1024u);  // 8192 - 5008, capped
}

// A file smaller than the minimum (xfs's allocsize) gets no preallocation.
TEST(SpeculativeEndOfFile, NothingBelowTheMinimum) {
  const SpeculativeEndOfFile policy(16, 1024);
  PreallocationState state;
  EXPECT_EQ(policy.extra_blocks(append(0, 1), state), 0u);
  EXPECT_EQ(policy.extra_blocks(append(0, 15), state), 0u);
  EXPECT_EQ(policy.extra_blocks(append(0, 17), state), 15u);
}

// 32 KiB O_SYNC appends get chunks of 8, 8, 16, 32 ... blocks, as xfs gives them.
TEST(SpeculativeEndOfFile, AppendsGetChunksThatDoubleTheFile) {
  const SpeculativeEndOfFile policy(16, 1 << 21);
  EXPECT_EQ(windows(policy, 8, 7), (std::vector<uint64_t>{8, 8, 16, 32, 64, 128, 256}));
}

// Only an allocation that extends the file, at its end, is speculative: not a
// hole in the middle, nor blocks below the size.
TEST(SpeculativeEndOfFile, NothingUnlessExtendingAtEndOfFile) {
  const SpeculativeEndOfFile policy(16, 1024);
  PreallocationState state;
  EXPECT_EQ(policy.extra_blocks(AllocationRequest{10, 2, 20, 20}, state), 0u);  // hole
  EXPECT_EQ(policy.extra_blocks(AllocationRequest{20, 2, 20, 30}, state), 0u);  // below size
  EXPECT_EQ(policy.extra_blocks(AllocationRequest{20, 10, 20, 30}, state), 2u);
  EXPECT_EQ(policy.extra_blocks(AllocationRequest{25, 10, 20, 30}, state), 29u);  // past the end
}

// --- the factory

// ext4 gets windows (8 MiB max), xfs speculative preallocation (from 64 KiB, at
// most 8 GiB extra),
// the others none: the policy follows the profile's keys, in blocks.
TEST(PreallocationPolicy, FactoryFollowsTheProfile) {
  auto ext4 = make_preallocation_policy(builtin("ext4"));
  ASSERT_NE(ext4, nullptr);
  EXPECT_EQ(ext4->kind(), PreallocationKind::kInodeReservation);
  PreallocationState state;
  state.next_window = 1'000'000;
  EXPECT_EQ(ext4->extra_blocks(append(0, 1), state), 2047u);  // 8 MiB / 4 KiB - 1

  auto xfs = make_preallocation_policy(builtin("xfs"));
  ASSERT_NE(xfs, nullptr);
  EXPECT_EQ(xfs->kind(), PreallocationKind::kBeyondEndOfFile);
  EXPECT_EQ(xfs->extra_blocks(append(0, 15), state), 0u);  // below 64 KiB: none
  EXPECT_EQ(xfs->extra_blocks(append(0, 17), state), 15u);
  EXPECT_EQ(xfs->extra_blocks(append(uint64_t{1} << 30, 1), state), 2097152u);  // 8 GiB

  for (std::string_view name : {"btrfs", "nfs", "nfs42", "ideal"}) {
    EXPECT_EQ(make_preallocation_policy(builtin(name)), nullptr) << name;
  }
}

}  // namespace
}  // namespace mimicfs
