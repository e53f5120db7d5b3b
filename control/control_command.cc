// SPDX-License-Identifier: Apache-2.0
#include "control/control_command.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/layers/fault_injector.h"
#include "engine/time/duration.h"

namespace mimicfs {

namespace {

// "crash" options: hold or freeze, writeback=P, seed=S, in any order. The rule parser
// checks the numbers, as it does for a crash rule's same keys.
std::expected<ControlCommand, std::string> parse_crash(std::string_view options) {
  CrashCommand crash;
  crash.cut.cause = "ctl";
  std::string rule = "crash=after";
  while (!options.empty()) {
    const size_t start = options.find_first_not_of(' ');
    if (start == std::string_view::npos) break;
    options.remove_prefix(start);
    const std::string_view word = options.substr(0, options.find(' '));
    options.remove_prefix(word.size());
    if (word == "--client") {
      crash.client = true;
    } else if (word == "hold" || word == "freeze") {
      crash.cut.hold = true;
      crash.cut.freeze = crash.cut.freeze || word == "freeze";
    } else if (word.starts_with("writeback=") || word.starts_with("seed=")) {
      rule += "," + std::string(word);
    } else {
      return std::unexpected(
          fmt::format("crash: unknown option \"{}\" (hold, freeze, writeback=P, seed=S)", word));
    }
  }
  if (crash.client && (crash.cut.freeze || rule != "crash=after")) {
    return std::unexpected(
        "crash --client: only hold goes with it (a client's crash has no freeze, writeback "
        "or seed)");
  }
  auto cut = FaultInjector::power_cut_of(rule);
  if (!cut) return std::unexpected(cut.error());
  crash.cut.writeback = cut->writeback;
  crash.cut.seed = cut->seed;
  return crash;
}

// "server restart" options: --grace DURATION (or --grace=DURATION).
std::expected<ControlCommand, std::string> parse_server_restart(std::string_view options) {
  ServerCommand restart{ServerCommand::Action::kRestart, {}};
  while (!options.empty() && options.front() == ' ') options.remove_prefix(1);
  if (options.empty()) return restart;
  constexpr std::string_view kGrace = "--grace";
  if (!options.starts_with(kGrace)) {
    return std::unexpected(
        fmt::format("server restart: unknown option \"{}\" (--grace DURATION)", options));
  }
  options.remove_prefix(kGrace.size());
  if (options.empty()) return std::unexpected("server restart: --grace needs a duration");
  if (options.front() != ' ' && options.front() != '=') {
    return std::unexpected(
        fmt::format("server restart: unknown option \"--grace{}\" (--grace DURATION)", options));
  }
  options.remove_prefix(1);
  while (!options.empty() && options.front() == ' ') options.remove_prefix(1);
  // 0 (with a unit) is no grace period at all: what a duration elsewhere refuses.
  const size_t digits = options.find_first_not_of("0123456789");
  const bool zero = digits > 0 && options.substr(0, digits).find_first_not_of('0') ==
                                      std::string_view::npos;
  auto ns = parse_duration_ns(zero ? "1" + std::string(options.substr(
                                               std::min(digits, options.size())))
                                   : std::string(options));
  if (!ns) {
    return std::unexpected(fmt::format("server restart: --grace: \"{}\" is not a duration like "
                                       "10s ({})", options, ns.error()));
  }
  constexpr uint64_t kMaxGraceNs = uint64_t{3600} * 1'000'000'000;  // server.grace_ns's bound
  if (*ns > kMaxGraceNs) {
    return std::unexpected(
        fmt::format("server restart: --grace {} is longer than an hour", options));
  }
  restart.grace_ns = zero ? 0 : *ns;
  return restart;
}

}  // namespace

std::expected<ControlCommand, std::string> parse_control_command(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text == "reset") return ResetCommand{};
  if (text == "crash" || text.starts_with("crash ")) return parse_crash(text.substr(5));
  if (text == "restart") return RestartCommand{};
  if (text == "sync") return SyncCommand{};
  if (text == "settle") return SettleCommand{};
  if (text == "fault clear") return FaultClearCommand{};
  if (text == "server down") return ServerCommand{ServerCommand::Action::kDown, {}};
  if (text == "server up") return ServerCommand{ServerCommand::Action::kUp, {}};
  if (text == "server restart" || text.starts_with("server restart ")) {
    return parse_server_restart(text.substr(std::string_view("server restart").size()));
  }
  if (constexpr std::string_view kFaultAdd = "fault add "; text.starts_with(kFaultAdd)) {
    const std::string_view rule = text.substr(kFaultAdd.size());
    FaultInjector check;  // the same parser the volume runs
    if (auto added = check.add(rule); !added) return std::unexpected(added.error());
    return FaultAddCommand{std::string(rule)};
  }
  if (constexpr std::string_view kLatency = "latency "; text.starts_with(kLatency)) {
    auto mode = LatencyMode::parse(text.substr(kLatency.size()));
    if (!mode) return std::unexpected(mode.error());
    return LatencyCommand{*mode};
  }
  if (constexpr std::string_view kTimeAdvance = "time advance "; text.starts_with(kTimeAdvance)) {
    auto ns = parse_duration_ns(text.substr(kTimeAdvance.size()));
    if (!ns) return std::unexpected("time advance: " + ns.error());
    return TimeAdvanceCommand{*ns};
  }
  if (constexpr std::string_view kClientMount = "client mount "; text.starts_with(kClientMount)) {
    const std::string_view path = text.substr(kClientMount.size());
    if (!path.starts_with('/')) {
      return std::unexpected(fmt::format("client mount: \"{}\" is not an absolute path", path));
    }
    return ClientMountCommand{std::string(path)};
  }
  return std::unexpected(fmt::format("unknown command \"{}\" (known: {})", text, kControlCommands));
}

}  // namespace mimicfs
