// SPDX-License-Identifier: Apache-2.0
// TemporaryMount: a volume mounted on a new directory under $TMPDIR (/tmp
// when it is unset) by a background `mimicfs mount` of this binary, for `run`
// and `crashtest`. The
// destructor unmounts it (lazily when something left it busy) and removes the
// directory and the mount's log.
#pragma once

#include <expected>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/profile/profile.h"
#include "engine/time/emulated_clock.h"

namespace mimicfs {

// A new directory `$TMPDIR/PREFIX.XXXXXX` (/tmp when TMPDIR is unset or
// empty), as mktemp(1) makes one; on failure one line saying why.
std::expected<std::string, std::string> make_temporary_directory(std::string_view prefix);

class TemporaryMount {
 public:
  // Mounts `profile` with the latency mode and fault rules, file contents
  // under `data_dir` when it is not empty, and `mount_options` (words of
  // `mimicfs mount`, already checked). The mount logs to `log_file`, which
  // stays, or else to a file beside the directory that goes with it. On
  // failure one line
  // saying why (with the mount log's last line), and nothing is left mounted;
  // an interruption by a signal says so (SignalForwarding::received()).
  static std::expected<std::unique_ptr<TemporaryMount>, std::string> mount(
      const Profile& profile, const LatencyMode& latency, const std::vector<std::string>& faults,
      const std::string& data_dir = "", const std::vector<std::string>& mount_options = {},
      const std::string& log_file = "");
  // Mounts another NFS client of the volume mounted on `server` on a new
  // directory (`mimicfs mount --client-of`): the daemon of `server` serves it.
  static std::expected<std::unique_ptr<TemporaryMount>, std::string> client_of(
      const std::string& server);
  ~TemporaryMount();
  TemporaryMount(const TemporaryMount&) = delete;
  TemporaryMount& operator=(const TemporaryMount&) = delete;

  const std::string& dir() const { return dir_; }
  // .mimicfs/stats.json, as text ("" when it cannot be read).
  std::string stats() const;
  // Writes one command to .mimicfs/ctl: 0, or the errno of the write.
  int ctl(std::string_view command) const;

 private:
  TemporaryMount(std::string dir, std::string data_dir, std::string own_log)
      : dir_(std::move(dir)), data_dir_(std::move(data_dir)), own_log_(std::move(own_log)) {}
  std::string dir_;
  std::string data_dir_;  // --data-dir, if any: waited for after the unmount
  std::string own_log_;   // the mount's log when it is ours to remove ("": none)
};

}  // namespace mimicfs
