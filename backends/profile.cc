#include "backends/profile.h"

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

constexpr uint64_t kMaxAllocationUnit = 1 << 20;

struct ModeName {
  FallocateMode mode;
  std::string_view name;
};
constexpr ModeName kModeNames[] = {
    {FallocateMode::kAllocate, "allocate"},
    {FallocateMode::kKeepSize, "keep_size"},
    {FallocateMode::kPunchHole, "punch_hole"},
    {FallocateMode::kZeroRange, "zero_range"},
};

constexpr std::string_view kPolicies[] = {"goal"};

using Error = std::unexpected<std::string>;

// "file:line: key: message", the one shape every profile error has.
Error key_error(const toml::node& node, std::string_view key, std::string_view message) {
  const auto& src = node.source();
  std::string where = src.path ? std::string(*src.path) : std::string("<profile>");
  return Error(fmt::format("{}:{}: {}: {}", where, src.begin.line, key, message));
}

// One key of the schema: where it lives and how it lands in a Profile.
struct KeySpec {
  std::string_view path;  // dotted, e.g. "device.allocation_unit"
  std::function<std::expected<void, std::string>(const toml::node&, Profile&)> apply;
};

std::function<std::expected<void, std::string>(const toml::node&, Profile&)> string_key(
    std::string_view key, std::string Profile::*field) {
  return [key, field](const toml::node& node, Profile& p) -> std::expected<void, std::string> {
    auto v = node.value<std::string>();
    if (!node.is_string() || !v) return key_error(node, key, "expected a string");
    p.*field = *v;
    return {};
  };
}

template <typename Field>
std::function<std::expected<void, std::string>(const toml::node&, Profile&)> integer_key(
    std::string_view key, Field Profile::*field, uint64_t min, uint64_t max) {
  return [=](const toml::node& node, Profile& p) -> std::expected<void, std::string> {
    if (!node.is_integer()) return key_error(node, key, "expected an integer");
    int64_t v = *node.value<int64_t>();
    if (v < 0 || static_cast<uint64_t>(v) < min || static_cast<uint64_t>(v) > max) {
      return key_error(node, key, fmt::format("must be between {} and {} (got {})", min, max, v));
    }
    p.*field = static_cast<Field>(v);
    return {};
  };
}

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> keys = {
      {"name", string_key("name", &Profile::name)},
      {"description", string_key("description", &Profile::description)},
      {"device.allocation_unit",
       [](const toml::node& node, Profile& p) -> std::expected<void, std::string> {
         auto r = integer_key("device.allocation_unit", &Profile::allocation_unit, 512,
                              kMaxAllocationUnit)(node, p);
         if (!r) return r;
         if (!std::has_single_bit(p.allocation_unit)) {
           return key_error(node, "device.allocation_unit",
                            fmt::format("must be a power of two (got {})", p.allocation_unit));
         }
         return {};
       }},
      {"device.capacity_bytes",
       integer_key("device.capacity_bytes", &Profile::capacity_bytes, 1, uint64_t{1} << 60)},
      {"statfs.block_size",
       integer_key("statfs.block_size", &Profile::statfs_block_size, 1, uint64_t{1} << 30)},
      {"statfs.fragment_size",
       integer_key("statfs.fragment_size", &Profile::statfs_fragment_size, 1, uint64_t{1} << 30)},
      {"statfs.name_max", integer_key("statfs.name_max", &Profile::name_max, 1, 255)},
      {"fallocate.modes",
       [](const toml::node& node, Profile& p) -> std::expected<void, std::string> {
         const auto* array = node.as_array();
         if (!array) return key_error(node, "fallocate.modes", "expected an array of strings");
         p.fallocate_modes = 0;
         for (const auto& element : *array) {
           auto name = element.value<std::string>();
           auto it = std::find_if(std::begin(kModeNames), std::end(kModeNames),
                                  [&](const ModeName& m) { return name && m.name == *name; });
           if (!element.is_string() || it == std::end(kModeNames)) {
             return key_error(element, "fallocate.modes",
                              "unknown mode (known: allocate, keep_size, punch_hole, zero_range)");
           }
           p.fallocate_modes |= static_cast<uint8_t>(it->mode);
         }
         return {};
       }},
      {"allocation.policy",
       [](const toml::node& node, Profile& p) -> std::expected<void, std::string> {
         auto r = string_key("allocation.policy", &Profile::allocation_policy)(node, p);
         if (!r) return r;
         if (std::find(std::begin(kPolicies), std::end(kPolicies), p.allocation_policy) ==
             std::end(kPolicies)) {
           return key_error(
               node, "allocation.policy",
               fmt::format("unknown policy \"{}\" (known: goal)", p.allocation_policy));
         }
         return {};
       }},
  };
  return keys;
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
    bool known = std::any_of(schema().begin(), schema().end(),
                             [&](const KeySpec& k) { return k.path == path; });
    if (!known) {
      std::string names;
      for (const auto& k : schema()) names += (names.empty() ? "" : ", ") + std::string(k.path);
      return key_error(node, path, fmt::format("unknown key (known: base, {})", names));
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

  for (const auto& key : schema()) {
    const toml::node* node = table.at_path(key.path).node();
    if (!node) {
      if (base_node || key.path == "description") continue;
      return Error(
          fmt::format("{}: {}: missing (set it, or start from a built-in with base = \"nfs\")",
                      source_name, key.path));
    }
    if (auto r = key.apply(*node, profile); !r) return Error(r.error());
  }
  if (profile.capacity_bytes % profile.allocation_unit != 0 ||
      profile.capacity_bytes < profile.allocation_unit) {
    const toml::node* node = table.at_path("device.capacity_bytes").node();
    if (!node) node = table.at_path("device.allocation_unit").node();
    std::string message = fmt::format("must be a positive multiple of device.allocation_unit ({})",
                                      profile.allocation_unit);
    if (!node) return Error(fmt::format("{}: device.capacity_bytes: {}", source_name, message));
    return key_error(*node, "device.capacity_bytes", message);
  }
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

std::string Profile::to_toml() const {
  std::string modes;
  for (const auto& m : kModeNames) {
    if (supports(m.mode)) modes += fmt::format("{}\"{}\"", modes.empty() ? "" : ", ", m.name);
  }
  auto quoted = [](const std::string& s) {
    std::ostringstream out;
    out << toml::value<std::string>(s);
    return out.str();
  };
  return fmt::format(
      "name = {}\n"
      "description = {}\n"
      "\n[device]\n"
      "allocation_unit = {}  # bytes\n"
      "capacity_bytes = {}  # bytes\n"
      "\n[statfs]\n"
      "block_size = {}  # bytes, f_bsize\n"
      "fragment_size = {}  # bytes, f_frsize\n"
      "name_max = {}  # bytes, f_namelen\n"
      "\n[fallocate]\n"
      "modes = [{}]\n"
      "\n[allocation]\n"
      "policy = {}\n",
      quoted(name), quoted(description), allocation_unit, capacity_bytes, statfs_block_size,
      statfs_fragment_size, name_max, modes, quoted(allocation_policy));
}

}  // namespace mimicfs
