// SPDX-License-Identifier: Apache-2.0
// RequestCredentials: the Credentials (engine/fs/caller.h) of the program a
// FUSE request comes from. The kernel passes its filesystem uid and gid and
// its thread id; its supplementary groups and capabilities are read from
// /proc/TID/task/TID/status (as libfuse's fuse_req_getgroups reads the
// groups), once, and only when a set-ID rule asks; whether it is dying, each
// time a frozen volume's wait asks.
#pragma once

#include <sys/types.h>

#include <optional>
#include <vector>

#include "engine/fs/caller.h"

namespace mimicfs {

class RequestCredentials : public Credentials {
 public:
  RequestCredentials(uid_t uid, gid_t gid, pid_t tid) : uid_(uid), gid_(gid), tid_(tid) {}

  uint32_t uid() const override { return uid_; }
  bool in_group(uint32_t gid) const override;
  bool has_fsetid() const override;
  bool has_sys_admin() const override;
  // SIGKILL pending for the thread, or the thread gone. The kernel adds
  // SIGKILL to every thread of a process that SIGKILL or a fatal signal that
  // dumps no core ends (complete_signal): kill -9, SIGTERM and SIGINT left at
  // their default, what a CI job's timeout sends. A core-dumping signal's
  // process is not seen as dying here.
  bool dying() const override;

 private:
  struct Status {
    std::vector<gid_t> groups;
    uint64_t capabilities = 0;  // CapEff
  };
  // The caller's status; when it is gone (or no caller: tid 0), its groups
  // are its gid alone and root alone holds capabilities.
  const Status& status() const;

  const uid_t uid_;
  const gid_t gid_;
  const pid_t tid_;
  mutable std::optional<Status> status_;
};

}  // namespace mimicfs
