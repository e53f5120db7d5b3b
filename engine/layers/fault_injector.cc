// SPDX-License-Identifier: Apache-2.0
#include "engine/layers/fault_injector.h"

#include "engine/base/edit_distance.h"
#include "engine/time/duration.h"

#include <fmt/format.h>
#include <fnmatch.h>
#include <spdlog/spdlog.h>
#include <string.h>  // strerrorname_np

#include <algorithm>
#include <bitset>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <optional>
#include <random>

namespace mimicfs {

struct FaultInjector::Rule {
  enum class Trigger : uint8_t { kAlways, kProbability, kNth, kEvery };

  std::string text;
  std::bitset<static_cast<size_t>(Op::kCount)> ops;
  std::string path = "*";
  int error = 0;
  uint64_t latency_ns = 0;
  Crash crash = Crash::kNone;
  bool server_restart = false;  // server=restart
  bool hold = false;     // restart=ctl: the volume stays off after the crash
  bool freeze = false;   // restart=freeze: and its operations wait for the restart
  double writeback = 0;  // writeback=: the fraction of unsynced overwrites that persist
  uint64_t from_ns = 0;  // from=: only operations from this emulated time on
  Trigger trigger = Trigger::kAlways;
  // probability=P as an integer threshold on 53 random bits (P * 2^53), so the
  // outcome of a draw does not depend on the standard library's floating-point
  // distributions, which differ between implementations.
  uint64_t threshold = 0;
  uint64_t seed = 0;
  uint64_t n = 0;                                         // nth= or every=
  uint64_t limit = std::numeric_limits<uint64_t>::max();  // count=
  std::mt19937_64 rng;
  uint64_t matched = 0;
  uint64_t fired = 0;

  // The rule `text` states, or `fault rule "TEXT": KEY: what is wrong`.
  static std::expected<Rule, std::string> parse(std::string_view text);

  // Counts a match and says whether this one fires.
  bool triggers() {
    ++matched;
    if (fired >= limit) return false;
    switch (trigger) {
      case Trigger::kAlways:
        return true;
      case Trigger::kProbability:
        return (rng() >> 11) < threshold;
      case Trigger::kNth:
        return matched == n;
      case Trigger::kEvery:
        return matched % n == 0;
    }
    return false;
  }
};

namespace {

constexpr std::string_view kKeys[] = {"op",      "path",      "error", "latency",     "crash",
                                      "server",  "restart",   "writeback", "from",  "probability",
                                      "seed",    "nth",       "every", "count"};
constexpr std::string_view kKeyList =
    "op, path, error, latency, crash, server, restart, writeback, from, probability, seed, nth, "
    "every, count";
constexpr uint64_t kProbabilityOne = uint64_t{1} << 53;

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

std::optional<uint64_t> parse_uint(std::string_view s) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

std::optional<int> errno_from_name(std::string_view name) {
  for (int e = 1; e <= 200; ++e) {
    const char* known = strerrorname_np(e);
    if (known != nullptr && name == known) return e;
  }
  return std::nullopt;
}

// A number in (0, 1]. strtod, not from_chars: libc++ (scripts/check-locks.sh)
// has no double one.
std::expected<double, std::string> parse_fraction(std::string_view value) {
  const std::string text(value);
  char* end = nullptr;
  const double p = text.empty() || std::isspace(static_cast<unsigned char>(text[0]))
                       ? 0
                       : std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) {
    return std::unexpected(fmt::format("\"{}\" is not a number", value));
  }
  if (!(p > 0 && p <= 1)) return std::unexpected(fmt::format("{} is not in (0, 1]", value));
  return p;
}

// An operation's name as stats.json spells it. "fsync" also names fdatasync,
// as fsync(2)'s man page and the profile's fsync_ns do, so a rule written for
// "every sync" stays one; "fdatasync" (or "datasync") names fdatasync alone.
std::expected<std::bitset<static_cast<size_t>(Op::kCount)>, std::string> parse_op(
    std::string_view name) {
  std::bitset<static_cast<size_t>(Op::kCount)> ops;
  if (name == "*") return ops.set();
  if (name == "datasync") name = op_name(Op::kFdatasync);
  if (name == op_name(Op::kFsync)) ops.set(static_cast<size_t>(Op::kFdatasync));
  std::string_view closest;
  size_t closest_distance = SIZE_MAX;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string_view known = op_name(static_cast<Op>(i));
    if (known == name) return ops.set(i);
    const size_t distance = edit_distance(name, known);
    if (distance < closest_distance) closest_distance = distance, closest = known;
  }
  if (closest_distance <= 2) {
    return std::unexpected(
        fmt::format("unknown operation \"{}\" (did you mean {}?)", name, closest));
  }
  return std::unexpected(fmt::format("unknown operation \"{}\"", name));
}

std::expected<std::bitset<static_cast<size_t>(Op::kCount)>, std::string> parse_ops(
    std::string_view value) {
  std::bitset<static_cast<size_t>(Op::kCount)> ops;
  while (true) {
    const size_t bar = value.find('|');
    const auto named = parse_op(trim(value.substr(0, bar)));
    if (!named) return std::unexpected(named.error());
    ops |= *named;
    if (bar == std::string_view::npos) return ops;
    value.remove_prefix(bar + 1);
  }
}

void log_firing(size_t number, std::string_view rule_text, Op op, std::string_view path, int error,
                uint64_t latency_ns, FaultInjector::Crash crash, bool server_restart) noexcept {
  try {
    const std::string what =
        server_restart                          ? std::string("server restart before it")
        : crash == FaultInjector::Crash::kBefore ? std::string("power cut before it")
        : crash == FaultInjector::Crash::kAfter ? std::string("power cut after it")
        : error != 0                            ? errno_name(error)
                     : fmt::format("latency {}", format_duration(latency_ns));
    spdlog::warn("fault: rule {} \"{}\" fired: {} {} -> {}", number, rule_text, op_name(op), path,
                 what);
  } catch (const std::bad_alloc&) {
    // The fault is injected and counted all the same.
  }
}

}  // namespace

std::expected<FaultInjector::Rule, std::string> FaultInjector::Rule::parse(std::string_view text) {
  Rule rule;
  rule.text = trim(text);
  rule.ops.set();
  const auto bad = [&](std::string_view key, std::string_view what) {
    return std::unexpected(fmt::format("fault rule \"{}\": {}: {}", rule.text, key, what));
  };
  if (rule.text.empty()) return bad("rule", "empty");
  try {
    // to_json() must stay dumpable: JSON strings are UTF-8.
    (void)nlohmann::json(rule.text).dump();
  } catch (const nlohmann::json::exception&) {
    return bad("rule", "not valid UTF-8");
  }

  std::bitset<std::size(kKeys)> seen;
  std::string_view rest = rule.text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    const size_t equals = item.find('=');
    if (item.empty()) return bad("rule", "empty item (a stray comma?)");
    if (equals == std::string_view::npos) return bad(item, "expected key=value");
    const std::string_view key = trim(item.substr(0, equals));
    const std::string_view value = trim(item.substr(equals + 1));
    const size_t k = std::find(std::begin(kKeys), std::end(kKeys), key) - std::begin(kKeys);
    if (k == std::size(kKeys)) {
      return bad(key, fmt::format("unknown key ({})", kKeyList));
    }
    if (seen.test(k)) return bad(key, "given twice");
    seen.set(k);
    if (value.empty()) return bad(key, "empty value");

    if (key == "op") {
      auto ops = parse_ops(value);
      if (!ops) return bad(key, ops.error());
      rule.ops = *ops;
    } else if (key == "path") {
      // Paths start with '/': a pattern that cannot match one is a typo.
      if (value.front() != '/' && value.front() != '*' && value.front() != '?' &&
          value.front() != '[') {
        return bad(key, fmt::format("\"{}\" never matches: paths start with \"/\"", value));
      }
      rule.path = value;
    } else if (key == "error") {
      const std::optional<int> error = errno_from_name(value);
      if (!error) return bad(key, fmt::format("unknown errno name \"{}\"", value));
      rule.error = *error;
    } else if (key == "latency") {
      auto ns = parse_duration_ns(value);
      if (!ns) return bad(key, ns.error());
      rule.latency_ns = *ns;
    } else if (key == "crash") {
      if (value == "before") {
        rule.crash = Crash::kBefore;
      } else if (value == "after") {
        rule.crash = Crash::kAfter;
      } else {
        return bad(key, fmt::format("\"{}\" is not before or after", value));
      }
    } else if (key == "server") {
      if (value != "restart") return bad(key, fmt::format("\"{}\" is not restart", value));
      rule.server_restart = true;
    } else if (key == "restart") {
      if (value != "now" && value != "ctl" && value != "freeze") {
        return bad(key, fmt::format("\"{}\" is not now, ctl or freeze", value));
      }
      rule.hold = value != "now";
      rule.freeze = value == "freeze";
    } else if (key == "from") {
      auto ns = parse_duration_ns(value);
      if (!ns) return bad(key, ns.error());
      rule.from_ns = *ns;
    } else if (key == "writeback") {
      auto fraction = parse_fraction(value);
      if (!fraction) return bad(key, fraction.error());
      rule.writeback = *fraction;
    } else if (key == "probability") {
      auto p = parse_fraction(value);
      if (!p) return bad(key, p.error());
      rule.trigger = Trigger::kProbability;
      rule.threshold = static_cast<uint64_t>(*p * static_cast<double>(kProbabilityOne));
    } else if (key == "seed") {
      const std::optional<uint64_t> seed = parse_uint(value);
      if (!seed) return bad(key, fmt::format("\"{}\" is not a non-negative integer", value));
      rule.seed = *seed;
    } else {  // nth, every, count
      const std::optional<uint64_t> n = parse_uint(value);
      if (!n || *n == 0) return bad(key, fmt::format("\"{}\" is not a positive integer", value));
      if (key == "count") {
        rule.limit = *n;
      } else {
        rule.trigger = key == "nth" ? Trigger::kNth : Trigger::kEvery;
        rule.n = *n;
      }
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }

  const auto given = [&](std::string_view key) {
    return seen.test(std::find(std::begin(kKeys), std::end(kKeys), key) - std::begin(kKeys));
  };
  const int actions = given("error") + given("latency") + given("crash") + given("server");
  if (actions != 1) {
    return bad(given("error") || actions == 0 ? "error" : "latency",
               actions == 0 ? "one of error=, latency=, crash= or server= is required"
                            : "a rule injects one of error=, latency=, crash= and server=");
  }
  if (given("restart") && !given("crash")) return bad("restart", "needs crash=");
  if (given("writeback") && !given("crash")) return bad("writeback", "needs crash=");
  // A power cut happens once: a crash rule fires once unless count= says more.
  if ((given("crash") || given("server")) && !given("count")) rule.limit = 1;
  if (given("probability") + given("nth") + given("every") > 1) {
    return bad(given("probability") ? "probability" : "nth",
               "at most one of probability=, nth= and every= may be given");
  }
  if (given("seed") && !given("probability") && !given("writeback")) {
    return bad("seed", "needs probability= or writeback=");
  }
  rule.rng.seed(rule.seed);
  return rule;
}

FaultInjector::FaultInjector() = default;
FaultInjector::~FaultInjector() = default;

std::expected<PowerCut, std::string> FaultInjector::power_cut_of(std::string_view rule_text) {
  auto rule = Rule::parse(rule_text);
  if (!rule) return std::unexpected(rule.error());
  PowerCut cut;
  cut.hold = rule->hold;
  cut.freeze = rule->freeze;
  cut.writeback = rule->writeback;
  cut.seed = rule->seed;
  return cut;
}

std::expected<void, std::string> FaultInjector::add(std::string_view rule_text) {
  // Parsing allocates, and no exception may leave the public API.
  try {
    auto rule = Rule::parse(rule_text);
    if (!rule) return std::unexpected(std::move(rule.error()));
    std::lock_guard lock(mutex_);
    rules_.push_back(std::move(*rule));
    empty_.store(false, std::memory_order_relaxed);
    return {};
  } catch (const std::bad_alloc&) {
    return std::unexpected("fault rule: out of memory");
  }
}

void FaultInjector::clear() {
  std::lock_guard lock(mutex_);
  rules_.clear();
  empty_.store(true, std::memory_order_relaxed);
}

FaultInjector::Fault FaultInjector::check(Op op, std::string_view path, uint64_t now_ns) {
  Fault fault;
  if (empty()) return fault;
  std::string path_z;  // fnmatch wants a C string
  try {
    path_z = path;
  } catch (const std::bad_alloc&) {
    return fault;  // out of memory: the operation will fail on its own
  }
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < rules_.size(); ++i) {
    Rule& rule = rules_[i];
    if (!rule.ops.test(static_cast<size_t>(op))) continue;
    if (rule.path != "*" && fnmatch(rule.path.c_str(), path_z.c_str(), 0) != 0) continue;
    if (now_ns < rule.from_ns) continue;
    if (!rule.triggers()) continue;
    if (rule.server_restart) {
      fault.server_restart = true;
    } else if (rule.crash != Crash::kNone) {
      if (fault.crash != Crash::kNone) continue;  // shadowed: one power cut at a time
      fault.crash = rule.crash;
      fault.power_cut.hold = rule.hold;
      fault.power_cut.freeze = rule.freeze;
      fault.power_cut.writeback = rule.writeback;
      fault.power_cut.seed = rule.seed;
      fault.power_cut.cause =
          fmt::format("rule {} \"{}\": {} {} ({} it)", i + 1, rule.text, op_name(op), path,
                      rule.crash == Crash::kBefore ? "before" : "after");
    } else if (rule.error != 0) {
      if (fault.error != 0) continue;  // shadowed: the operation already fails
      fault.error = rule.error;
    } else {
      fault.latency_ns = fault.latency_ns > std::numeric_limits<uint64_t>::max() - rule.latency_ns
                             ? std::numeric_limits<uint64_t>::max()
                             : fault.latency_ns + rule.latency_ns;
    }
    ++rule.fired;
    // Logged under the lock so that the log's order is the order of firing.
    log_firing(i + 1, rule.text, op, path, rule.error, rule.latency_ns, rule.crash,
               rule.server_restart);
  }
  return fault;
}

nlohmann::json FaultInjector::to_json() const {
  std::lock_guard lock(mutex_);
  nlohmann::json out = nlohmann::json::array();
  for (const Rule& rule : rules_) {
    out.push_back({{"rule", rule.text}, {"matched", rule.matched}, {"fired", rule.fired}});
  }
  return out;
}

uint64_t FaultInjector::fired_total() const {
  std::lock_guard lock(mutex_);
  uint64_t total = 0;
  for (const Rule& rule : rules_) total += rule.fired;
  return total;
}
}  // namespace mimicfs
