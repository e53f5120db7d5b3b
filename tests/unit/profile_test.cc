// SPDX-License-Identifier: Apache-2.0
#include "engine/profile/profile.h"
#include "engine/space/mkfs_geometry.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace mimicfs {
namespace {

constexpr uint8_t kAllModes = static_cast<uint8_t>(FallocateMode::kAllocate) |
                              static_cast<uint8_t>(FallocateMode::kKeepSize) |
                              static_cast<uint8_t>(FallocateMode::kPunchHole) |
                              static_cast<uint8_t>(FallocateMode::kZeroRange);

// A complete profile with no base; the line numbers below refer to it.
constexpr std::string_view kComplete = R"(name = "complete"
description = "every key"

[device]
allocation_unit = 4096
capacity_bytes = 1048576

[statfs]
block_size = 8192
fragment_size = 4096
name_max = 200

[fallocate]
modes = ["allocate", "punch_hole"]

[allocation]
placement = "goal"
)";

// kComplete with the first occurrence of `from` replaced by `to`.
std::string complete_with(std::string_view from, std::string_view to) {
  std::string text(kComplete);
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// The error of a profile that must not parse.
std::string error_of(std::string_view text, std::string_view source = "my.toml") {
  auto profile = parse_profile(text, source);
  EXPECT_FALSE(profile.has_value()) << "parsed, but should not have:\n" << text;
  return profile ? std::string() : profile.error();
}

void expect_one_line(const std::string& message) {
  EXPECT_FALSE(message.empty());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

void expect_equal(const Profile& a, const Profile& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.allocation_unit, b.allocation_unit);
  EXPECT_EQ(a.capacity_bytes, b.capacity_bytes);
  EXPECT_EQ(a.statfs_block_size, b.statfs_block_size);
  EXPECT_EQ(a.statfs_fragment_size, b.statfs_fragment_size);
  EXPECT_EQ(a.name_max, b.name_max);
  EXPECT_EQ(a.fallocate_modes, b.fallocate_modes);
  EXPECT_EQ(a.allocation_group_bytes, b.allocation_group_bytes);
  EXPECT_EQ(a.group_metadata_bytes, b.group_metadata_bytes);
  EXPECT_EQ(a.max_extent_bytes, b.max_extent_bytes);
  EXPECT_EQ(a.placement, b.placement);
  EXPECT_EQ(a.delayed_allocation, b.delayed_allocation);
  EXPECT_EQ(a.writeback_bytes, b.writeback_bytes);
  EXPECT_EQ(a.inode_window_max_bytes, b.inode_window_max_bytes);
  EXPECT_EQ(a.speculative_preallocation, b.speculative_preallocation);
  EXPECT_EQ(a.speculative_preallocation_min_bytes, b.speculative_preallocation_min_bytes);
  EXPECT_EQ(a.speculative_preallocation_max_bytes, b.speculative_preallocation_max_bytes);
  EXPECT_EQ(a.copy_on_write, b.copy_on_write);
  EXPECT_EQ(a.cow_extent_max_bytes, b.cow_extent_max_bytes);
}

Profile builtin(std::string_view name) {
  auto profile = load_builtin_profile(name);
  EXPECT_TRUE(profile.has_value()) << name << ": " << profile.error();
  return profile.value_or(Profile{});
}

// The error of overrides that must not apply.
std::string override_error(const Profile& profile, const std::vector<std::string>& assignments) {
  auto result = apply_overrides(profile, assignments);
  EXPECT_FALSE(result.has_value()) << "applied, but should not have";
  return result ? std::string() : result.error();
}

// --- built-in profiles

TEST(Profile, BuiltinProfilesAreSortedByName) {
  const auto& builtins = builtin_profiles();
  ASSERT_GE(builtins.size(), 2u);
  for (size_t i = 1; i < builtins.size(); ++i) {
    EXPECT_LT(builtins[i - 1].name, builtins[i].name);
  }
}

TEST(Profile, EveryBuiltinLoads) {
  for (const auto& builtin : builtin_profiles()) {
    auto profile = load_builtin_profile(builtin.name);
    ASSERT_TRUE(profile.has_value()) << builtin.name << ": " << profile.error();
    EXPECT_EQ(profile->name, builtin.name);
  }
}

TEST(Profile, DefaultProfileIsABuiltin) {
  EXPECT_TRUE(load_builtin_profile(kDefaultProfile).has_value());
}

TEST(Profile, NfsHas512ByteUnitsMebibyteStatfsAndNoFallocate) {
  auto nfs = load_builtin_profile("nfs");
  ASSERT_TRUE(nfs.has_value()) << nfs.error();
  EXPECT_EQ(nfs->name, "nfs");
  EXPECT_EQ(nfs->allocation_unit, 512u);
  EXPECT_EQ(nfs->statfs_block_size, 1u << 20);
  EXPECT_EQ(nfs->statfs_fragment_size, 1u << 20);
  EXPECT_EQ(nfs->capacity_bytes, uint64_t{1} << 40);
  EXPECT_EQ(nfs->fallocate_modes, 0u);
  EXPECT_FALSE(nfs->supports(FallocateMode::kAllocate));
  EXPECT_FALSE(nfs->supports(FallocateMode::kKeepSize));
  EXPECT_FALSE(nfs->supports(FallocateMode::kPunchHole));
  EXPECT_FALSE(nfs->supports(FallocateMode::kZeroRange));
  EXPECT_EQ(nfs->placement, "goal");
}

TEST(Profile, IdealHas4KiBUnitsAndEveryFallocateMode) {
  auto ideal = load_builtin_profile("ideal");
  ASSERT_TRUE(ideal.has_value()) << ideal.error();
  EXPECT_EQ(ideal->name, "ideal");
  EXPECT_EQ(ideal->allocation_unit, 4096u);
  EXPECT_EQ(ideal->statfs_block_size, 4096u);
  EXPECT_EQ(ideal->statfs_fragment_size, 4096u);
  EXPECT_EQ(ideal->fallocate_modes, kAllModes);
  EXPECT_TRUE(ideal->supports(FallocateMode::kAllocate));
  EXPECT_TRUE(ideal->supports(FallocateMode::kKeepSize));
  EXPECT_TRUE(ideal->supports(FallocateMode::kPunchHole));
  EXPECT_TRUE(ideal->supports(FallocateMode::kZeroRange));
}

TEST(Profile, UnknownBuiltinListsKnownProfiles) {
  auto profile = load_builtin_profile("nope");
  ASSERT_FALSE(profile.has_value());
  expect_one_line(profile.error());
  EXPECT_NE(profile.error().find("nope"), std::string::npos) << profile.error();
  EXPECT_NE(profile.error().find("ideal"), std::string::npos) << profile.error();
  EXPECT_NE(profile.error().find("nfs"), std::string::npos) << profile.error();
}

// --- parsing and to_toml

TEST(Profile, CompleteProfileParses) {
  auto profile = parse_profile(kComplete, "my.toml");
  ASSERT_TRUE(profile.has_value()) << profile.error();
  EXPECT_EQ(profile->name, "complete");
  EXPECT_EQ(profile->description, "every key");
  EXPECT_EQ(profile->allocation_unit, 4096u);
  EXPECT_EQ(profile->capacity_bytes, 1048576u);
  EXPECT_EQ(profile->statfs_block_size, 8192u);
  EXPECT_EQ(profile->statfs_fragment_size, 4096u);
  EXPECT_EQ(profile->name_max, 200u);
  EXPECT_TRUE(profile->supports(FallocateMode::kAllocate));
  EXPECT_FALSE(profile->supports(FallocateMode::kKeepSize));
  EXPECT_TRUE(profile->supports(FallocateMode::kPunchHole));
  EXPECT_FALSE(profile->supports(FallocateMode::kZeroRange));
}

TEST(Profile, DescriptionIsOptional) {
  auto profile = parse_profile(complete_with("description = \"every key\"\n", ""), "my.toml");
  ASSERT_TRUE(profile.has_value()) << profile.error();
  EXPECT_EQ(profile->description, "");
}

TEST(Profile, BuiltinsRoundTripThroughToToml) {
  for (const auto& builtin : builtin_profiles()) {
    auto original = load_builtin_profile(builtin.name);
    ASSERT_TRUE(original.has_value()) << original.error();
    auto again = parse_profile(original->to_toml(), "round-trip.toml");
    ASSERT_TRUE(again.has_value()) << again.error() << "\n" << original->to_toml();
    expect_equal(*original, *again);
  }
}

TEST(Profile, CustomProfileRoundTripsThroughToToml) {
  Profile original;
  original.name = "it's an \"odd\" name";
  original.description = "back\\slash, tab\t, new\nline and unicode \u00e9";
  original.allocation_unit = 65536;
  original.capacity_bytes = 65536 * 3;
  original.statfs_block_size = 12345;
  original.statfs_fragment_size = 512;
  original.name_max = 1;
  original.fallocate_modes = static_cast<uint8_t>(FallocateMode::kKeepSize) |
                             static_cast<uint8_t>(FallocateMode::kZeroRange);
  original.placement = "shared_cursor";
  original.allocation_group_bytes = 65536 * 2;
  original.group_metadata_bytes = 65536;
  original.max_extent_bytes = 65536 * 4;
  original.delayed_allocation = true;
  original.writeback_bytes = 65536 * 5;
  original.inode_window_max_bytes = 65536 * 6;
  original.speculative_preallocation = false;
  original.speculative_preallocation_min_bytes = 7;
  original.speculative_preallocation_max_bytes = 8;
  original.copy_on_write = true;
  original.cow_extent_max_bytes = 0;
  auto again = parse_profile(original.to_toml(), "custom.toml");
  ASSERT_TRUE(again.has_value()) << again.error() << "\n" << original.to_toml();
  expect_equal(original, *again);
}

// --- base

TEST(Profile, BaseInheritsEveryKeyAndOverridesOne) {
  auto nfs = load_builtin_profile("nfs");
  ASSERT_TRUE(nfs.has_value());
  auto profile = parse_profile("base = \"nfs\"\n[device]\nallocation_unit = 4096\n", "big.toml");
  ASSERT_TRUE(profile.has_value()) << profile.error();
  EXPECT_EQ(profile->allocation_unit, 4096u);
  EXPECT_EQ(profile->capacity_bytes, nfs->capacity_bytes);
  EXPECT_EQ(profile->statfs_block_size, nfs->statfs_block_size);
  EXPECT_EQ(profile->statfs_fragment_size, nfs->statfs_fragment_size);
  EXPECT_EQ(profile->fallocate_modes, nfs->fallocate_modes);
  EXPECT_EQ(profile->description, nfs->description);
  // Without a name of its own, a derived profile is named after its file.
  EXPECT_EQ(profile->name, "big");
}

TEST(Profile, BaseWithOwnNameKeepsIt) {
  auto profile =
      parse_profile("base = \"ideal\"\nname = \"mine\"\n[fallocate]\nmodes = []\n", "x.toml");
  ASSERT_TRUE(profile.has_value()) << profile.error();
  EXPECT_EQ(profile->name, "mine");
  EXPECT_EQ(profile->fallocate_modes, 0u);
  EXPECT_EQ(profile->allocation_unit, 4096u);
}

TEST(Profile, BaseMustBeAString) {
  const std::string message = error_of("\nbase = 5\n");
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:2: base:"), std::string::npos) << message;
}

TEST(Profile, UnknownBaseListsKnownProfiles) {
  const std::string message = error_of("base = \"zfs\"\n", "my.toml");
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:1:"), std::string::npos) << message;
  EXPECT_NE(message.find("base"), std::string::npos) << message;
  EXPECT_NE(message.find("zfs"), std::string::npos) << message;
  EXPECT_NE(message.find("ideal"), std::string::npos) << message;
  EXPECT_NE(message.find("nfs"), std::string::npos) << message;
}

// --- errors: one line naming source, line and key

TEST(Profile, UnknownKeyIsNamedWithItsLine) {
  const std::string message = error_of("[device]\nallocaton_unit = 4096\n", "my.toml");
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("allocaton_unit"), std::string::npos) << message;
}

TEST(Profile, UnknownKeyNextToBaseIsNamedWithItsLine) {
  const std::string message = error_of("base = \"nfs\"\n\n[device]\nallocaton_unit = 4096\n");
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:4:"), std::string::npos) << message;
  EXPECT_NE(message.find("device.allocaton_unit"), std::string::npos) << message;
}

TEST(Profile, UnknownTopLevelKeyIsNamed) {
  const std::string message = error_of(complete_with("name = ", "nmae = \"x\"\nname = "));
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:1: nmae"), std::string::npos) << message;
}

TEST(Profile, AllocationUnitMustBeAPowerOfTwo) {
  const std::string message =
      error_of(complete_with("allocation_unit = 4096", "allocation_unit = 3000"));
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:5: device.allocation_unit:"), std::string::npos) << message;
  EXPECT_NE(message.find("power of two"), std::string::npos) << message;
}

TEST(Profile, AllocationUnitOutOfRangeIsRejected) {
  for (std::string_view unit : {"256", "0", "-4096", "2097152"}) {
    const std::string message = error_of(complete_with("4096\ncap", std::string(unit) + "\ncap"));
    expect_one_line(message);
    EXPECT_NE(message.find("my.toml:5: device.allocation_unit:"), std::string::npos) << message;
  }
}

TEST(Profile, WrongTypeIsNamedWithItsLine) {
  const std::string wrong = error_of(complete_with("name_max = 200", "name_max = \"long\""));
  expect_one_line(wrong);
  EXPECT_NE(wrong.find("my.toml:11: statfs.name_max:"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("integer"), std::string::npos) << wrong;
}

TEST(Profile, StringWhereTableOrArrayExpectedIsRejected) {
  const std::string modes =
      error_of(complete_with("modes = [\"allocate\", \"punch_hole\"]", "modes = \"allocate\""));
  expect_one_line(modes);
  EXPECT_NE(modes.find("my.toml:14: fallocate.modes:"), std::string::npos) << modes;

  const std::string policy = error_of(complete_with("placement = \"goal\"", "placement = 1"));
  expect_one_line(policy);
  EXPECT_NE(policy.find("my.toml:17: allocation.placement:"), std::string::npos) << policy;
}

TEST(Profile, MalformedTomlNamesSourceAndLine) {
  const std::string message = error_of("name = \"x\"\n[device\nallocation_unit = 4096\n");
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:2:"), std::string::npos) << message;
}

TEST(Profile, UnknownFallocateModeIsNamed) {
  const std::string message =
      error_of(complete_with("\"punch_hole\"]", "\"punch_hole\",\n  \"deallocate\"]"));
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:15: fallocate.modes:"), std::string::npos) << message;
  EXPECT_NE(message.find("unknown mode"), std::string::npos) << message;
}

TEST(Profile, UnknownAllocationPolicyIsNamed) {
  const std::string message =
      error_of(complete_with("placement = \"goal\"", "placement = \"best\""));
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:17: allocation.placement:"), std::string::npos) << message;
  EXPECT_NE(message.find("best"), std::string::npos) << message;
}

TEST(Profile, CapacityNotAMultipleOfTheUnitIsRejected) {
  const std::string message =
      error_of(complete_with("capacity_bytes = 1048576", "capacity_bytes = 1050000"));
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:6: device.capacity_bytes:"), std::string::npos) << message;
}

TEST(Profile, CapacitySmallerThanTheUnitIsRejected) {
  const std::string message =
      error_of(complete_with("capacity_bytes = 1048576", "capacity_bytes = 2048"));
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:6: device.capacity_bytes:"), std::string::npos) << message;
}

TEST(Profile, MissingKeyWithoutBaseIsNamed) {
  const std::string message = error_of(complete_with("name_max = 200\n", ""));
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml"), std::string::npos) << message;
  EXPECT_NE(message.find("statfs.name_max"), std::string::npos) << message;
  EXPECT_NE(message.find("missing"), std::string::npos) << message;
}

TEST(Profile, LoneSectionWithoutBaseIsMissingKeys) {
  const std::string message = error_of("[device]\nallocation_unit = 4096\n");
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml"), std::string::npos) << message;
  EXPECT_NE(message.find("missing"), std::string::npos) << message;
}

// A profile built on a base reports its own mistakes at its own lines, like any other.
TEST(Profile, ErrorInKeyOverridingBaseNamesItsLine) {
  const std::string unit =
      error_of("base = \"nfs\"\n[device]\nallocation_unit = 3000\n", "derived.toml");
  expect_one_line(unit);
  EXPECT_NE(unit.find("derived.toml:3: device.allocation_unit:"), std::string::npos) << unit;

  const std::string type =
      error_of("base = \"ideal\"\n\n[statfs]\nblock_size = \"big\"\n", "derived.toml");
  expect_one_line(type);
  EXPECT_NE(type.find("derived.toml:4: statfs.block_size:"), std::string::npos) << type;

  const std::string mode =
      error_of("base = \"ideal\"\n[fallocate]\nmodes = [\"allocate\", \"nope\"]\n", "derived.toml");
  expect_one_line(mode);
  EXPECT_NE(mode.find("derived.toml:3: fallocate.modes:"), std::string::npos) << mode;

  const std::string capacity =
      error_of("base = \"ideal\"\n[device]\ncapacity_bytes = 5000\n", "derived.toml");
  expect_one_line(capacity);
  EXPECT_NE(capacity.find("derived.toml:3: device.capacity_bytes:"), std::string::npos) << capacity;
}

TEST(Profile, UnreadableFileNamesThePath) {
  auto profile = load_profile_file("/nonexistent/mimicfs/profile.toml");
  ASSERT_FALSE(profile.has_value());
  expect_one_line(profile.error());
  EXPECT_NE(profile.error().find("/nonexistent/mimicfs/profile.toml"), std::string::npos)
      << profile.error();
}

// --- allocation keys

// A profile that sets none of the optional keys gets the defaults documented in
// profile.h: one group, no metadata, no limits, nothing delayed or preallocated.
TEST(Profile, OptionalKeysHaveTheirDefaults) {
  auto profile = parse_profile(kComplete, "my.toml");
  ASSERT_TRUE(profile.has_value()) << profile.error();
  EXPECT_EQ(profile->allocation_group_bytes, 0u);
  EXPECT_EQ(profile->group_metadata_bytes, 0u);
  EXPECT_EQ(profile->max_extent_bytes, 0u);
  EXPECT_FALSE(profile->delayed_allocation);
  EXPECT_EQ(profile->writeback_bytes, 0u);
  EXPECT_EQ(profile->inode_window_max_bytes, 0u);
  EXPECT_FALSE(profile->speculative_preallocation);
  EXPECT_EQ(profile->speculative_preallocation_min_bytes, 65536u);
  EXPECT_EQ(profile->speculative_preallocation_max_bytes, uint64_t{8} << 30);
  EXPECT_FALSE(profile->copy_on_write);
  EXPECT_EQ(profile->cow_extent_max_bytes, uint64_t{128} << 20);
}

// Every allocation key is read from [allocation].
TEST(Profile, AllocationKeysParse) {
  auto profile = parse_profile(std::string(kComplete) +
                                   "delayed_allocation = true\n"
                                   "writeback_bytes = 65536\n"
                                   "speculative_preallocation = true\n"
                                   "speculative_preallocation_min_bytes = 8192\n"
                                   "speculative_preallocation_max_bytes = 1048576\n"
                                   "copy_on_write = true\n"
                                   "cow_extent_max_bytes = 131072\n",
                               "my.toml");
  ASSERT_TRUE(profile.has_value()) << profile.error();
  EXPECT_TRUE(profile->delayed_allocation);
  EXPECT_EQ(profile->writeback_bytes, 65536u);
  EXPECT_TRUE(profile->speculative_preallocation);
  EXPECT_EQ(profile->speculative_preallocation_min_bytes, 8192u);
  EXPECT_EQ(profile->speculative_preallocation_max_bytes, 1048576u);
  EXPECT_TRUE(profile->copy_on_write);
  EXPECT_EQ(profile->cow_extent_max_bytes, 131072u);

  auto windows =
      parse_profile(std::string(kComplete) + "inode_window_max_bytes = 8388608\n", "my.toml");
  ASSERT_TRUE(windows.has_value()) << windows.error();
  EXPECT_EQ(windows->inode_window_max_bytes, 8u << 20);
}

// The device geometry keys are read from [device].
TEST(Profile, DeviceGeometryKeysParse) {
  auto profile = parse_profile(complete_with("capacity_bytes = 1048576\n",
                                             "capacity_bytes = 1048576\n"
                                             "allocation_group_bytes = 262144\n"
                                             "group_metadata_bytes = 8192\n"
                                             "max_extent_bytes = 32768\n"),
                               "my.toml");
  ASSERT_TRUE(profile.has_value()) << profile.error();
  EXPECT_EQ(profile->allocation_group_bytes, 262144u);
  EXPECT_EQ(profile->group_metadata_bytes, 8192u);
  EXPECT_EQ(profile->max_extent_bytes, 32768u);
}

// The six built-ins the documentation lists are all there.
TEST(Profile, EveryDocumentedBuiltinLoads) {
  for (std::string_view name : {"btrfs", "ext4", "ideal", "nfs", "nfs42", "xfs"}) {
    auto profile = load_builtin_profile(name);
    ASSERT_TRUE(profile.has_value()) << name << ": " << profile.error();
    EXPECT_EQ(profile->name, name);
  }
}

// ext4: 128 MiB block groups with metadata, 32768-block extents, delayed
// allocation, goal placement and 8 MiB inode windows.
TEST(Profile, Ext4HasGroupsDelayedAllocationAndInodeWindows) {
  const Profile ext4 = builtin("ext4");
  EXPECT_EQ(ext4.allocation_unit, 4096u);
  EXPECT_EQ(ext4.geometry, "mkfs.ext4");  // flex groups of 16, as mkfs_geometry.h derives
  EXPECT_EQ(ext4.allocation_group_bytes, 0u);
  EXPECT_EQ(ext4.group_metadata_bytes, 0u);
  EXPECT_EQ(ext4.max_extent_bytes, 32768u * 4096);
  EXPECT_EQ(ext4.placement, "goal");
  EXPECT_TRUE(ext4.delayed_allocation);
  EXPECT_EQ(ext4.writeback_bytes, 64u << 20);
  EXPECT_EQ(ext4.inode_window_max_bytes, 8u << 20);
  EXPECT_FALSE(ext4.speculative_preallocation);
  EXPECT_FALSE(ext4.copy_on_write);
  EXPECT_EQ(ext4.fallocate_modes, kAllModes);
}

// xfs: a shared cursor per allocation group and speculative EOF preallocation.
TEST(Profile, XfsHasSharedCursorAndSpeculativePreallocation) {
  const Profile xfs = builtin("xfs");
  EXPECT_EQ(xfs.geometry, "mkfs.xfs");
  EXPECT_EQ(xfs.allocation_group_bytes, 0u);
  EXPECT_EQ(xfs.placement, "shared_cursor");
  EXPECT_TRUE(xfs.delayed_allocation);
  EXPECT_TRUE(xfs.speculative_preallocation);
  EXPECT_EQ(xfs.speculative_preallocation_min_bytes, 65536u);
  EXPECT_EQ(xfs.speculative_preallocation_max_bytes, uint64_t{8} << 30);
  EXPECT_EQ(xfs.inode_window_max_bytes, 0u);
  EXPECT_FALSE(xfs.copy_on_write);
}

// btrfs: copy-on-write with 128 MiB data extents, a shared cursor, no metadata
// inside data groups and no record-length limit.
TEST(Profile, BtrfsIsCopyOnWrite) {
  const Profile btrfs = builtin("btrfs");
  EXPECT_TRUE(btrfs.copy_on_write);
  EXPECT_EQ(btrfs.cow_extent_max_bytes, 128u << 20);
  EXPECT_EQ(btrfs.placement, "shared_cursor");
  EXPECT_TRUE(btrfs.delayed_allocation);
  EXPECT_EQ(btrfs.group_metadata_bytes, 0u);
  EXPECT_EQ(btrfs.max_extent_bytes, 0u);
  EXPECT_FALSE(btrfs.speculative_preallocation);
  EXPECT_EQ(btrfs.inode_window_max_bytes, 0u);
}

// nfs42 is nfs plus ALLOCATE and DEALLOCATE: allocate and punch_hole only.
TEST(Profile, Nfs42IsNfsWithAllocateAndPunchHole) {
  const Profile nfs = builtin("nfs");
  const Profile nfs42 = builtin("nfs42");
  EXPECT_EQ(nfs42.fallocate_modes, static_cast<uint8_t>(FallocateMode::kAllocate) |
                                       static_cast<uint8_t>(FallocateMode::kPunchHole));
  EXPECT_EQ(nfs42.allocation_unit, nfs.allocation_unit);
  EXPECT_EQ(nfs42.capacity_bytes, nfs.capacity_bytes);
  EXPECT_EQ(nfs42.statfs_block_size, nfs.statfs_block_size);
  EXPECT_FALSE(nfs42.delayed_allocation);
}

// A profile on base = "xfs" keeps every xfs key but the one it overrides.
TEST(Profile, BaseXfsWithAnOverrideKeepsTheRest) {
  const Profile xfs = builtin("xfs");
  auto profile = parse_profile("base = \"xfs\"\n[allocation]\nspeculative_preallocation = false\n",
                               "allocsize.toml");
  ASSERT_TRUE(profile.has_value()) << profile.error();
  EXPECT_EQ(profile->name, "allocsize");
  EXPECT_FALSE(profile->speculative_preallocation);
  Profile expected = xfs;
  expected.name = "allocsize";
  expected.speculative_preallocation = false;
  expect_equal(*profile, expected);
}

// --- cross-key validation: one line naming file, line and key

// A group made only of metadata would have no data blocks.
TEST(Profile, GroupMetadataMustBeSmallerThanAGroup) {
  const std::string message = error_of(complete_with(
      "capacity_bytes = 1048576\n",
      "capacity_bytes = 1048576\nallocation_group_bytes = 65536\ngroup_metadata_bytes = 65536\n"));
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:8: device.group_metadata_bytes:"), std::string::npos) << message;
}

// Without groups the device is one group: its metadata must leave data blocks.
TEST(Profile, GroupMetadataMustBeSmallerThanTheDeviceWithoutGroups) {
  const std::string message = error_of(complete_with(
      "capacity_bytes = 1048576\n", "capacity_bytes = 1048576\ngroup_metadata_bytes = 1048576\n"));
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:7: device.group_metadata_bytes:"), std::string::npos) << message;
}

// A group larger than the device is a mistake (e.g. a small capacity on ext4).
TEST(Profile, AllocationGroupMustNotExceedTheCapacity) {
  const std::string message =
      error_of(complete_with("capacity_bytes = 1048576\n",
                             "capacity_bytes = 1048576\nallocation_group_bytes = 2097152\n"));
  expect_one_line(message);
  // Both keys are on this file's lines; naming either, at its line, is right.
  EXPECT_TRUE(message.find("my.toml:6: device.capacity_bytes:") != std::string::npos ||
              message.find("my.toml:7: device.allocation_group_bytes:") != std::string::npos)
      << message;
  EXPECT_NE(message.find("device.allocation_group_bytes"), std::string::npos) << message;
}

// The allocator works in units: every device size must be a whole number of them.
TEST(Profile, DeviceSizesMustBeMultiplesOfTheUnit) {
  for (std::string_view key :
       {"allocation_group_bytes", "group_metadata_bytes", "max_extent_bytes"}) {
    const std::string message = error_of(complete_with(
        "capacity_bytes = 1048576\n", fmt::format("capacity_bytes = 1048576\n{} = 5000\n", key)));
    expect_one_line(message);
    EXPECT_NE(message.find(fmt::format("my.toml:7: device.{}:", key)), std::string::npos)
        << message;
    EXPECT_NE(message.find("multiple"), std::string::npos) << message;
  }
}

// ext4's windows and xfs's speculative preallocation are two policies for one
// job: a profile must choose one.
TEST(Profile, SpeculativePreallocationWithInodeWindowsIsRefused) {
  const std::string message = error_of(std::string(kComplete) +
                                       "inode_window_max_bytes = 1048576\n"
                                       "speculative_preallocation = true\n");
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:19: allocation.speculative_preallocation:"), std::string::npos)
      << message;
  EXPECT_NE(message.find("inode_window_max_bytes"), std::string::npos) << message;
}

// An empty range of speculative sizes is refused rather than clamped silently.
TEST(Profile, SpeculativeMinimumMustNotExceedMaximum) {
  const std::string message = error_of(std::string(kComplete) +
                                       "speculative_preallocation_min_bytes = 131072\n"
                                       "speculative_preallocation_max_bytes = 65536\n");
  expect_one_line(message);
  EXPECT_NE(message.find("my.toml:18: allocation.speculative_preallocation_min_bytes:"),
            std::string::npos)
      << message;
}

// The new keys are type- and range-checked like the old ones, at their line.
TEST(Profile, AllocationKeysOfTheWrongTypeAreNamed) {
  const std::string flag = error_of(std::string(kComplete) + "delayed_allocation = 1\n");
  expect_one_line(flag);
  EXPECT_NE(flag.find("my.toml:18: allocation.delayed_allocation:"), std::string::npos) << flag;
  const std::string size = error_of(std::string(kComplete) + "writeback_bytes = -1\n");
  expect_one_line(size);
  EXPECT_NE(size.find("my.toml:18: allocation.writeback_bytes:"), std::string::npos) << size;
}

// A cross-key check that fails because of a key this file sets against a value
// from its base names the line the user wrote, not the base's key (profile.h:
// "the file, the line and the key at fault"). Small ext4 devices hit this first.
TEST(Profile, CrossKeyErrorAgainstABaseNamesTheLineTheUserWrote) {
  const std::string capacity =
      error_of("base = \"ext4\"\n[device]\ncapacity_bytes = 65536\n", "small.toml");
  expect_one_line(capacity);
  EXPECT_NE(capacity.find("small.toml:3: device.capacity_bytes:"), std::string::npos) << capacity;

  const std::string windows =
      error_of("base = \"xfs\"\n[allocation]\ninode_window_max_bytes = 1048576\n", "both.toml");
  expect_one_line(windows);
  EXPECT_NE(windows.find("both.toml:3: allocation.inode_window_max_bytes:"), std::string::npos)
      << windows;
}

// Every allocation group costs the allocator memory: a geometry with more than
// 2^20 groups is refused before anything is allocated.
TEST(Profile, TooManyAllocationGroupsAreRefused) {
  auto r = apply_overrides(*load_builtin_profile("btrfs"),
                           {"device.geometry=groups", "device.allocation_group_bytes=4096"});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().find("--set device.allocation_group_bytes:"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("at most 1048576"), std::string::npos) << r.error();
}

// A mkfs geometry lays out every group, and only what it models: at the
// largest capacity a profile can give, ext4 is refused at once (meta_bg from
// 192 TiB; no loop over 2^33 block groups), xfs takes at most 2^20 AGs of its
// largest size (2^28 - 1 blocks), and both want 4 KiB blocks.
TEST(Profile, MkfsGeometriesBoundWhatTheyLayOut) {
  const std::string ext4 =
      override_error(builtin("ext4"), {"device.capacity_bytes=1152921504606846976"});
  expect_one_line(ext4);
  EXPECT_NE(ext4.find("192 TiB"), std::string::npos) << ext4;
  const uint64_t limit = uint64_t{192} << 40;
  auto largest = mkfs_ext4(limit / 4096, 4096);
  ASSERT_TRUE(largest.has_value());
  EXPECT_EQ(largest->group_count, uint64_t{24576} * 64);
  // Groups 0, 1, then 3^1..3^12, 5^1..5^8, 7^1..7^7 under 1572864.
  EXPECT_EQ(largest->backup_groups.size(), 2u + 12 + 8 + 7);
  EXPECT_FALSE(mkfs_ext4(limit / 4096 + 1, 4096).has_value());
  EXPECT_FALSE(mkfs_xfs((uint64_t{1} << 60) / 4096, 4096).has_value());
  auto xfs = mkfs_xfs(((uint64_t{1} << 60) - (uint64_t{1} << 40)) / 4096, 4096);
  ASSERT_TRUE(xfs.has_value());
  EXPECT_EQ(xfs->ag_count, uint64_t{1} << 20);

  const std::string extent = override_error(builtin("btrfs"), {"allocation.cow_extent_max_bytes=1000"});
  expect_one_line(extent);
  EXPECT_NE(extent.find("multiple of device.allocation_unit"), std::string::npos) << extent;

  const std::string unit =
      override_error(builtin("xfs"), {"device.allocation_unit=16384"});
  expect_one_line(unit);
  EXPECT_NE(unit.find("device.allocation_unit must be 4096"), std::string::npos) << unit;
}

// --- --set overrides

// No overrides: the profile as it was.
TEST(Profile, NoOverridesChangeNothing) {
  const Profile xfs = builtin("xfs");
  auto same = apply_overrides(xfs, {});
  ASSERT_TRUE(same.has_value()) << same.error();
  expect_equal(*same, xfs);
}

// VALUE is TOML: integers, booleans and quoted strings; a bare word is a string.
TEST(Profile, OverrideValuesAreTomlAndBareWordsAreStrings) {
  auto profile = apply_overrides(
      builtin("xfs"),
      {"allocation.placement=goal", "allocation.writeback_bytes=1_048_576",
       "allocation.delayed_allocation=false", "description=\"quoted \\\"text\\\"\""});
  ASSERT_TRUE(profile.has_value()) << profile.error();
  EXPECT_EQ(profile->placement, "goal");
  EXPECT_EQ(profile->writeback_bytes, 1u << 20);
  EXPECT_FALSE(profile->delayed_allocation);
  EXPECT_EQ(profile->description, "quoted \"text\"");
}

// Only the first '=' separates key and value; later ones are part of the value.
TEST(Profile, OverrideValueMayContainAnEqualsSign) {
  auto profile = apply_overrides(builtin("ideal"), {"description=a=b"});
  ASSERT_TRUE(profile.has_value()) << profile.error();
  EXPECT_EQ(profile->description, "a=b");
}

// Overrides apply in order: the last one of a key wins.
TEST(Profile, LaterOverrideOfAKeyWins) {
  auto profile = apply_overrides(
      builtin("ext4"), {"allocation.writeback_bytes=4096", "allocation.writeback_bytes=8192"});
  ASSERT_TRUE(profile.has_value()) << profile.error();
  EXPECT_EQ(profile->writeback_bytes, 8192u);
}

// A mistyped --set key is refused with the nearest known keys, in one short line.
TEST(Profile, OverrideOfUnknownKeyIsNamed) {
  const std::string message = override_error(builtin("ext4"), {"allocation.nope=1"});
  expect_one_line(message);
  EXPECT_EQ(message.rfind("--set allocation.nope: unknown key", 0), 0u) << message;
  EXPECT_NE(message.find("did you mean allocation."), std::string::npos) << message;
  EXPECT_LT(message.size(), 200u) << message;

  const std::string typo = override_error(builtin("ext4"), {"cost.fsync=1"});
  EXPECT_NE(typo.find("did you mean cost.fsync_ns?"), std::string::npos) << typo;
  // The key this one was renamed from: its section's keys.
  const std::string renamed = override_error(builtin("ext4"), {"durability.namespace=journal"});
  EXPECT_NE(renamed.find("did you mean durability.metadata or durability.commit_interval_ns?"),
            std::string::npos)
      << renamed;
  const std::string nothing = override_error(builtin("ext4"), {"zzz=1"});
  EXPECT_NE(nothing.find("`mimicfs profiles keys` lists every key"), std::string::npos) << nothing;
  EXPECT_EQ(nothing.find("did you mean"), std::string::npos) << nothing;
}

// --set needs KEY=VALUE: a bare key, or an empty one, is refused.
TEST(Profile, OverrideWithoutEqualsIsRefused) {
  const std::string message = override_error(builtin("ext4"), {"allocation.placement"});
  expect_one_line(message);
  EXPECT_EQ(message.rfind("--set allocation.placement: ", 0), 0u) << message;
  EXPECT_NE(message.find("KEY=VALUE"), std::string::npos) << message;
  const std::string empty_key = override_error(builtin("ext4"), {"=goal"});
  expect_one_line(empty_key);
  EXPECT_EQ(empty_key.rfind("--set ", 0), 0u) << empty_key;
}

// A value of the wrong type or out of range reads "--set KEY: reason".
TEST(Profile, OverrideWithBadValueNamesTheKey) {
  const std::string type = override_error(builtin("ext4"), {"allocation.writeback_bytes=lots"});
  expect_one_line(type);
  EXPECT_EQ(type.rfind("--set allocation.writeback_bytes: ", 0), 0u) << type;
  EXPECT_NE(type.find("integer"), std::string::npos) << type;

  const std::string range = override_error(builtin("ext4"), {"statfs.name_max=300"});
  expect_one_line(range);
  EXPECT_EQ(range.rfind("--set statfs.name_max: ", 0), 0u) << range;

  const std::string placement = override_error(builtin("ext4"), {"allocation.placement=best"});
  expect_one_line(placement);
  EXPECT_EQ(placement.rfind("--set allocation.placement: ", 0), 0u) << placement;
  EXPECT_NE(placement.find("best"), std::string::npos) << placement;

  const std::string flag = override_error(builtin("ext4"), {"allocation.delayed_allocation=yes"});
  expect_one_line(flag);
  EXPECT_EQ(flag.rfind("--set allocation.delayed_allocation: ", 0), 0u) << flag;
}

// Cross-key checks run once, after every override: turning xfs's speculative
// preallocation off and windows on together is fine, windows alone are refused.
TEST(Profile, OverridesAreValidatedTogetherAfterwards) {
  const Profile xfs = builtin("xfs");
  auto switched = apply_overrides(xfs, {"allocation.speculative_preallocation=false",
                                        "allocation.inode_window_max_bytes=1048576"});
  ASSERT_TRUE(switched.has_value()) << switched.error();
  EXPECT_FALSE(switched->speculative_preallocation);
  EXPECT_EQ(switched->inode_window_max_bytes, 1u << 20);

  const std::string both = override_error(xfs, {"allocation.inode_window_max_bytes=1048576"});
  expect_one_line(both);
  EXPECT_EQ(both.rfind("--set ", 0), 0u) << both;
  EXPECT_NE(both.find("allocation.speculative_preallocation"), std::string::npos) << both;
  EXPECT_NE(both.find("allocation.inode_window_max_bytes"), std::string::npos) << both;
}

// A capacity that breaks the geometry is refused after the overrides, and the
// same overrides with a matching geometry are accepted.
TEST(Profile, OverriddenCapacityIsValidatedAgainstTheGeometry) {
  const Profile ext4 = builtin("ext4");
  const std::string small = override_error(ext4, {"device.capacity_bytes=65536"});
  expect_one_line(small);
  EXPECT_EQ(small.rfind("--set ", 0), 0u) << small;
  EXPECT_NE(small.find("device.capacity_bytes"), std::string::npos) << small;
  EXPECT_NE(small.find("mkfs.ext4"), std::string::npos) << small;
  const std::string keys = override_error(ext4, {"device.allocation_group_bytes=65536"});
  expect_one_line(keys);
  EXPECT_NE(keys.find("device.geometry = \"groups\""), std::string::npos) << keys;

  const std::string odd = override_error(ext4, {"device.capacity_bytes=5000"});
  expect_one_line(odd);
  EXPECT_EQ(odd.rfind("--set ", 0), 0u) << odd;
  EXPECT_NE(odd.find("device.capacity_bytes"), std::string::npos) << odd;

  auto fits =
      apply_overrides(ext4, {"device.capacity_bytes=65536", "device.geometry=groups"});
  ASSERT_TRUE(fits.has_value()) << fits.error();
  EXPECT_EQ(fits->capacity_bytes, 65536u);
}

// An overridden profile is still a profile: it round-trips through to_toml().
TEST(Profile, OverriddenProfileRoundTripsThroughToToml) {
  auto profile = apply_overrides(
      builtin("btrfs"), {"allocation.cow_extent_max_bytes=1048576", "allocation.placement=goal"});
  ASSERT_TRUE(profile.has_value()) << profile.error();
  auto again = parse_profile(profile->to_toml(), "again.toml");
  ASSERT_TRUE(again.has_value()) << again.error();
  expect_equal(*profile, *again);
}
}  // namespace
}  // namespace mimicfs
