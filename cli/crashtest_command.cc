// SPDX-License-Identifier: Apache-2.0
#include "cli/crashtest_command.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string_view>
#include <vector>

#include "engine/layers/fault_injector.h"
#include "host/child_process.h"
#include "host/exit_status.h"
#include "host/mount_checks.h"
#include "host/mount_users.h"
#include "host/temporary_mount.h"

namespace mimicfs {
namespace {

struct Point {
  uint64_t nth = 0;
  std::string when;  // before or after
};

struct Outcome {
  Point point;
  bool reached = false;   // the crash fired
  std::string operation;  // what it fired on
  int workload_status = 0;
  int check_status = 0;
  bool check_timed_out = false;
  bool workload_timed_out = false;
  std::optional<uint64_t> lost;  // the checker's lost=N
  std::string log;  // the commands' output
};

int usage(const std::string& message) {
  fmt::print(stderr, "mimicfs crashtest: {}\n", message);
  return kExitUsage;
}

// The last `lines` lines of a file, indented, for a failure report.
std::string tail_of(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += "    | " + all[i] + "\n";
  }
  return out;
}

// Reaps what the workload left that ended (this process is their subreaper):
// a zombie still answers kill(pid, 0), as a server's lock file check asks.
void reap_orphans() {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

// stats.json, or nullopt when it cannot be read.
std::optional<nlohmann::json> read_stats(const TemporaryMount& mount) {
  try {
    return nlohmann::json::parse(mount.stats());
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

bool power_cut(const nlohmann::json& stats) { return stats["power"].value("crashes", 0) > 0; }

// One volume's life: setup, (rule,) workload, (restart,) check. The workload
// and checker's output go to `log`.
struct Run {
  bool mounted = false;
  std::string error;  // set when it could not mount or run
  nlohmann::json stats;
  int workload_status = 0;
  bool workload_timed_out = false;
  int check_status = 0;
  bool check_timed_out = false;
  std::optional<uint64_t> lost;  // the checker's last `lost=N` line
};

// The last `lost=N` line a checker printed into `log` from `offset` on.
std::optional<uint64_t> reported_loss(const std::string& log, std::streamoff offset) {
  std::ifstream in(log);
  in.seekg(offset);
  std::optional<uint64_t> lost;
  for (std::string line; std::getline(in, line);) {
    // "lost=N", blanks around it allowed.
    std::string_view text = line;
    const size_t first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) continue;
    text = text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
    if (!text.starts_with("lost=")) continue;
    text.remove_prefix(5);
    uint64_t n = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (error == std::errc{} && end == text.data() + text.size() && !text.empty()) lost = n;
  }
  return lost;
}

Run run_once(const CrashTestOptions& options, const std::string& rule, const std::string& scratch,
             const std::string& log) {
  Run run;
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  std::filesystem::create_directories(scratch, ec);
  auto mount = TemporaryMount::mount(options.profile, LatencyMode{}, {});
  if (!mount) {
    run.error = mount.error();
    return run;
  }
  run.mounted = true;
  setenv("MIMICFS_MOUNT", (*mount)->dir().c_str(), 1);
  setenv("MIMICFS_CRASHTEST_DIR", scratch.c_str(), 1);
  const SpawnOptions spawn{options.timeout, log};
  auto shell = [&](const std::string& command) {
    return spawn_and_wait({"/bin/sh", "-c", command}, spawn);
  };
  if (!options.setup.empty()) {
    const auto setup = shell(options.setup);
    if (!setup || setup->status != 0) {
      run.error = fmt::format("the setup failed (status {})", setup ? setup->status : 127);
    }
  }
  // What the setup made is durable before any crash, as after sync(1).
  if (run.error.empty() && (*mount)->ctl("sync") != 0) run.error = "the volume refused sync";
  if (run.error.empty() && (*mount)->ctl("fault add " + rule) != 0) {
    run.error = "the volume refused the rule " + rule;
  }
  if (run.error.empty()) {
    // The power cut ends the world: the workload, and every process using the
    // mount (a server it started in a session of its own), are killed while
    // their operations wait on the frozen volume, so none acts on the cut.
    bool ended = false;
    auto end_the_world = [&](pid_t group) {
      ended = true;
      if (group > 0) kill(-group, SIGKILL);
      // Scanned again until no new one shows: a process forked between a scan
      // and the kill of its parent (a server's new backend) is found by the next.
      std::vector<pid_t> killed;
      for (int round = 0; round < 10; ++round) {
        std::vector<pid_t> found;
        for (const pid_t pid : descendants_using((*mount)->dir())) {
          if (std::find(killed.begin(), killed.end(), pid) == killed.end()) found.push_back(pid);
        }
        if (found.empty()) break;
        kill_all(found);
        killed.insert(killed.end(), found.begin(), found.end());
      }
      // An operation already past its check when the power went may have landed
      // on the crashed volume (docs/time.md): a second cut drops what it left.
      (void)(*mount)->ctl("crash freeze");
      (void)(*mount)->ctl("restart");  // the waiting operations get EIO; their processes die
      // The workload itself is spawn_and_wait's to reap, with its status.
      std::erase(killed, group);
      if (!wait_until_gone(killed, std::chrono::seconds(30))) {
        run.error = "a process using the mount outlived the power cut by 30 s";
      }
    };
    SpawnOptions watched = spawn;
    // The rule's counts and the crash, read before the second cut and the
    // checker's own operations.
    watched.watch = [&](pid_t group) {
      if (ended) return;
      if (auto stats = read_stats(**mount); stats && power_cut(*stats)) {
        run.stats = std::move(*stats);
        end_the_world(group);
      }
    };
    const auto workload = spawn_and_wait({"/bin/sh", "-c", options.workload}, watched);
    run.workload_status = workload ? workload->status : 127;
    run.workload_timed_out = workload && workload->timed_out;
    if (!ended) {
      if (auto stats = read_stats(**mount)) {
        run.stats = std::move(*stats);
      } else {
        run.error = "stats.json could not be read";
      }
      // A cut the watch did not see: the workload had ended; what it left running has not.
      if (run.error.empty() && power_cut(run.stats)) end_the_world(0);
    }
    // Whatever went wrong above, nothing stays waiting on a frozen volume.
    (void)(*mount)->ctl("restart");
    (void)(*mount)->ctl("fault clear");
    reap_orphans();
    if (run.error.empty() && SignalForwarding::received() == 0) {
      std::error_code ec;
      const auto before = std::filesystem::file_size(log, ec);
      const auto check = shell(options.check);
      run.check_status = check ? check->status : 127;
      run.check_timed_out = check && check->timed_out;
      run.lost = reported_loss(log, ec ? 0 : static_cast<std::streamoff>(before));
    }
  }
  unsetenv("MIMICFS_MOUNT");
  unsetenv("MIMICFS_CRASHTEST_DIR");
  reap_orphans();
  return run;
}

std::vector<Point> choose_points(uint64_t total, const CrashTestOptions& options) {
  std::mt19937_64 random(options.seed);
  std::vector<Point> points;
  const uint64_t count = std::min<uint64_t>(options.points, total);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t first = 1 + i * total / count;
    const uint64_t last = (i + 1) * total / count;  // inclusive
    Point point;
    // Not std::uniform_int_distribution: its draws differ between standard
    // libraries, and a seed must name the same points everywhere.
    point.nth = first + random() % (std::max(first, last) - first + 1);
    point.when = options.when != "both" ? options.when : (random() & 1) ? "after" : "before";
    if (options.event == "server-restart") point.when = "before";  // the rule's only time
    points.push_back(point);
  }
  return points;
}

std::string rule_for(const CrashTestOptions& options, const Point& point) {
  if (options.event == "server-restart") {
    return fmt::format("op={},path={},nth={},server=restart", options.ops, options.path,
                       point.nth);
  }
  std::string rule = fmt::format("op={},path={},nth={},crash={},restart=freeze", options.ops,
                                 options.path, point.nth, point.when);
  // Each point tears its own units: the seed is the run's and the point's.
  if (options.writeback) {
    rule += fmt::format(",writeback={},seed={}", *options.writeback, options.seed + point.nth);
  }
  return rule;
}

// Whether the point's event happened: a power cut, or the server's restart.
bool reached(const CrashTestOptions& options, const nlohmann::json& stats) {
  if (options.event == "server-restart") {
    return stats.contains("server") && stats["server"].value("restarts", 0) > 0;
  }
  return stats["power"].value("crashes", 0) > 0;
}

}  // namespace

int run_crash_test(const CrashTestOptions& options) {
  if (options.workload.empty()) return usage("--workload is required");
  if (options.check.empty()) return usage("--check is required");
  if (options.points == 0) return usage("--points must be at least 1");
  if (options.when != "before" && options.when != "after" && options.when != "both") {
    return usage(fmt::format("--when {}: not before, after or both", options.when));
  }
  if (options.event != "power" && options.event != "server-restart") {
    return usage(fmt::format("--event {}: not power or server-restart", options.event));
  }
  if (options.writeback && !(*options.writeback >= 0 && *options.writeback <= 1)) {
    return usage(fmt::format("--writeback {}: not a fraction from 0 to 1", *options.writeback));
  }
  if (options.writeback && options.event != "power") {
    return usage("--writeback needs --event power: a server's restart loses no write");
  }
  if (options.event == "server-restart" && !options.profile.nfs) {
    return usage(fmt::format("--event server-restart: profile {} has no server (not client.nfs)",
                             options.profile.name));
  }
  // The point rule must parse: --op and --path are the rule's own syntax.
  const std::string counting = fmt::format("op={},path={},latency=1ns", options.ops, options.path);
  FaultInjector parser;
  if (auto added = parser.add(counting); !added) return usage(added.error());
  if (auto why = check_fuse_device(); !why.empty()) return usage(why);

  SignalForwarding forwarding;
  // What the workload leaves running (a server in a session of its own) is
  // reparented here, not to init, so it is reaped as soon as it is killed.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const auto made = make_temporary_directory("mimicfs-crashtest");
  if (!made) return usage("cannot create a scratch directory: " + made.error());
  const std::string work = *made;
  // A database server may run as another user (postgres) and keep its socket there.
  std::filesystem::permissions(work, std::filesystem::perms::owner_all |
                                         std::filesystem::perms::group_exec |
                                         std::filesystem::perms::others_exec);
  const std::string scratch = work + "/durable";
  const auto started = std::chrono::steady_clock::now();

  // The dry run: how many operations can be points, and the checker passes without a crash.
  const std::string dry_log = work + "/dry-run.log";
  Run dry = run_once(options, counting, scratch, dry_log);
  if (!dry.error.empty() || dry.workload_status != 0 || dry.check_status != 0) {
    const std::string why =
        !dry.error.empty() ? dry.error
        : dry.workload_status != 0
            ? fmt::format("the workload fails without a crash (status {})", dry.workload_status)
            : fmt::format("the checker fails without a crash (status {})", dry.check_status);
    fmt::print(stderr, "mimicfs crashtest: {}; its output:\n{}", why, tail_of(dry_log, 10));
    std::error_code ec;
    std::filesystem::remove_all(work, ec);
    return SignalForwarding::received() != 0 ? 128 + SignalForwarding::received() : kExitFailure;
  }
  uint64_t total = 0;
  for (const auto& rule : dry.stats["faults"]) total += rule["matched"].get<uint64_t>();
  if (total == 0) {
    fmt::print(stderr, "mimicfs crashtest: the workload made no operation matching op={} path={}\n",
               options.ops, options.path);
    std::error_code ec;
    std::filesystem::remove_all(work, ec);
    return kExitFailure;
  }
  const std::vector<Point> points = choose_points(total, options);
  fmt::print("crashtest: {} on {}: {} matching operations, {} points, seed {}\n", options.workload,
             options.profile.name, total, points.size(), options.seed);

  std::vector<Outcome> outcomes;
  unsigned failed = 0, unreached = 0;
  for (size_t i = 0; i < points.size() && SignalForwarding::received() == 0; ++i) {
    const std::string log = fmt::format("{}/point-{}.log", work, i + 1);
    const std::string rule = rule_for(options, points[i]);
    Run run = run_once(options, rule, scratch, log);
    Outcome outcome{points[i]};
    outcome.log = log;
    if (!run.error.empty()) {
      fmt::print("point {:>3}/{}  {:>8} {:<6} error: {}\n", i + 1, points.size(), points[i].nth,
                 points[i].when, run.error);
      ++failed;
      outcomes.push_back(outcome);
      continue;
    }
    outcome.reached = reached(options, run.stats);
    outcome.operation = options.event == "server-restart"
                            ? std::string("(server restart)")
                            : run.stats["power"].value("last_crash", "");
    outcome.workload_status = run.workload_status;
    outcome.check_status = run.check_status;
    outcome.check_timed_out = run.check_timed_out;
    outcome.workload_timed_out = run.workload_timed_out;
    outcome.lost = run.lost;
    // What the crash fired on, without the rule's text.
    std::string operation = outcome.operation;
    if (const size_t colon = operation.rfind("\": "); colon != std::string::npos) {
      operation = operation.substr(colon + 3);
    }
    operation = operation.substr(0, operation.rfind(" ("));  // the when column says it
    const bool ok = outcome.check_status == 0;
    fmt::print("point {:>3}/{}  {:>8} {:<6} {:<40} {}{}{}\n", i + 1, points.size(), points[i].nth,
               points[i].when, outcome.reached ? operation : "(not reached)",
               ok ? "check ok"
                  : fmt::format("CHECK FAILED (status {}{})", outcome.check_status,
                                outcome.check_timed_out ? ", timed out" : ""),
               outcome.lost ? fmt::format("  lost={}", *outcome.lost) : "",
               outcome.workload_timed_out ? " (the workload timed out)" : "");
    if (!outcome.reached) ++unreached;
    if (!ok) {
      ++failed;
      fmt::print(
          "  reproduce: the setup, then `mimicfs ctl MOUNT fault add '{}'`, the "
          "workload; {}the check (profile {})\n  output ({}):\n{}",
          rule,
          options.event == "power"
              ? "at the cut kill every process using the mount, `ctl restart`, "
              : "",
          options.profile.name, log, tail_of(log, 8));
    }
    outcomes.push_back(outcome);
    std::fflush(stdout);  // a line per point as it ends, into a log file too
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  fmt::print("crashtest: {} points, {} failed, {} not reached, {:.1f} s\n", outcomes.size(), failed,
             unreached, seconds);
  // What the checker reported lost, over the points where it said.
  uint64_t lost_points = 0, lost_total = 0, lost_max = 0, lost_nonzero = 0;
  for (const Outcome& o : outcomes) {
    if (!o.lost) continue;
    ++lost_points;
    lost_total += *o.lost;
    lost_max = std::max(lost_max, *o.lost);
    if (*o.lost > 0) ++lost_nonzero;
  }
  if (lost_points > 0) {
    fmt::print("crashtest: lost {} in all at {} of the {} points that reported it (at most {})\n",
               lost_total, lost_nonzero, lost_points, lost_max);
  }
  // A workload that never reaches its points tested nothing: it does not pass.
  const bool none_reached = !outcomes.empty() && unreached == outcomes.size();
  if (none_reached) {
    fmt::print(
        "crashtest: no point was reached: the workload does not make the operations "
        "it made in the dry run\n");
  }

  if (!options.json_out.empty()) {
    nlohmann::json results = nlohmann::json::array();
    for (const Outcome& o : outcomes) {
      results.push_back({{"nth", o.point.nth},
                         {"when", o.point.when},
                         {"rule", rule_for(options, o.point)},
                         {"reached", o.reached},
                         {"operation", o.operation},
                         {"workload_status", o.workload_status},
                         {"check_status", o.check_status},
                         {"lost", o.lost ? nlohmann::json(*o.lost) : nlohmann::json(nullptr)}});
    }
    std::ofstream(options.json_out) << nlohmann::json{{"profile", options.profile.name},
                                                      {"seed", options.seed},
                                                      {"operations", total},
                                                      {"failed", failed},
                                                      {"not_reached", unreached},
                                                      {"seconds", seconds},
                                                      {"writeback", options.writeback
                                                                        ? nlohmann::json(*options.writeback)
                                                                        : nlohmann::json(nullptr)},
                                                      {"lost", {{"points", lost_points},
                                                                {"nonzero", lost_nonzero},
                                                                {"total", lost_total},
                                                                {"max", lost_max}}},
                                                      {"points", results}}
                                           .dump(2)
                                    << "\n";
  }
  // The logs stay when a check failed, for the report above, or when asked.
  std::error_code ec;
  if (options.keep_logs) {
    fmt::print("crashtest: every point's log is in {}\n", work);
  } else if (failed == 0) {
    std::filesystem::remove_all(work, ec);
  }
  if (SignalForwarding::received() != 0) return 128 + SignalForwarding::received();
  return failed == 0 && !none_reached ? kExitOk : kExitFailure;
}

void add_crashtest_command(CLI::App& app, CommandAction& action) {
  struct Choice {
    CrashTestOptions options;
    ProfileChoice profile;
    unsigned timeout_seconds = 120;
  };
  auto choice = std::make_shared<Choice>();
  CrashTestOptions& options = choice->options;
  CLI::App* command = app.add_subcommand(
      "crashtest", "Cut the power at many points of a workload, check the volume after each");
  add_profile_options(*command, choice->profile);
  command->add_option("--setup", options.setup,
                      "Shell command run on each fresh volume first, never crashed");
  command->add_option("--workload", options.workload, "Shell command to crash")->required();
  command
      ->add_option("--check", options.check,
                   "Shell command run after the restart: exit 0 when all is well")
      ->required();
  command->add_option("--points", options.points, "Crash points (default 20)");
  command->add_option("--seed", options.seed, "Seed of the points (default 1)");
  command->add_option("--op", options.ops,
                      "Operations points are chosen among, as a fault rule's op= (default *)");
  command->add_option("--path", options.path,
                      "... and their path glob, as a fault rule's path= (default *)");
  command->add_option("--when", options.when, "before, after or both (default: drawn per point)")
      ->check(CLI::IsMember({"before", "after", "both"}));
  command
      ->add_option("--event", options.event,
                   "What happens at each point: power (a power cut, the default) or "
                   "server-restart (NFS profiles: the server restarts, the workload goes on)")
      ->check(CLI::IsMember({"power", "server-restart"}));
  command->add_option("--timeout", choice->timeout_seconds,
                      "Seconds each command may run (default 120)");
  command->add_option("--json", options.json_out, "Write the results here as JSON");
  command
      ->add_option("--writeback", options.writeback,
                   "At each power cut a fraction P (0 to 1) of the units of unsynced in-place "
                   "overwrites persist, torn writes drawn from --seed and the point")
      ->check(CLI::Range(0.0, 1.0));
  command->add_flag("--keep-logs", options.keep_logs,
                    "Keep every point's log (point-N.log in the directory printed), not only "
                    "the failed points'");
  command->callback([choice, &action] {
    action = [choice] {
      auto profile = chosen_profile(choice->profile);
      if (!profile) return usage_error(profile.error());
      CrashTestOptions options = choice->options;
      options.profile = std::move(*profile);
      options.timeout = std::chrono::seconds(choice->timeout_seconds);
      return run_crash_test(options);
    };
  });
}

}  // namespace mimicfs
