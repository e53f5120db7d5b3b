// SPDX-License-Identifier: Apache-2.0
#include "engine/time/duration.h"

#include <fmt/format.h>

#include <charconv>
#include <iterator>
#include <limits>

namespace mimicfs {
namespace {

struct DurationUnit {
  std::string_view suffix;
  uint64_t ns;
};
// Smallest first; format_duration() walks them from the largest.
constexpr DurationUnit kDurationUnits[] = {
    {"ns", 1}, {"us", 1'000}, {"ms", 1'000'000}, {"s", 1'000'000'000}};

}  // namespace

std::expected<uint64_t, std::string> parse_duration_ns(std::string_view s) {
  const size_t digits = s.find_first_not_of("0123456789");
  if (digits == 0) {
    return std::unexpected(fmt::format("\"{}\" is not a duration like 50ms", s));
  }
  if (digits == std::string_view::npos) {
    return std::unexpected(fmt::format("\"{}\" needs a unit: ns, us, ms or s", s));
  }
  const std::string_view unit = s.substr(digits);
  for (const DurationUnit& u : kDurationUnits) {
    if (unit != u.suffix) continue;
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + digits, value);
    if (ec != std::errc() || end != s.data() + digits ||
        value > std::numeric_limits<uint64_t>::max() / u.ns) {
      return std::unexpected(fmt::format("\"{}\" is too large", s));
    }
    if (value == 0) return std::unexpected(fmt::format("\"{}\" is not positive", s));
    return value * u.ns;
  }
  return std::unexpected(fmt::format("unknown unit \"{}\" (ns, us, ms or s)", unit));
}

std::string format_duration(uint64_t ns) {
  for (auto u = std::rbegin(kDurationUnits); u != std::rend(kDurationUnits); ++u) {
    if (ns % u->ns == 0) return fmt::format("{}{}", ns / u->ns, u->suffix);
  }
  return fmt::format("{}ns", ns);
}

}  // namespace mimicfs
