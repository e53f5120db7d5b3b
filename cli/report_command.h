// SPDX-License-Identifier: Apache-2.0
// `mimicfs report MOUNT --out FILE.svg`: a picture of the emulated device, each
// file's extents as coloured runs along it, with a legend and the fragmentation
// figures, drawn from MOUNT/.mimicfs/layout.json. The 20 files ranked first
// (--rank extents|allocated) have colours of their own, the rest one, "other".
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command_options.h"

namespace mimicfs {

// Which files get colours of their own: those with the most extents, or the
// most allocated bytes.
enum class ReportRanking { kExtents, kAllocated };

// The SVG for a layout.json document.
std::string render_layout_svg(const nlohmann::json& layout,
                              ReportRanking ranking = ReportRanking::kExtents);

// Writes the picture of a mount; an exit status (exit_status.h).
int write_report(const std::string& mountpoint, const std::string& out,
                 ReportRanking ranking = ReportRanking::kExtents);

void add_report_command(CLI::App& app, CommandAction& action);

}  // namespace mimicfs
