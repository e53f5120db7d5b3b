// SPDX-License-Identifier: Apache-2.0
// VolumeImage: a volume's state as one JSON document, written at unmount into
// a data directory (HostDataStore::save_volume, in CBOR) and read back at the
// next mount, so a volume outlives its mount. Each class saves and loads its
// own part (save()/load() beside its other members); this header has what they
// share: runs of numbers packed into byte strings (8 bytes each, little-endian),
// which keep a volume of millions of extents small and quick to read.
//
// Only a quiet, synced volume is saved: no operation running, nothing unsynced,
// no deferred work (the unmount syncs first, as a real one does), so the image
// holds no crash state, no page cache and no handle. A part that finds state
// it cannot save throws ImageError; a part that reads a malformed image throws
// ImageError or nlohmann::json::exception.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace mimicfs {

using ImageJson = nlohmann::json;

struct ImageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

static_assert(std::endian::native == std::endian::little, "images are little-endian");

// Numbers as one byte string.
inline ImageJson pack_numbers(const std::vector<uint64_t>& numbers) {
  std::vector<std::uint8_t> bytes(numbers.size() * sizeof(uint64_t));
  if (!numbers.empty()) std::memcpy(bytes.data(), numbers.data(), bytes.size());
  return ImageJson::binary(std::move(bytes));
}

// The numbers of a byte string pack_numbers() made, a multiple of `group` of them.
inline std::vector<uint64_t> unpack_numbers(const ImageJson& value, size_t group = 1) {
  if (!value.is_binary()) throw ImageError("a packed run of numbers is not a byte string");
  const auto& bytes = value.get_binary();
  if (bytes.size() % (sizeof(uint64_t) * group) != 0) {
    throw ImageError("a packed run of numbers has a length that does not divide");
  }
  std::vector<uint64_t> numbers(bytes.size() / sizeof(uint64_t));
  if (!numbers.empty()) std::memcpy(numbers.data(), bytes.data(), bytes.size());
  return numbers;
}

// A string that may hold any bytes (an xattr's value, a name).
inline ImageJson pack_bytes(const std::string& text) {
  return ImageJson::binary(std::vector<std::uint8_t>(text.begin(), text.end()));
}
inline std::string unpack_bytes(const ImageJson& value) {
  if (!value.is_binary()) throw ImageError("a byte string is missing");
  const auto& bytes = value.get_binary();
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace mimicfs
