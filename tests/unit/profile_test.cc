#include "backends/profile.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

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
  EXPECT_EQ(a.placement, b.placement);
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
  original.placement = "goal";
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
  const std::string modes = error_of(complete_with("modes = [\"allocate\", \"punch_hole\"]",
                                                   "modes = \"allocate\""));
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
  const std::string message = error_of(complete_with("placement = \"goal\"", "placement = \"best\""));
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

  const std::string type = error_of("base = \"ideal\"\n\n[statfs]\nblock_size = \"big\"\n",
                                    "derived.toml");
  expect_one_line(type);
  EXPECT_NE(type.find("derived.toml:4: statfs.block_size:"), std::string::npos) << type;

  const std::string mode =
      error_of("base = \"ideal\"\n[fallocate]\nmodes = [\"allocate\", \"nope\"]\n", "derived.toml");
  expect_one_line(mode);
  EXPECT_NE(mode.find("derived.toml:3: fallocate.modes:"), std::string::npos) << mode;

  const std::string capacity =
      error_of("base = \"ideal\"\n[device]\ncapacity_bytes = 5000\n", "derived.toml");
  expect_one_line(capacity);
  EXPECT_NE(capacity.find("derived.toml:3: device.capacity_bytes:"), std::string::npos)
      << capacity;
}

TEST(Profile, UnreadableFileNamesThePath) {
  auto profile = load_profile_file("/nonexistent/mimicfs/profile.toml");
  ASSERT_FALSE(profile.has_value());
  expect_one_line(profile.error());
  EXPECT_NE(profile.error().find("/nonexistent/mimicfs/profile.toml"), std::string::npos)
      << profile.error();
}

}  // namespace
}  // namespace mimicfs
