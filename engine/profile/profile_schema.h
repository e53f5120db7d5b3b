// SPDX-License-Identifier: Apache-2.0
// The profile schema: every key of a profile declared once, with its type, unit,
// range, default (Profile{}'s value) and help. Parsing and validation
// (profile.cc), `mimicfs profiles show` (Profile::to_toml), the unknown-key
// message, `mimicfs profiles keys` and the key table of docs/profiles.md (checked
// by a unit test) all come from this table.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/profile/profile.h"

namespace mimicfs {

// fallocate.modes: a list of mode names, stored as FallocateMode bits.
struct FallocateModesField {};

using ProfileField = std::variant<std::string Profile::*, bool Profile::*, uint64_t Profile::*,
                                  uint32_t Profile::*, FallocateModesField>;

struct ProfileKey {
  std::string_view path;  // dotted: "device.allocation_unit"
  ProfileField field;
  std::string_view unit;  // "bytes", "ns", "bytes/s", or empty
  std::string_view help;  // one line for docs and `mimicfs profiles keys`
  bool required = false;  // a file without `base` must set it
  uint64_t min = 0;       // integers: the accepted range
  uint64_t max = 0;
  bool power_of_two = false;
  std::span<const std::string_view> choices = {};  // strings: the accepted values
  std::string_view choice_noun = "value";          // "unknown placement \"x\" (known: ...)"
};

// In schema order: the order of `profiles show` and of the docs.
const std::vector<ProfileKey>& profile_keys();
const ProfileKey* find_profile_key(std::string_view path);
// What an unknown key's error suggests: "did you mean K1 or K2?" with the known
// keys nearest to `path` (by edit distance, else those of its section), and
// where the whole list is.
std::string profile_key_suggestion(std::string_view path);

// The names of the fallocate modes, in bit order ("allocate", "keep_size", ...).
struct FallocateModeName {
  FallocateMode mode;
  std::string_view name;
};
std::span<const FallocateModeName> fallocate_mode_names();

// The value of `key` in `profile`, as TOML ("4096", "true", "\"goal\"", "[\"allocate\"]").
std::string value_as_toml(const ProfileKey& key, const Profile& profile);
// The unit column: unit, constraints and, for an optional key, its default.
std::string describe_constraints(const ProfileKey& key);
// The markdown table of every key (docs/profiles.md has it verbatim).
std::string profile_keys_markdown();

}  // namespace mimicfs
