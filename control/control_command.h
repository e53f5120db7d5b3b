// SPDX-License-Identifier: Apache-2.0
// ControlCommand: the grammar of what is written to MOUNT/.mimicfs/ctl, parsed
// in one place for the volume (ControlFiles::execute) and for `mimicfs ctl`,
// which checks a command before sending it so the reason reaches the terminal.
//
//   reset            zero the operation counters and emulated times
//   crash            a power cut: drop everything not synced; the volume comes
//                    back at once, and descriptors opened before get EIO
//   crash hold       the same, and the volume stays off (every operation EIO)
//   crash [hold|freeze] writeback=P [seed=S]
//                    part of the unsynced in-place overwrites persist first
//   crash --client [hold]
//                    NFS profiles: this mount's client alone crashes and
//                    reboots (with hold: stays down until `restart`); what it
//                    had not written back is lost, its locks stay until its
//                    lease expires or it sends its next request
//   restart          power a held volume on again (and a held client)
//   sync             make everything durable now, as sync(1) on the real filesystem
//   settle           finish deferred work now (background reclaim), as if waited for
//   fault add RULE   add a fault rule (fault_injector.h)
//   fault clear      remove every fault rule
//   latency MODE     virtual, real or real:SCALE
//   time advance D   let D (50ms, 3s...) of idle time pass on the emulated clock:
//                    caches expire, deferred and background work comes due
//   client mount DIR mount another NFS client of this volume's server on DIR
//                    (an absolute path; `mimicfs mount --client-of` sends it)
//   server down      NFS profiles: the server stops answering; requests wait
//                    (hard) or time out (soft, softerr: client.timeout_mode)
//   server up        it answers again; waiting requests go on
//   server restart [--grace D]
//                    the server boots again (ending an outage): its locks are
//                    reclaimed in the grace period D (server.grace_ns), when
//                    opens, new locks, unlinks and renames wait
#pragma once

#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "engine/durability/power_cut.h"
#include "engine/time/emulated_clock.h"

namespace mimicfs {

struct ResetCommand {};
struct CrashCommand {
  PowerCut cut;         // hold, writeback=P, seed=S
  bool client = false;  // --client: the mount's NFS client alone (cut.hold: it stays down)
};
struct RestartCommand {};
struct SyncCommand {};
struct SettleCommand {};
struct FaultClearCommand {};
struct FaultAddCommand {
  std::string rule;  // already checked by FaultInjector::add
};
struct LatencyCommand {
  LatencyMode mode;
};
struct TimeAdvanceCommand {
  uint64_t ns;
};
struct ClientMountCommand {
  std::string mountpoint;  // absolute
};
struct ServerCommand {
  enum class Action { kDown, kUp, kRestart };
  Action action = Action::kDown;
  std::optional<uint64_t> grace_ns;  // restart: --grace, else the profile's
};

using ControlCommand =
    std::variant<ResetCommand, CrashCommand, RestartCommand, SyncCommand, SettleCommand,
                 FaultClearCommand, FaultAddCommand, LatencyCommand, TimeAdvanceCommand,
                 ClientMountCommand, ServerCommand>;

inline constexpr std::string_view kControlCommands =
    "reset, crash [hold|freeze] [writeback=P] [seed=S], crash --client [hold], restart, sync, "
    "settle, fault add RULE, "
    "fault clear, latency virtual|real|real:SCALE, time advance DURATION, client mount DIR, "
    "server down, server up, server restart [--grace DURATION]";

// Parses one command (trailing newlines and spaces ignored). On error, one line
// saying what is wrong: an unknown command, a malformed fault rule or latency mode.
std::expected<ControlCommand, std::string> parse_control_command(std::string_view text);

}  // namespace mimicfs
