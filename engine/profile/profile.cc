// SPDX-License-Identifier: Apache-2.0
#include "engine/profile/profile.h"

#include "engine/profile/profile_schema.h"
#include "engine/space/mkfs_geometry.h"

#define TOML_HEADER_ONLY 1
#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

namespace mimicfs {
namespace {

// The source name given to `--set` overrides, so their errors read "--set KEY: ...".
constexpr std::string_view kOverrideSource = "--set";

using Error = std::unexpected<std::string>;

// "file:line: key: message", the one shape every profile error has; an override
// from the command line reads "--set key: message".
Error key_error(const toml::node& node, std::string_view key, std::string_view message) {
  const auto& src = node.source();
  std::string where = src.path ? std::string(*src.path) : std::string("<profile>");
  if (where == kOverrideSource) return Error(fmt::format("--set {}: {}", key, message));
  return Error(fmt::format("{}:{}: {}: {}", where, src.begin.line, key, message));
}

// Sets `key` in `profile` from `node`, checking its type, range and choices as
// the schema declares them.
std::expected<void, std::string> apply_key(const ProfileKey& key, const toml::node& node,
                                           Profile& profile) {
  const std::string_view path = key.path;
  auto integer = [&](auto field) -> std::expected<void, std::string> {
    if (!node.is_integer()) return key_error(node, path, "expected an integer");
    const int64_t v = *node.value<int64_t>();
    if (v < 0 || static_cast<uint64_t>(v) < key.min || static_cast<uint64_t>(v) > key.max) {
      return key_error(node, path,
                       fmt::format("must be between {} and {} (got {})", key.min, key.max, v));
    }
    if (key.power_of_two && !std::has_single_bit(static_cast<uint64_t>(v))) {
      return key_error(node, path, fmt::format("must be a power of two (got {})", v));
    }
    profile.*field = static_cast<std::remove_reference_t<decltype(profile.*field)>>(v);
    return {};
  };
  struct Visitor {
    const ProfileKey& key;
    const toml::node& node;
    Profile& profile;
    decltype(integer)& set_integer;
    std::expected<void, std::string> operator()(std::string Profile::*field) const {
      auto v = node.value<std::string>();
      if (!node.is_string() || !v) return key_error(node, key.path, "expected a string");
      if (!key.choices.empty() &&
          std::find(key.choices.begin(), key.choices.end(), *v) == key.choices.end()) {
        std::string known;
        for (std::string_view c : key.choices)
          known += (known.empty() ? "" : ", ") + std::string(c);
        return key_error(node, key.path,
                         fmt::format("unknown {} \"{}\" (known: {})", key.choice_noun, *v, known));
      }
      profile.*field = *v;
      return {};
    }
    std::expected<void, std::string> operator()(bool Profile::*field) const {
      if (!node.is_boolean()) return key_error(node, key.path, "expected true or false");
      profile.*field = *node.value<bool>();
      return {};
    }
    std::expected<void, std::string> operator()(uint64_t Profile::*field) const {
      return set_integer(field);
    }
    std::expected<void, std::string> operator()(uint32_t Profile::*field) const {
      return set_integer(field);
    }
    std::expected<void, std::string> operator()(FallocateModesField) const {
      const auto* array = node.as_array();
      if (!array) return key_error(node, key.path, "expected an array of strings");
      profile.fallocate_modes = 0;
      const auto names = fallocate_mode_names();
      for (const auto& element : *array) {
        auto name = element.value<std::string>();
        auto it = std::find_if(names.begin(), names.end(),
                               [&](const FallocateModeName& m) { return name && m.name == *name; });
        if (!element.is_string() || it == names.end()) {
          return key_error(element, key.path,
                           "unknown mode (known: allocate, keep_size, punch_hole, zero_range)");
        }
        profile.fallocate_modes |= static_cast<uint8_t>(it->mode);
      }
      return {};
    }
  };
  return std::visit(Visitor{key, node, profile, integer}, key.field);
}

// The checks that span keys, run once every key of a layer (a file, or the
// overrides) is applied. `node_of` finds a key's node in that layer, so the
// error names the line the user wrote, or the key alone when the value came from
// a base profile.
using NodeOf = std::function<const toml::node*(std::string_view)>;

std::expected<void, std::string> validate(const Profile& p, std::string_view source_name,
                                          const NodeOf& node_of) {
  // Names the first of `keys` this layer sets (the one the user can change), else
  // the first.
  auto error = [&](std::initializer_list<std::string_view> keys,
                   std::string_view message) -> Error {
    // The message without the key it opens with, when that key names the error.
    const auto about = [&](std::string_view key) -> std::string {
      if (!message.starts_with(key) || message.size() <= key.size() + 1 ||
          message[key.size()] != ' ') {
        return std::string(message);
      }
      std::string_view rest = message.substr(key.size() + 1);
      if (rest.starts_with('(')) {  // "KEY (VALUE) must ..." -> "VALUE must ..."
        const size_t close = rest.find(") ");
        if (close != std::string_view::npos) {
          return fmt::format("{} {}", rest.substr(1, close - 1), rest.substr(close + 2));
        }
      }
      return std::string(rest);
    };
    for (std::string_view key : keys) {
      if (const toml::node* node = node_of(key)) return key_error(*node, key, about(key));
    }
    const std::string_view key = *keys.begin();
    const std::string text = about(key);
    if (source_name == kOverrideSource) return Error(fmt::format("--set {}: {}", key, text));
    return Error(fmt::format("{}: {}: {}", source_name, key, text));
  };
  const uint64_t unit = p.allocation_unit;
  if (p.capacity_bytes % unit != 0 || p.capacity_bytes < unit) {
    return error({"device.capacity_bytes", "device.allocation_unit"},
                 fmt::format("device.capacity_bytes ({}) must be a positive multiple of "
                             "device.allocation_unit ({})",
                             p.capacity_bytes, unit));
  }
  for (auto [key, value] :
       {std::pair{"device.allocation_group_bytes", p.allocation_group_bytes},
        std::pair{"device.group_metadata_bytes", p.group_metadata_bytes},
        std::pair{"device.max_extent_bytes", p.max_extent_bytes},
        std::pair{"device.max_unwritten_extent_bytes", p.max_unwritten_extent_bytes},
        std::pair{"allocation.cow_extent_max_bytes", p.cow_extent_max_bytes}}) {
    if (value % unit != 0) {
      return error({key, "device.allocation_unit"},
                   fmt::format("{} ({}) must be a multiple of device.allocation_unit ({})", key,
                               value, unit));
    }
  }
  if (const std::string why = geometry_error(p); !why.empty()) {
    return error({"device.geometry", "device.capacity_bytes", "device.allocation_group_bytes",
                  "device.group_metadata_bytes"},
                 why);
  }
  if (p.allocation_group_bytes > p.capacity_bytes) {
    return error({"device.capacity_bytes", "device.allocation_group_bytes"},
                 fmt::format("device.allocation_group_bytes ({}) must not exceed "
                             "device.capacity_bytes ({})",
                             p.allocation_group_bytes, p.capacity_bytes));
  }
  const uint64_t group =
      p.allocation_group_bytes == 0 ? p.capacity_bytes : p.allocation_group_bytes;
  if (p.capacity_bytes / group > kMaxAllocationGroups) {
    return error({"device.allocation_group_bytes", "device.capacity_bytes"},
                 fmt::format("device.capacity_bytes / device.allocation_group_bytes gives {} "
                             "allocation groups; at most {}",
                             p.capacity_bytes / group, kMaxAllocationGroups));
  }
  if (p.group_metadata_bytes >= group) {
    return error(
        {"device.group_metadata_bytes", "device.allocation_group_bytes", "device.capacity_bytes"},
        fmt::format("device.group_metadata_bytes ({}) must be smaller than an "
                    "allocation group ({} bytes)",
                    p.group_metadata_bytes, group));
  }
  if (p.speculative_preallocation && p.inode_window_max_bytes > 0) {
    return error({"allocation.speculative_preallocation", "allocation.inode_window_max_bytes"},
                 "allocation.speculative_preallocation cannot be combined with "
                 "allocation.inode_window_max_bytes (choose one preallocation policy)");
  }
  if (p.logical_block_size > unit) {
    return error({"device.logical_block_size", "device.allocation_unit"},
                 fmt::format("device.logical_block_size ({}) must not exceed "
                             "device.allocation_unit ({})",
                             p.logical_block_size, unit));
  }
  if (p.silly_rename && !p.nfs) {
    return error({"client.silly_rename", "client.nfs"},
                 "client.silly_rename needs client.nfs (only an NFS client renames open files)");
  }
  if (p.local_lock != "all" && !p.nfs) {
    return error({"client.local_lock", "client.nfs"},
                 "client.local_lock needs client.nfs (a local filesystem's locks are all local)");
  }
  if (p.timeout_mode != "hard" && !p.nfs) {
    return error({"client.timeout_mode", "client.nfs"},
                 "client.timeout_mode needs client.nfs (a local filesystem has no server)");
  }
  if (p.recover_lost_locks && !p.nfs) {
    return error({"client.recover_lost_locks", "client.nfs"},
                 "client.recover_lost_locks needs client.nfs (a local filesystem has no server)");
  }
  if (p.acregmin_ns > p.acregmax_ns) {
    return error({"client.acregmin_ns", "client.acregmax_ns"},
                 "client.acregmin_ns must not exceed client.acregmax_ns");
  }
  if (p.acdirmin_ns > p.acdirmax_ns) {
    return error({"client.acdirmin_ns", "client.acdirmax_ns"},
                 "client.acdirmin_ns must not exceed client.acdirmax_ns");
  }
  if (p.speculative_preallocation_min_bytes > p.speculative_preallocation_max_bytes) {
    return error({"allocation.speculative_preallocation_min_bytes",
                  "allocation.speculative_preallocation_max_bytes"},
                 "allocation.speculative_preallocation_min_bytes must not exceed "
                 "allocation.speculative_preallocation_max_bytes");
  }
  return {};
}

// Every key in `table` must be in the schema; names the first that is not.
std::expected<void, std::string> reject_unknown_keys(const toml::table& table,
                                                     const std::string& prefix) {
  for (const auto& [key, node] : table) {
    std::string path =
        prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const auto* sub = node.as_table()) {
      auto r = reject_unknown_keys(*sub, path);
      if (!r) return r;
      continue;
    }
    if (path == "base") continue;
    if (!find_profile_key(path)) {
      return key_error(node, path, "unknown key; " + profile_key_suggestion(path));
    }
  }
  return {};
}

std::expected<toml::table, std::string> parse_table(std::string_view text,
                                                    std::string_view source_name) {
  try {
    return toml::parse(text, std::string(source_name));
  } catch (const toml::parse_error& e) {
    return Error(fmt::format("{}:{}: invalid TOML: {}", source_name, e.source().begin.line,
                             e.description()));
  }
}

std::expected<Profile, std::string> parse_profile_with_depth(std::string_view text,
                                                             std::string_view source_name,
                                                             int depth) {
  auto parsed = parse_table(text, source_name);
  if (!parsed) return Error(parsed.error());
  const toml::table& table = *parsed;
  if (auto r = reject_unknown_keys(table, ""); !r) return Error(r.error());

  // A profile may start from a built-in one and override any key; each key is
  // applied from the table it was written in, so errors name the right file and line.
  Profile profile;
  const toml::node* base_node = table.get("base");
  if (base_node) {
    auto base_name = base_node->value<std::string>();
    if (!base_name) return key_error(*base_node, "base", "expected a string");
    const auto& builtins = builtin_profiles();
    auto it = std::find_if(builtins.begin(), builtins.end(),
                           [&](const BuiltinProfile& b) { return b.name == *base_name; });
    if (it == builtins.end() || depth > 4) {
      std::string names;
      for (const auto& b : builtins) names += (names.empty() ? "" : ", ") + std::string(b.name);
      return key_error(*base_node, "base",
                       fmt::format("unknown profile \"{}\" (known: {})", *base_name, names));
    }
    auto base =
        parse_profile_with_depth(it->toml, fmt::format("<builtin {}>", it->name), depth + 1);
    if (!base) return base;
    profile = std::move(*base);
    profile.name = std::filesystem::path(std::string(source_name)).stem().string();
  }

  for (const ProfileKey& key : profile_keys()) {
    const toml::node* node = table.at_path(key.path).node();
    if (!node) {
      if (base_node || !key.required) continue;
      return Error(
          fmt::format("{}: {}: missing (set it, or start from a built-in with base = \"nfs\")",
                      source_name, key.path));
    }
    if (auto r = apply_key(key, *node, profile); !r) return Error(r.error());
  }
  auto node_of = [&](std::string_view key) { return table.at_path(key).node(); };
  if (auto r = validate(profile, source_name, node_of); !r) return Error(r.error());
  return profile;
}

}  // namespace

std::expected<Profile, std::string> parse_profile(std::string_view toml_text,
                                                  std::string_view source_name) {
  return parse_profile_with_depth(toml_text, source_name, 0);
}

std::expected<Profile, std::string> load_builtin_profile(std::string_view name) {
  for (const auto& builtin : builtin_profiles()) {
    if (builtin.name == name) return parse_profile(builtin.toml, fmt::format("<builtin {}>", name));
  }
  std::string names;
  for (const auto& b : builtin_profiles())
    names += (names.empty() ? "" : ", ") + std::string(b.name);
  return Error(fmt::format("unknown profile \"{}\" (known: {})", name, names));
}

std::expected<Profile, std::string> load_profile_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return Error(fmt::format("{}: cannot read profile file: {}", path, std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  return parse_profile(text.str(), path);
}

std::expected<Profile, std::string> apply_overrides(Profile profile,
                                                    const std::vector<std::string>& assignments) {
  if (assignments.empty()) return profile;
  std::vector<std::pair<std::string, toml::table>> layer;  // key -> its parsed value
  for (const std::string& assignment : assignments) {
    const size_t equals = assignment.find('=');
    if (equals == std::string::npos || equals == 0) {
      return Error(fmt::format("--set {}: expected KEY=VALUE", assignment));
    }
    const std::string key = assignment.substr(0, equals);
    const std::string value = assignment.substr(equals + 1);
    const ProfileKey* spec = find_profile_key(key);
    if (!spec) {
      return Error(fmt::format("--set {}: unknown key; {}", key, profile_key_suggestion(key)));
    }
    // VALUE is TOML; a bare word (shared_cursor) is a string.
    toml::table parsed;
    try {
      parsed = toml::parse("value = " + value, std::string(kOverrideSource));
    } catch (const toml::parse_error&) {
      std::ostringstream quoted;
      quoted << toml::value<std::string>(value);
      parsed = toml::parse("value = " + quoted.str(), std::string(kOverrideSource));
    }
    const toml::node& node = *parsed.get("value");
    if (auto r = apply_key(*spec, node, profile); !r) return Error(r.error());
    layer.emplace_back(key, std::move(parsed));
  }
  // Cross-key checks name an override when one of its keys is at fault.
  auto node_of = [&](std::string_view key) -> const toml::node* {
    for (const auto& [set_key, table] : layer) {
      if (set_key == key) return table.get("value");
    }
    return nullptr;
  };
  if (auto r = validate(profile, kOverrideSource, node_of); !r) return Error(r.error());
  return profile;
}

std::string Profile::to_toml() const {
  // Keys in schema order, each under its table, with its unit as a comment.
  std::string out;
  std::string_view table;
  for (const ProfileKey& key : profile_keys()) {
    const size_t dot = key.path.find('.');
    const std::string_view section = dot == std::string_view::npos ? "" : key.path.substr(0, dot);
    const std::string_view name =
        dot == std::string_view::npos ? key.path : key.path.substr(dot + 1);
    if (section != table) {
      out += fmt::format("\n[{}]\n", section);
      table = section;
    }
    out += fmt::format("{} = {}", name, value_as_toml(key, *this));
    const bool commented = !key.unit.empty() && key.unit != "bool" && key.unit != "list";
    out += commented ? fmt::format("  # {}\n", key.unit) : "\n";
  }
  return out;
}

}  // namespace mimicfs
