// SPDX-License-Identifier: Apache-2.0
#include "fusefs/request_credentials.h"

#include <linux/capability.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

namespace mimicfs {
namespace {

// The caller thread's /proc status file.
std::string status_path(pid_t tid) { return fmt::format("/proc/{}/task/{}/status", tid, tid); }

// Calls `field(key, rest)` for each line of an open status file ("CapEff:",
// then the rest of the line to parse); stops early when it returns true.
template <typename Field>
void for_each_field(std::istream& in, Field&& field) {
  for (std::string line; std::getline(in, line);) {
    std::istringstream rest(line);
    std::string key;
    rest >> key;
    if (field(key, rest)) return;
  }
}

}  // namespace

bool RequestCredentials::in_group(uint32_t gid) const {
  if (gid == gid_) return true;
  const std::vector<gid_t>& groups = status().groups;
  return std::find(groups.begin(), groups.end(), gid) != groups.end();
}

bool RequestCredentials::has_fsetid() const { return (status().capabilities >> CAP_FSETID) & 1; }

bool RequestCredentials::has_sys_admin() const {
  return (status().capabilities >> CAP_SYS_ADMIN) & 1;
}

const RequestCredentials::Status& RequestCredentials::status() const {
  if (status_) return *status_;
  status_.emplace();
  status_->capabilities = uid_ == 0 ? ~uint64_t{0} : 0;
  if (tid_ <= 0) return *status_;
  std::ifstream in(status_path(tid_));
  for_each_field(in, [this](const std::string& key, std::istringstream& fields) {
    if (key == "Groups:") {
      gid_t gid;
      while (fields >> gid) status_->groups.push_back(gid);
    } else if (key == "CapEff:") {
      unsigned long long mask = 0;
      if (fields >> std::hex >> mask) status_->capabilities = mask;
    }
    return false;
  });
  return *status_;
}

bool RequestCredentials::dying() const {
  if (tid_ <= 0) return false;
  const std::string path = status_path(tid_);
  std::ifstream in(path);
  // Gone (ENOENT): nobody waits for the answer. Unreadable for another
  // reason (/proc mounted hidepid, out of descriptors): not known to be dying.
  if (!in) return ::access(path.c_str(), F_OK) != 0 && errno == ENOENT;
  constexpr uint64_t kKill = uint64_t{1} << (SIGKILL - 1);
  bool killed = false;
  for_each_field(in, [&killed](const std::string& key, std::istringstream& fields) {
    // The thread's own pending signals, and its process's.
    unsigned long long mask = 0;
    if (key == "SigPnd:" || key == "ShdPnd:") killed = fields >> std::hex >> mask && (mask & kKill);
    return killed;
  });
  return killed;
}

}  // namespace mimicfs
