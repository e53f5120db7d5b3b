// `mimicfs report MOUNT --out FILE.svg`: a picture of the emulated device, each
// file's extents as coloured runs along it, with a legend and the fragmentation
// figures, drawn from MOUNT/.mimicfs/layout.json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace mimicfs {

// The SVG for a layout.json document.
std::string render_layout_svg(const nlohmann::json& layout);

// Writes the picture of a mount; an exit status (exit_status.h).
int write_report(const std::string& mountpoint, const std::string& out);

}  // namespace mimicfs
