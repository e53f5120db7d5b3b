// `mimicfs stats` and `mimicfs ctl`: clients of a mounted volume's .mimicfs/ files.
#pragma once

#include <string>
#include <vector>

namespace mimicfs {

// Prints MOUNT/.mimicfs/stats.json as tables, or as JSON; `path` (inside the
// mount, absolute or relative to it) narrows the files to one. Returns an exit status.
int print_stats(const std::string& mountpoint, const std::string& path, bool json);

// Writes one command to MOUNT/.mimicfs/ctl. Returns an exit status.
int send_control(const std::string& mountpoint, const std::vector<std::string>& words);

}  // namespace mimicfs
