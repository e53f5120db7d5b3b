// SPDX-License-Identifier: Apache-2.0
// PowerCut: how the power goes, for `ctl crash` and a crash rule alike.
#pragma once

#include <cstdint>
#include <string>

namespace mimicfs {

struct PowerCut {
  bool hold = false;     // the volume stays off until `ctl restart`
  bool freeze = false;   // held, and operations wait for the restart instead of EIO
  double writeback = 0;  // the fraction of unsynced in-place overwrites written back first
  uint64_t seed = 0;     // of that draw
  std::string cause;     // "ctl", or the rule and the operation it fired on
};

}  // namespace mimicfs
