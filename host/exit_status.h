// SPDX-License-Identifier: Apache-2.0
// The command line's exit statuses, the same for every subcommand.
#pragma once

namespace mimicfs {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // something failed at run time
inline constexpr int kExitUsage = 2;    // bad arguments or bad input (profile, mountpoint, device)

}  // namespace mimicfs
