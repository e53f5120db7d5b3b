// SPDX-License-Identifier: Apache-2.0
// DeviceLayout: where every file's blocks are on the emulated device, for a
// picture of it (`mimicfs report`) and for tests that look at placement itself.
// Read from MOUNT/.mimicfs/layout.json; positions and lengths are in allocation
// units (device.allocation_unit bytes).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/space/extent_map.h"
#include "engine/stats/stats.h"

namespace mimicfs {

struct FileLayout {
  uint64_t inode = 0;
  uint64_t size = 0;  // bytes
  std::vector<Extent> extents;
};

struct DeviceLayout {
  static constexpr int kSchemaVersion = 1;
  std::string profile;
  DeviceStats device;
  uint64_t allocation_group_bytes = 0;  // a group's size (the capacity when one group)
  uint64_t group_metadata_bytes = 0;
  std::vector<BlockRange> metadata;  // in units: the filesystem's own structures
  std::map<std::string, FileLayout> files;  // by path, as in stats.json
};

// {"schema_version": 1, "profile": ..., "device": {...}, "files": {"/path":
// {"inode", "size", "extents": [[logical, physical, length, unwritten], ...]}}}
nlohmann::json to_json(const DeviceLayout& layout);

}  // namespace mimicfs
