// SPDX-License-Identifier: Apache-2.0
// WallClock: where file timestamps (atime, mtime, ctime) come from.
//
// Passed in, never read from a global, so unit tests can pin timestamps.
// Emulated operation cost is a different concept and does not live here.
#pragma once

#include <ctime>

namespace mimicfs {

class WallClock {
 public:
  virtual ~WallClock() = default;
  virtual timespec now() const = 0;
};

class SystemWallClock final : public WallClock {
 public:
  timespec now() const override {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts;
  }
};

}  // namespace mimicfs
