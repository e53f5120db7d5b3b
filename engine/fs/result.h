// SPDX-License-Identifier: Apache-2.0
// Result<T>: what every engine operation returns, a value or an errno.
//
// The engine speaks POSIX errno values (positive, as in <errno.h>) because the
// backends it emulates are POSIX filesystems; the FUSE adapter hands them to
// fuse_reply_err unchanged.
#pragma once

#include <cerrno>
#include <expected>
#include <string>

namespace mimicfs {

// A positive errno value, e.g. Errno{ENOSPC}.
struct Errno {
  int value = 0;
  friend bool operator==(Errno, Errno) = default;
};

template <typename T>
using Result = std::expected<T, Errno>;

// Shorthand for returning an error: `return fail(ENOENT);`
inline std::unexpected<Errno> fail(int errno_value) { return std::unexpected(Errno{errno_value}); }

// "ENOSPC", or "E<number>" for values glibc has no name for.
std::string errno_name(int errno_value);

}  // namespace mimicfs
