// SPDX-License-Identifier: Apache-2.0
// Figures as a person reads them, for the command line's tables and pictures.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace mimicfs {

// "512 B", "4.0 KiB", "16.1 GiB": binary units, one decimal.
inline std::string bytes_text(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 40)) return fmt::format("{:.1f} TiB", bytes / double(1ull << 40));
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", bytes / double(1 << 30));
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", bytes / double(1 << 20));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

// "812 ns", "3.214 ms", "28.463 s".
inline std::string duration_text(uint64_t ns) {
  if (ns < 1000) return fmt::format("{} ns", ns);
  if (ns < 1'000'000) return fmt::format("{:.3f} us", ns / 1e3);
  if (ns < 1'000'000'000) return fmt::format("{:.3f} ms", ns / 1e6);
  return fmt::format("{:.3f} s", ns / 1e9);
}

// "file" for 1, "files" for 3; "directories" for 2.
inline std::string noun(uint64_t n, std::string_view singular) {
  if (n == 1) return std::string(singular);
  if (singular.ends_with('y')) return fmt::format("{}ies", singular.substr(0, singular.size() - 1));
  return fmt::format("{}s", singular);
}

}  // namespace mimicfs
