// SPDX-License-Identifier: Apache-2.0
#include "engine/layers/counting_layer.h"

#include <gtest/gtest.h>

#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using namespace volume_fixture;

using Stack = LayerOverVolume<CountingLayer>;

TEST(CountingLayer, CountsEachOperationWithItsBytesAndErrors) {
  Stack s("ext4");
  FileSystem& fs = s.layer;
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  ASSERT_TRUE(fs.write(f, 0, as_bytes("hello")).has_value());
  ASSERT_TRUE(fs.write(f, 5, as_bytes("!")).has_value());
  std::vector<std::byte> out(16);
  ASSERT_TRUE(fs.read(f, 0, out).has_value());
  EXPECT_FALSE(fs.lookup(kRoot, "missing").has_value());
  ASSERT_TRUE(fs.fallocate(f, kPunch, 0, 4096).has_value());

  const auto ops = fs.snapshot().ops;
  EXPECT_EQ(ops.at("create").count, 1u);
  EXPECT_EQ(ops.at("write").count, 2u);
  EXPECT_EQ(ops.at("write").bytes, 6u);
  EXPECT_EQ(ops.at("read").bytes, 6u);
  EXPECT_EQ(ops.at("lookup").errors.at("ENOENT"), 1u);
  EXPECT_EQ(ops.at("punch").bytes, 4096u);
  EXPECT_FALSE(ops.contains("fallocate"));
}

TEST(CountingLayer, AddsTheEmulatedTimeSetBelow) {
  Stack s("ideal");
  FileSystem& fs = s.layer;
  Work work;
  work.emulated_ns = 0;
  ASSERT_TRUE(fs.mkdir(kRoot, "d", 0755, Owner{}, work).has_value());
  EXPECT_EQ(fs.snapshot().ops.at("mkdir").emulated_ns, 0u);  // the volume sets no time
}

TEST(CountingLayer, ForgetIsNotCountedAndResetZeroes) {
  Stack s("ideal");
  FileSystem& fs = s.layer;
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  fs.forget(f, 1);
  EXPECT_EQ(fs.snapshot().ops.size(), 1u);  // create only
  fs.reset_statistics();
  EXPECT_TRUE(fs.snapshot().ops.empty());
}

}  // namespace
}  // namespace mimicfs
