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
// The source name given to `--set` overrides, so their errors read "--set KEY: ...".
constexpr std::string_view kOverrideSource = "--set";

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

constexpr std::string_view kPlacements[] = {"goal", "shared_cursor"};
constexpr std::string_view kNamespaceDurabilities[] = {"journal", "synchronous"};

using Error = std::unexpected<std::string>;

// "file:line: key: message", the one shape every profile error has; an override
// from the command line reads "--set key: message".
Error key_error(const toml::node& node, std::string_view key, std::string_view message) {
  const auto& src = node.source();
  std::string where = src.path ? std::string(*src.path) : std::string("<profile>");
  if (where == kOverrideSource) return Error(fmt::format("--set {}: {}", key, message));
  return Error(fmt::format("{}:{}: {}: {}", where, src.begin.line, key, message));
}

using Apply = std::function<std::expected<void, std::string>(const toml::node&, Profile&)>;

// One key of the schema: where it lives and how it lands in a Profile. A key that
// is not required has the default in Profile.
struct KeySpec {
  std::string_view path;  // dotted, e.g. "device.allocation_unit"
  Apply apply;
  bool required = true;
};

Apply string_key(std::string_view key, std::string Profile::*field) {
  return [key, field](const toml::node& node, Profile& p) -> std::expected<void, std::string> {
    auto v = node.value<std::string>();
    if (!node.is_string() || !v) return key_error(node, key, "expected a string");
    p.*field = *v;
    return {};
  };
}

Apply bool_key(std::string_view key, bool Profile::*field) {
  return [key, field](const toml::node& node, Profile& p) -> std::expected<void, std::string> {
    if (!node.is_boolean()) return key_error(node, key, "expected true or false");
    p.*field = *node.value<bool>();
    return {};
  };
}

template <typename Field>
Apply integer_key(std::string_view key, Field Profile::*field, uint64_t min, uint64_t max) {
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

constexpr uint64_t kMaxBytes = uint64_t{1} << 60;
// An hour: long enough for any emulated latency, short enough that sums of
// millions of them cannot overflow 64-bit nanoseconds.
constexpr uint64_t kMaxNs = uint64_t{3600} * 1'000'000'000;
// Each allocation group is an entry in the allocator's maps: bound the memory.
constexpr uint64_t kMaxGroups = uint64_t{1} << 20;

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> keys = {
      {"name", string_key("name", &Profile::name)},
      {"description", string_key("description", &Profile::description), false},
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
       integer_key("device.capacity_bytes", &Profile::capacity_bytes, 1, kMaxBytes)},
      {"device.allocation_group_bytes",
       integer_key("device.allocation_group_bytes", &Profile::allocation_group_bytes, 0, kMaxBytes),
       false},
      {"device.group_metadata_bytes",
       integer_key("device.group_metadata_bytes", &Profile::group_metadata_bytes, 0, kMaxBytes),
       false},
      {"device.max_extent_bytes",
       integer_key("device.max_extent_bytes", &Profile::max_extent_bytes, 0, kMaxBytes), false},
      {"device.max_unwritten_extent_bytes",
       integer_key("device.max_unwritten_extent_bytes", &Profile::max_unwritten_extent_bytes, 0,
                   kMaxBytes),
       false},
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
      {"allocation.placement",
       [](const toml::node& node, Profile& p) -> std::expected<void, std::string> {
         auto r = string_key("allocation.placement", &Profile::placement)(node, p);
         if (!r) return r;
         if (std::find(std::begin(kPlacements), std::end(kPlacements), p.placement) ==
             std::end(kPlacements)) {
           return key_error(
               node, "allocation.placement",
               fmt::format("unknown placement \"{}\" (known: goal, shared_cursor)", p.placement));
         }
         return {};
       }},
      {"allocation.delayed_allocation",
       bool_key("allocation.delayed_allocation", &Profile::delayed_allocation), false},
      {"allocation.writeback_bytes",
       integer_key("allocation.writeback_bytes", &Profile::writeback_bytes, 0, kMaxBytes), false},
      {"allocation.inode_window_max_bytes",
       integer_key("allocation.inode_window_max_bytes", &Profile::inode_window_max_bytes, 0,
                   kMaxBytes),
       false},
      {"allocation.speculative_preallocation",
       bool_key("allocation.speculative_preallocation", &Profile::speculative_preallocation),
       false},
      {"allocation.speculative_preallocation_min_bytes",
       integer_key("allocation.speculative_preallocation_min_bytes",
                   &Profile::speculative_preallocation_min_bytes, 1, kMaxBytes),
       false},
      {"allocation.speculative_preallocation_max_bytes",
       integer_key("allocation.speculative_preallocation_max_bytes",
                   &Profile::speculative_preallocation_max_bytes, 1, kMaxBytes),
       false},
      {"allocation.copy_on_write", bool_key("allocation.copy_on_write", &Profile::copy_on_write),
       false},
      {"allocation.cow_extent_max_bytes",
       integer_key("allocation.cow_extent_max_bytes", &Profile::cow_extent_max_bytes, 0, kMaxBytes),
       false},
      {"device.logical_block_size",
       [](const toml::node& node, Profile& p) -> std::expected<void, std::string> {
         auto r = integer_key("device.logical_block_size", &Profile::logical_block_size, 1,
                              kMaxAllocationUnit)(node, p);
         if (!r) return r;
         if (!std::has_single_bit(p.logical_block_size)) {
           return key_error(node, "device.logical_block_size",
                            fmt::format("must be a power of two (got {})", p.logical_block_size));
         }
         return {};
       },
       false},
      {"cost.round_trip_ns", integer_key("cost.round_trip_ns", &Profile::round_trip_ns, 0, kMaxNs),
       false},
      {"cost.metadata_ns", integer_key("cost.metadata_ns", &Profile::metadata_ns, 0, kMaxNs),
       false},
      {"cost.read_ns", integer_key("cost.read_ns", &Profile::read_ns, 0, kMaxNs), false},
      {"cost.write_ns", integer_key("cost.write_ns", &Profile::write_ns, 0, kMaxNs), false},
      {"cost.fsync_ns", integer_key("cost.fsync_ns", &Profile::fsync_ns, 0, kMaxNs), false},
      {"cost.fallocate_ns", integer_key("cost.fallocate_ns", &Profile::fallocate_ns, 0, kMaxNs),
       false},
      {"cost.punch_ns", integer_key("cost.punch_ns", &Profile::punch_ns, 0, kMaxNs), false},
      {"cost.unlink_ns", integer_key("cost.unlink_ns", &Profile::unlink_ns, 0, kMaxNs), false},
      {"cost.unlink_extent_ns",
       integer_key("cost.unlink_extent_ns", &Profile::unlink_extent_ns, 0, kMaxNs), false},
      {"cost.extent_ns", integer_key("cost.extent_ns", &Profile::extent_ns, 0, kMaxNs), false},
      {"cost.gap_fill_ns", integer_key("cost.gap_fill_ns", &Profile::gap_fill_ns, 0, kMaxNs),
       false},
      {"cost.bandwidth_bytes_per_second",
       integer_key("cost.bandwidth_bytes_per_second", &Profile::bandwidth_bytes_per_second, 0,
                   kMaxBytes),
       false},
      {"cost.max_request_bytes",
       integer_key("cost.max_request_bytes", &Profile::max_request_bytes, 512, uint64_t{1} << 30),
       false},
      {"cost.queue_depth", integer_key("cost.queue_depth", &Profile::queue_depth, 1, 65536), false},
      {"page_cache.memory_bandwidth_bytes_per_second",
       integer_key("page_cache.memory_bandwidth_bytes_per_second",
                   &Profile::memory_bandwidth_bytes_per_second, 0, kMaxBytes),
       false},
      {"page_cache.syscall_ns",
       integer_key("page_cache.syscall_ns", &Profile::syscall_ns, 0, kMaxNs), false},
      {"page_cache.dirty_unit",
       [](const toml::node& node, Profile& p) -> std::expected<void, std::string> {
         auto r = integer_key("page_cache.dirty_unit", &Profile::dirty_unit, 1, kMaxAllocationUnit)(
             node, p);
         if (!r) return r;
         if (!std::has_single_bit(p.dirty_unit)) {
           return key_error(node, "page_cache.dirty_unit",
                            fmt::format("must be a power of two (got {})", p.dirty_unit));
         }
         return {};
       },
       false},
      {"page_cache.dirty_limit_bytes",
       integer_key("page_cache.dirty_limit_bytes", &Profile::dirty_limit_bytes, 0, kMaxBytes),
       false},
      {"page_cache.flush_on_close", bool_key("page_cache.flush_on_close", &Profile::flush_on_close),
       false},
      {"page_cache.direct_io", bool_key("page_cache.direct_io", &Profile::direct_io), false},
      {"durability.namespace",
       [](const toml::node& node, Profile& p) -> std::expected<void, std::string> {
         auto r = string_key("durability.namespace", &Profile::namespace_durability)(node, p);
         if (!r) return r;
         if (std::find(std::begin(kNamespaceDurabilities), std::end(kNamespaceDurabilities),
                       p.namespace_durability) == std::end(kNamespaceDurabilities)) {
           return key_error(node, "durability.namespace",
                            fmt::format("unknown value \"{}\" (known: journal, synchronous)",
                                        p.namespace_durability));
         }
         return {};
       },
       false},
  };
  return keys;
}

const KeySpec* find_key(std::string_view path) {
  for (const auto& key : schema()) {
    if (key.path == path) return &key;
  }
  return nullptr;
}

std::string known_keys() {
  std::string names;
  for (const auto& k : schema()) names += (names.empty() ? "" : ", ") + std::string(k.path);
  return names;
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
    for (std::string_view key : keys) {
      if (const toml::node* node = node_of(key)) return key_error(*node, key, message);
    }
    const std::string_view key = *keys.begin();
    if (source_name == kOverrideSource) return Error(fmt::format("--set {}: {}", key, message));
    return Error(fmt::format("{}: {}: {}", source_name, key, message));
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
        std::pair{"device.max_unwritten_extent_bytes", p.max_unwritten_extent_bytes}}) {
    if (value % unit != 0) {
      return error({key, "device.allocation_unit"},
                   fmt::format("{} ({}) must be a multiple of device.allocation_unit ({})", key,
                               value, unit));
    }
  }
  if (p.allocation_group_bytes > p.capacity_bytes) {
    return error({"device.capacity_bytes", "device.allocation_group_bytes"},
                 fmt::format("device.allocation_group_bytes ({}) must not exceed "
                             "device.capacity_bytes ({})",
                             p.allocation_group_bytes, p.capacity_bytes));
  }
  const uint64_t group =
      p.allocation_group_bytes == 0 ? p.capacity_bytes : p.allocation_group_bytes;
  if (p.capacity_bytes / group > kMaxGroups) {
    return error({"device.allocation_group_bytes", "device.capacity_bytes"},
                 fmt::format("device.capacity_bytes / device.allocation_group_bytes gives {} "
                             "allocation groups; at most {}",
                             p.capacity_bytes / group, kMaxGroups));
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
    if (!find_key(path)) {
      return key_error(node, path, fmt::format("unknown key (known: base, {})", known_keys()));
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
      if (base_node || !key.required) continue;
      return Error(
          fmt::format("{}: {}: missing (set it, or start from a built-in with base = \"nfs\")",
                      source_name, key.path));
    }
    if (auto r = key.apply(*node, profile); !r) return Error(r.error());
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
    const KeySpec* spec = find_key(key);
    if (!spec) return Error(fmt::format("--set {}: unknown key (known: {})", key, known_keys()));
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
    if (auto r = spec->apply(node, profile); !r) return Error(r.error());
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
      "allocation_group_bytes = {}  # bytes, 0: one group\n"
      "group_metadata_bytes = {}  # bytes at the start of each group\n"
      "max_extent_bytes = {}  # bytes, 0: no limit\n"
      "max_unwritten_extent_bytes = {}  # bytes, 0: as max_extent_bytes\n"
      "logical_block_size = {}  # bytes, O_DIRECT alignment\n"
      "\n[statfs]\n"
      "block_size = {}  # bytes, f_bsize\n"
      "fragment_size = {}  # bytes, f_frsize\n"
      "name_max = {}  # bytes, f_namelen\n"
      "\n[fallocate]\n"
      "modes = [{}]\n"
      "\n[allocation]\n"
      "placement = {}\n"
      "delayed_allocation = {}\n"
      "writeback_bytes = {}  # bytes, 0: only fsync and close\n"
      "inode_window_max_bytes = {}  # bytes, 0: off\n"
      "speculative_preallocation = {}\n"
      "speculative_preallocation_min_bytes = {}  # bytes\n"
      "speculative_preallocation_max_bytes = {}  # bytes\n"
      "copy_on_write = {}\n"
      "cow_extent_max_bytes = {}  # bytes, 0: no limit\n"
      "\n[cost]\n"
      "round_trip_ns = {}\n"
      "metadata_ns = {}\n"
      "read_ns = {}\n"
      "write_ns = {}\n"
      "fsync_ns = {}\n"
      "fallocate_ns = {}\n"
      "punch_ns = {}\n"
      "unlink_ns = {}\n"
      "unlink_extent_ns = {}\n"
      "extent_ns = {}\n"
      "gap_fill_ns = {}\n"
      "bandwidth_bytes_per_second = {}  # 0: unlimited\n"
      "max_request_bytes = {}\n"
      "queue_depth = {}\n"
      "\n[page_cache]\n"
      "memory_bandwidth_bytes_per_second = {}  # 0: free\n"
      "syscall_ns = {}\n"
      "dirty_unit = {}  # bytes\n"
      "dirty_limit_bytes = {}  # 0: no limit\n"
      "flush_on_close = {}\n"
      "direct_io = {}\n"
      "\n[durability]\n"
      "namespace = {}\n",
      quoted(name), quoted(description), allocation_unit, capacity_bytes, allocation_group_bytes,
      group_metadata_bytes, max_extent_bytes, max_unwritten_extent_bytes, logical_block_size,
      statfs_block_size, statfs_fragment_size, name_max, modes, quoted(placement),
      delayed_allocation, writeback_bytes, inode_window_max_bytes, speculative_preallocation,
      speculative_preallocation_min_bytes, speculative_preallocation_max_bytes, copy_on_write,
      cow_extent_max_bytes, round_trip_ns, metadata_ns, read_ns, write_ns, fsync_ns, fallocate_ns,
      punch_ns, unlink_ns, unlink_extent_ns, extent_ns, gap_fill_ns, bandwidth_bytes_per_second,
      max_request_bytes, queue_depth, memory_bandwidth_bytes_per_second, syscall_ns, dirty_unit,
      dirty_limit_bytes, flush_on_close, direct_io, quoted(namespace_durability));
}

}  // namespace mimicfs
