// SPDX-License-Identifier: Apache-2.0
// The Levenshtein distance between two words, to name the closest known word
// when one is mistyped (a profile key, a command).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <vector>

namespace mimicfs {

// Insertions, deletions, substitutions and swaps of two adjacent letters that
// turn `a` into `b` (the optimal string alignment distance): "moutn" is one
// swap from "mount", the commonest typo, where Levenshtein counts two.
inline size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows of the table: the one before the previous for swaps.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      row[j] = std::min({previous[j] + 1, row[j - 1] + 1,
                         previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        row[j] = std::min(row[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, row);
  }
  return previous[b.size()];
}

}  // namespace mimicfs
