// SPDX-License-Identifier: Apache-2.0
#include "engine/stats/layout.h"

namespace mimicfs {

nlohmann::json to_json(const DeviceLayout& layout) {
  nlohmann::json j;
  j["schema_version"] = DeviceLayout::kSchemaVersion;
  j["profile"] = layout.profile;
  j["device"] = {
      {"allocation_unit", layout.device.allocation_unit},
      {"capacity_bytes", layout.device.capacity_bytes},
      {"allocation_group_bytes", layout.allocation_group_bytes},
      {"group_metadata_bytes", layout.group_metadata_bytes},
      {"allocated_bytes", layout.device.allocated_bytes},
      {"metadata_bytes", layout.device.metadata_bytes},
      {"free_extents", layout.device.free_extents},
      {"largest_free_extent_bytes", layout.device.largest_free_extent_bytes},
  };
  nlohmann::json metadata = nlohmann::json::array();
  for (const BlockRange& run : layout.metadata) metadata.push_back({run.start, run.length});
  j["device"]["metadata_extents"] = std::move(metadata);
  j["files"] = nlohmann::json::object();
  for (const auto& [path, file] : layout.files) {
    nlohmann::json extents = nlohmann::json::array();
    for (const Extent& e : file.extents) {
      extents.push_back({e.logical, e.physical, e.length, e.unwritten ? 1 : 0});
    }
    j["files"][path] = {{"inode", file.inode}, {"size", file.size}, {"extents", extents}};
  }
  return j;
}

}  // namespace mimicfs
