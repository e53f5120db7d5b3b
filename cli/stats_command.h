// SPDX-License-Identifier: Apache-2.0
// `mimicfs stats`: a mounted volume's .mimicfs/stats.json as tables that fit
// the terminal, or as JSON.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "cli/command_options.h"

namespace mimicfs {

// What `mimicfs stats` prints of the volume.
struct StatsView {
  std::string path;   // only this file (inside the mount, absolute or relative to it)
  // The stats.json document; with --sort, --top or --by-dir, also the table's
  // lines in its order ("rows"), and with --top only those files.
  bool json = false;
  // The file lines' order: name, or largest first by size, allocated, extents,
  // emulated or unsynced.
  std::string sort = "name";
  bool sort_given = false;    // --sort was given (--sort name too: --json adds the rows)
  size_t top = 0;             // only the first N lines, the rest summed on one (0: all)
  bool by_directory = false;  // a line per directory instead of per file
  size_t width = 0;           // columns; 0: the terminal's, 100 when not a terminal
  bool wide = false;          // no limit: every column, whole paths
};

// Prints MOUNT/.mimicfs/stats.json as tables (operations, device, files with a
// totals line), or as JSON. Returns an exit status.
int print_stats(const std::string& mountpoint, const StatsView& view);

void add_stats_command(CLI::App& app, CommandAction& action);

}  // namespace mimicfs
