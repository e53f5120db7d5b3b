// SPDX-License-Identifier: Apache-2.0
// Whether a run of bytes is all zero: the stores keep no page of zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mimicfs {

inline bool all_zero(const std::byte* data, size_t length) {
  size_t i = 0;
  for (; i + sizeof(uint64_t) <= length; i += sizeof(uint64_t)) {
    uint64_t word;
    std::memcpy(&word, data + i, sizeof(word));
    if (word != 0) return false;
  }
  for (; i < length; ++i) {
    if (data[i] != std::byte{0}) return false;
  }
  return true;
}

}  // namespace mimicfs
