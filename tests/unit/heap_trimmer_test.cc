// HeapTrimmer's decision (fusefs/heap_trimmer.h): when the daemon is quiet
// enough to pay for a walk of malloc's arenas. The class itself runs a thread
// and calls glibc; only the decision is pure.
#include "fusefs/heap_trimmer.h"

#include <gtest/gtest.h>

namespace mimicfs {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

TEST(HeapTrimmer, ChecksWhenTheDaemonIsQuiet) {
  EXPECT_TRUE(HeapTrimmer::check_now(0, kSecond, 0));
  EXPECT_TRUE(HeapTrimmer::check_now(kSecond / 10, kSecond, 0));  // at the line
}

TEST(HeapTrimmer, SkipsWhileTheDaemonIsBusy) {
  EXPECT_FALSE(HeapTrimmer::check_now(kSecond / 10 + 1, kSecond, 0));
  EXPECT_FALSE(HeapTrimmer::check_now(2 * kSecond, kSecond, 0));  // two CPUs' worth
  // The share is of the time that went by, not of a nominal second.
  EXPECT_TRUE(HeapTrimmer::check_now(kSecond / 10 + 1, 2 * kSecond, 0));
}

TEST(HeapTrimmer, ABusyDaemonIsCheckedAfterMaxSkips) {
  for (unsigned skipped = 0; skipped < HeapTrimmer::kMaxSkips; ++skipped) {
    EXPECT_FALSE(HeapTrimmer::check_now(kSecond, kSecond, skipped)) << skipped;
  }
  EXPECT_TRUE(HeapTrimmer::check_now(kSecond, kSecond, HeapTrimmer::kMaxSkips));
}

}  // namespace
}  // namespace mimicfs
