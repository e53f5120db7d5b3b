// SPDX-License-Identifier: Apache-2.0
// The profile keys of emulated time, the page cache, O_DIRECT and durability:
// [cost], [page_cache], [durability] and device.logical_block_size.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "engine/profile/profile.h"

namespace mimicfs {
namespace {

constexpr std::string_view kBase = R"(name = "p"

[device]
allocation_unit = 4096
capacity_bytes = 1048576

[statfs]
block_size = 4096
fragment_size = 4096
name_max = 255

[fallocate]
modes = []

[allocation]
placement = "goal"
)";

std::string with_section(std::string_view section) {
  return std::string(kBase) + "\n" + std::string(section);
}

Profile parsed(std::string_view text) {
  auto profile = parse_profile(text, "my.toml");
  EXPECT_TRUE(profile.has_value()) << profile.error();
  return profile.value_or(Profile{});
}

std::string error_of(std::string_view text) {
  auto profile = parse_profile(text, "my.toml");
  EXPECT_FALSE(profile.has_value()) << "parsed, but should not have:\n" << text;
  return profile ? std::string() : profile.error();
}

std::string override_error(std::string_view base, const std::vector<std::string>& assignments) {
  auto profile = load_builtin_profile(base);
  EXPECT_TRUE(profile.has_value());
  if (!profile) return {};
  auto result = apply_overrides(*profile, assignments);
  EXPECT_FALSE(result.has_value()) << "applied, but should not have";
  return result ? std::string() : result.error();
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

TEST(ProfileCostKeys, DefaultsAreFreeAndLocal) {
  const Profile p = parsed(kBase);
  EXPECT_EQ(p.logical_block_size, 512u);
  EXPECT_EQ(p.round_trip_ns, 0u);
  EXPECT_EQ(p.write_ns, 0u);
  EXPECT_EQ(p.fsync_ns, 0u);
  EXPECT_EQ(p.bandwidth_bytes_per_second, 0u);
  EXPECT_EQ(p.max_request_bytes, 1u << 20);
  EXPECT_EQ(p.queue_depth, 1u);
  EXPECT_EQ(p.memory_bandwidth_bytes_per_second, 0u);
  EXPECT_EQ(p.syscall_ns, 0u);
  EXPECT_EQ(p.dirty_unit, 4096u);
  EXPECT_EQ(p.dirty_limit_bytes, 0u);
  EXPECT_FALSE(p.flush_on_close);
  EXPECT_TRUE(p.direct_io);
  EXPECT_EQ(p.metadata_durability, "journal");
}

TEST(ProfileCostKeys, EveryKeyParses) {
  const Profile p = parsed(with_section(R"([cost]
round_trip_ns = 1
metadata_ns = 2
read_ns = 3
write_ns = 4
fsync_ns = 5
fallocate_ns = 6
punch_ns = 7
unlink_ns = 8
unlink_extent_ns = 9
unlink_mib_ns = 17
extent_ns = 10
gap_fill_ns = 11
bandwidth_bytes_per_second = 12
max_request_bytes = 4096
queue_depth = 13

[page_cache]
memory_bandwidth_bytes_per_second = 14
syscall_ns = 15
dirty_unit = 1
dirty_limit_bytes = 16
flush_on_close = true
direct_io = false

[durability]
metadata = "synchronous"
)"));
  EXPECT_EQ(p.round_trip_ns, 1u);
  EXPECT_EQ(p.metadata_ns, 2u);
  EXPECT_EQ(p.read_ns, 3u);
  EXPECT_EQ(p.write_ns, 4u);
  EXPECT_EQ(p.fsync_ns, 5u);
  EXPECT_EQ(p.fallocate_ns, 6u);
  EXPECT_EQ(p.punch_ns, 7u);
  EXPECT_EQ(p.unlink_ns, 8u);
  EXPECT_EQ(p.unlink_extent_ns, 9u);
  EXPECT_EQ(p.unlink_mib_ns, 17u);
  EXPECT_EQ(p.extent_ns, 10u);
  EXPECT_EQ(p.gap_fill_ns, 11u);
  EXPECT_EQ(p.bandwidth_bytes_per_second, 12u);
  EXPECT_EQ(p.max_request_bytes, 4096u);
  EXPECT_EQ(p.queue_depth, 13u);
  EXPECT_EQ(p.memory_bandwidth_bytes_per_second, 14u);
  EXPECT_EQ(p.syscall_ns, 15u);
  EXPECT_EQ(p.dirty_unit, 1u);
  EXPECT_EQ(p.dirty_limit_bytes, 16u);
  EXPECT_TRUE(p.flush_on_close);
  EXPECT_FALSE(p.direct_io);
  EXPECT_EQ(p.metadata_durability, "synchronous");
}

TEST(ProfileCostKeys, LogicalBlockSizeMustBeAPowerOfTwo) {
  const std::string override = override_error("ext4", {"device.logical_block_size=1000"});
  EXPECT_TRUE(contains(override, "device.logical_block_size")) << override;
  EXPECT_TRUE(contains(override, "power of two")) << override;
  EXPECT_TRUE(contains(override_error("ext4", {"device.logical_block_size=0"}),
                       "device.logical_block_size"));
}

TEST(ProfileCostKeys, LogicalBlockSizeInAFileIsNamedWithItsLine) {
  std::string text(kBase);
  text.replace(text.find("capacity_bytes"), 0, "logical_block_size = 768\n");
  const std::string message = error_of(text);
  EXPECT_TRUE(contains(message, "my.toml:5: device.logical_block_size")) << message;
  EXPECT_TRUE(contains(message, "power of two")) << message;
}

TEST(ProfileCostKeys, LogicalBlockSizeMustNotExceedTheAllocationUnit) {
  const std::string message = override_error("ext4", {"device.logical_block_size=8192"});
  EXPECT_TRUE(contains(message, "device.logical_block_size")) << message;
  EXPECT_TRUE(contains(message, "device.allocation_unit")) << message;
  // nfs allocates 512-byte units: 512 fits, 1024 does not.
  auto fits = apply_overrides(*load_builtin_profile("nfs"), {"device.logical_block_size=512"});
  EXPECT_TRUE(fits.has_value()) << fits.error();
  EXPECT_TRUE(contains(override_error("nfs", {"device.logical_block_size=1024"}),
                       "device.logical_block_size"));
}

TEST(ProfileCostKeys, UnknownMetadataDurabilityIsNamed) {
  const std::string message = error_of(with_section("[durability]\nmetadata = \"eventual\"\n"));
  EXPECT_TRUE(contains(message, "durability.metadata")) << message;
  EXPECT_TRUE(contains(message, "eventual")) << message;
  EXPECT_TRUE(contains(message, "journal")) << message;
  EXPECT_TRUE(contains(message, "log_tree")) << message;
  EXPECT_TRUE(contains(message, "synchronous")) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;

  const std::string override = override_error("ext4", {"durability.metadata=eventual"});
  EXPECT_TRUE(contains(override, "--set durability.metadata")) << override;
}

TEST(ProfileCostKeys, QueueDepthZeroIsRefused) {
  const std::string message = error_of(with_section("[cost]\nqueue_depth = 0\n"));
  EXPECT_TRUE(contains(message, "cost.queue_depth")) << message;
  EXPECT_TRUE(contains(override_error("nfs", {"cost.queue_depth=0"}), "--set cost.queue_depth"));
}

TEST(ProfileCostKeys, DirtyUnitMustBeAPowerOfTwo) {
  const std::string message = override_error("ext4", {"page_cache.dirty_unit=3000"});
  EXPECT_TRUE(contains(message, "page_cache.dirty_unit")) << message;
  EXPECT_TRUE(contains(override_error("ext4", {"page_cache.dirty_unit=0"}), "dirty_unit"));
}

TEST(ProfileCostKeys, MaxRequestBytesZeroIsRefused) {
  // requests_for divides by it.
  EXPECT_TRUE(
      contains(override_error("nfs", {"cost.max_request_bytes=0"}), "cost.max_request_bytes"));
}

TEST(ProfileCostKeys, NegativeAndWronglyTypedCostsAreNamed) {
  EXPECT_TRUE(contains(override_error("nfs", {"cost.fsync_ns=-1"}), "cost.fsync_ns"));
  EXPECT_TRUE(contains(override_error("nfs", {"cost.write_ns=fast"}), "cost.write_ns"));
  EXPECT_TRUE(contains(override_error("nfs", {"page_cache.flush_on_close=1"}),
                       "page_cache.flush_on_close"));
}

TEST(ProfileCostKeys, OverridesSetCostKeys) {
  auto profile = apply_overrides(*load_builtin_profile("ext4"),
                                 {"page_cache.dirty_limit_bytes=8192", "cost.fsync_ns=7",
                                  "durability.metadata=synchronous", "page_cache.direct_io=false"});
  ASSERT_TRUE(profile.has_value()) << profile.error();
  EXPECT_EQ(profile->dirty_limit_bytes, 8192u);
  EXPECT_EQ(profile->fsync_ns, 7u);
  EXPECT_EQ(profile->metadata_durability, "synchronous");
  EXPECT_FALSE(profile->direct_io);
}

// Every key of this issue, compared one by one.
void expect_same_cost_keys(const Profile& a, const Profile& b, std::string_view name) {
  EXPECT_EQ(a.logical_block_size, b.logical_block_size) << name;
  EXPECT_EQ(a.round_trip_ns, b.round_trip_ns) << name;
  EXPECT_EQ(a.metadata_ns, b.metadata_ns) << name;
  EXPECT_EQ(a.read_ns, b.read_ns) << name;
  EXPECT_EQ(a.write_ns, b.write_ns) << name;
  EXPECT_EQ(a.fsync_ns, b.fsync_ns) << name;
  EXPECT_EQ(a.fallocate_ns, b.fallocate_ns) << name;
  EXPECT_EQ(a.punch_ns, b.punch_ns) << name;
  EXPECT_EQ(a.unlink_ns, b.unlink_ns) << name;
  EXPECT_EQ(a.unlink_extent_ns, b.unlink_extent_ns) << name;
  EXPECT_EQ(a.unlink_mib_ns, b.unlink_mib_ns) << name;
  EXPECT_EQ(a.extent_ns, b.extent_ns) << name;
  EXPECT_EQ(a.gap_fill_ns, b.gap_fill_ns) << name;
  EXPECT_EQ(a.bandwidth_bytes_per_second, b.bandwidth_bytes_per_second) << name;
  EXPECT_EQ(a.max_request_bytes, b.max_request_bytes) << name;
  EXPECT_EQ(a.queue_depth, b.queue_depth) << name;
  EXPECT_EQ(a.memory_bandwidth_bytes_per_second, b.memory_bandwidth_bytes_per_second) << name;
  EXPECT_EQ(a.syscall_ns, b.syscall_ns) << name;
  EXPECT_EQ(a.dirty_unit, b.dirty_unit) << name;
  EXPECT_EQ(a.dirty_limit_bytes, b.dirty_limit_bytes) << name;
  EXPECT_EQ(a.flush_on_close, b.flush_on_close) << name;
  EXPECT_EQ(a.direct_io, b.direct_io) << name;
  EXPECT_EQ(a.metadata_durability, b.metadata_durability) << name;
}

TEST(ProfileCostKeys, EveryBuiltinRoundTripsThroughToToml) {
  for (const auto& builtin : builtin_profiles()) {
    auto original = load_builtin_profile(builtin.name);
    ASSERT_TRUE(original.has_value()) << original.error();
    auto again = parse_profile(original->to_toml(), "round-trip.toml");
    ASSERT_TRUE(again.has_value()) << again.error() << "\n" << original->to_toml();
    expect_same_cost_keys(*original, *again, builtin.name);
  }
}

TEST(ProfileCostKeys, NonDefaultValuesRoundTripThroughToToml) {
  Profile original = *load_builtin_profile("ideal");
  original.logical_block_size = 4096;
  original.round_trip_ns = 1;
  original.metadata_ns = 2;
  original.read_ns = 3;
  original.write_ns = 4;
  original.fsync_ns = 5;
  original.fallocate_ns = 6;
  original.punch_ns = 7;
  original.unlink_ns = 8;
  original.unlink_extent_ns = 9;
  original.unlink_mib_ns = 17;
  original.extent_ns = 10;
  original.gap_fill_ns = 11;
  original.bandwidth_bytes_per_second = 12;
  original.max_request_bytes = 4096;
  original.queue_depth = 13;
  original.memory_bandwidth_bytes_per_second = 14;
  original.syscall_ns = 15;
  original.dirty_unit = 1;
  original.dirty_limit_bytes = 16;
  original.flush_on_close = true;
  original.direct_io = false;
  original.metadata_durability = "synchronous";
  auto again = parse_profile(original.to_toml(), "custom.toml");
  ASSERT_TRUE(again.has_value()) << again.error() << "\n" << original.to_toml();
  expect_same_cost_keys(original, *again, "custom");
}

TEST(ProfileCostKeys, BuiltinsUseTheirCalibratedValues) {
  const Profile nfs = *load_builtin_profile("nfs");
  EXPECT_EQ(nfs.logical_block_size, 1u);
  EXPECT_EQ(nfs.dirty_unit, 1u);
  EXPECT_TRUE(nfs.flush_on_close);
  EXPECT_EQ(nfs.metadata_durability, "synchronous");
  EXPECT_GT(nfs.round_trip_ns, 0u);
  for (std::string_view name : {"ext4", "xfs", "btrfs", "ext4-hdd"}) {
    const Profile p = *load_builtin_profile(name);
    EXPECT_EQ(p.logical_block_size, 512u) << name;
    EXPECT_EQ(p.dirty_unit, 4096u) << name;
    EXPECT_FALSE(p.flush_on_close) << name;
    EXPECT_EQ(p.metadata_durability, name == "btrfs" ? "log_tree" : "journal") << name;
    EXPECT_GT(p.fsync_ns, 0u) << name;
  }
  const Profile ideal = *load_builtin_profile("ideal");
  EXPECT_EQ(ideal.fsync_ns + ideal.write_ns + ideal.syscall_ns + ideal.round_trip_ns, 0u);
}

}  // namespace
}  // namespace mimicfs
