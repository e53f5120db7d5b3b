#include "fusefs/control_command.h"

#include <fmt/format.h>

#include "backends/fault_injector.h"

namespace mimicfs {

std::expected<ControlCommand, std::string> parse_control_command(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text == "reset") return ResetCommand{};
  if (text == "crash") return CrashCommand{};
  if (text == "crash hold") return CrashCommand{.hold = true};
  if (text == "restart") return RestartCommand{};
  if (text == "sync") return SyncCommand{};
  if (text == "settle") return SettleCommand{};
  if (text == "fault clear") return FaultClearCommand{};
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
  return std::unexpected(fmt::format("unknown command \"{}\" (known: {})", text, kControlCommands));
}

}  // namespace mimicfs
