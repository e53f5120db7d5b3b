// SPDX-License-Identifier: Apache-2.0
// Durations as fault rules and control commands spell them: a positive whole
// number and a unit, ns, us, ms or s ("50ms").
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace mimicfs {

// On error, one line saying what is wrong.
std::expected<uint64_t, std::string> parse_duration_ns(std::string_view text);
// The largest unit that states `ns` exactly ("1500ms"); parses back to `ns`.
std::string format_duration(uint64_t ns);

}  // namespace mimicfs
