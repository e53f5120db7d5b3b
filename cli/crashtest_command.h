// SPDX-License-Identifier: Apache-2.0
// `mimicfs crashtest`: power cuts at many points of a workload, each checked.
//
// A dry run on a fresh volume counts the operations the workload makes that
// crash points can select (faultable operations matching --op and --path) and
// checks that the checker passes without a crash. Then, for each point, on a
// fresh volume: the setup command runs, a crash rule is added for the Nth
// matching operation (before or after it, restart=freeze), the workload runs;
// once the power is gone its operations wait and the runner kills it and every
// process using the mount (a server it started), the volume is restarted, and
// the checker runs. The points are spread over the operations, one drawn in each
// of N equal spans from the seed, so a run is reproducible. Every command runs
// with `sh -c`, MIMICFS_MOUNT set to the mount and MIMICFS_CRASHTEST_DIR to a
// directory outside it that survives the crash (where a workload records what
// it was told is durable, for the checker).
//
// A checker may print a line `lost=N`: how much a workload allowed to lose its
// last transactions lost at that point (SQLite's WAL with synchronous=NORMAL).
// The point's line, the summary and --json report it.
//
// Prints a line per point and a summary; exits 0 when every check passed, 1
// when one failed (the rule to reproduce it is printed), 2 for bad input.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "cli/command_options.h"
#include "engine/profile/profile.h"
#include "engine/time/emulated_clock.h"

namespace mimicfs {

struct CrashTestOptions {
  Profile profile;
  std::string setup;     // shell command run before each workload, never crashed ("": none)
  std::string workload;  // shell command
  std::string check;     // shell command: 0 when the volume is as it must be
  unsigned points = 20;
  uint64_t seed = 1;
  std::string ops = "*";      // the fault-rule op= of the operations points are chosen among
  std::string path = "*";     // and their path=
  std::string when = "both";  // before, after, or both (drawn per point)
  // What happens at a point: "power" (a cut: the world ends, the volume
  // restarts) or "server-restart" (an NFS server's restart before the
  // operation: the workload goes on, through the grace period).
  std::string event = "power";
  // --writeback P: at each power cut a fraction P of the units of unsynced
  // in-place overwrites persist (torn writes), drawn from the point's seed,
  // as `ctl crash writeback=P` does. Unset: none persist.
  std::optional<double> writeback;
  bool keep_logs = false;             // keep every point's log, not only the failed ones'
  std::chrono::seconds timeout{120};  // per command
  std::string json_out;               // results as JSON ("": none)
};

int run_crash_test(const CrashTestOptions& options);

// `mimicfs crashtest`: its options; once parsed, run_crash_test.
void add_crashtest_command(CLI::App& app, CommandAction& action);

}  // namespace mimicfs
