// SPDX-License-Identifier: Apache-2.0
// The processes using a mount, found in /proc as fuser(1) -m finds them: a
// working or root directory, an open file, or a mapped file under it. What a
// power cut ends, for `mimicfs crashtest`.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace mimicfs {

// Every descendant of this process using `mount_dir` (which /proc names the
// same way). A descendant orphaned on the way (a server started in a session
// of its own) counts when this process is its subreaper (PR_SET_CHILD_SUBREAPER).
std::vector<pid_t> descendants_using(const std::string& mount_dir);

// SIGKILLs `processes`; what this one may not signal is left.
void kill_all(const std::vector<pid_t>& processes);

// Waits until none of `processes` is left, at most `limit`; false when one
// still is then. A zombie is left until its parent reaps it (kill(pid, 0)
// still finds it); the children of this process are reaped here, so a runner
// that is the subreaper of what it starts (PR_SET_CHILD_SUBREAPER) need not
// wait for init.
bool wait_until_gone(const std::vector<pid_t>& processes, std::chrono::milliseconds limit);

}  // namespace mimicfs
