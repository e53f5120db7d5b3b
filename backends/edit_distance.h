// SPDX-License-Identifier: Apache-2.0
// The Levenshtein distance between two words, to name the closest known word
// when one is mistyped (a profile key, a command).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <vector>

namespace mimicfs {

// Insertions, deletions and substitutions that turn `a` into `b`.
inline size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace mimicfs
