// SPDX-License-Identifier: Apache-2.0
// Caller: the program an operation runs for, as the emulated clock tells
// programs apart (timelines.h): operations of one caller follow each other,
// those of two callers may overlap. And who that program is, as far as the
// set-ID rules ask (Credentials).
//
// The FUSE adapter sets it for the thread that serves a request (the calling
// thread's id the kernel passes, FUSE's pid); every Work made on that thread
// carries it (work.h). 0, the default, is the volume's own work, a test's or a
// request the kernel makes on no program's behalf: it starts after everything
// done, and every caller's next operation starts after it (timelines.h).
#pragma once

#include <cstdint>

namespace mimicfs {

// What Linux's set-ID and xattr rules ask of a caller: who it is, whether it
// may keep a file's S_ISGID bit (in_group_or_capable, fs/inode.c), whether it
// sees trusted.* xattrs.
class Credentials {
 public:
  virtual ~Credentials() = default;
  // The caller's filesystem uid.
  [[nodiscard]] virtual uint32_t uid() const = 0;
  // `gid` is the caller's filesystem gid or one of its supplementary groups.
  [[nodiscard]] virtual bool in_group(uint32_t gid) const = 0;
  // The caller holds CAP_FSETID.
  [[nodiscard]] virtual bool has_fsetid() const = 0;
  // The caller holds CAP_SYS_ADMIN (trusted.* xattrs are its alone).
  [[nodiscard]] virtual bool has_sys_admin() const = 0;
  // The caller is dying (a fatal signal is pending): it ends as soon as its
  // operation returns and sees no answer, so an operation waiting on a frozen
  // volume stops waiting for it. Asked anew each time.
  [[nodiscard]] virtual bool dying() const { return false; }
};

class CallerScope {
 public:
  // Operations on this thread run for `caller`, with `credentials` (not
  // owned; may be null: no caller, or one the kernel vouches for), until the
  // scope ends.
  explicit CallerScope(uint32_t caller, const Credentials* credentials = nullptr)
      : saved_(current_), saved_credentials_(credentials_) {
    current_ = caller;
    credentials_ = credentials;
  }
  ~CallerScope() {
    current_ = saved_;
    credentials_ = saved_credentials_;
  }
  CallerScope(const CallerScope&) = delete;
  CallerScope& operator=(const CallerScope&) = delete;

  static uint32_t current() { return current_; }
  // Null outside a request: the engine treats it as a caller in the file's
  // group with CAP_FSETID (it keeps what it can).
  static const Credentials* credentials() { return credentials_; }

 private:
  static inline thread_local uint32_t current_ = 0;
  static inline thread_local const Credentials* credentials_ = nullptr;
  const uint32_t saved_;
  const Credentials* const saved_credentials_;
};

}  // namespace mimicfs
