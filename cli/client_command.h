// SPDX-License-Identifier: Apache-2.0
// `mimicfs mount --client-of SERVER DIR`: mounts DIR as another NFS client of
// the volume mounted on SERVER. The daemon serving SERVER serves DIR too
// (Daemon, ctl `client mount DIR`): one volume, one emulated server, a client
// per mount, so what one client does reaches the others as it would on NFS.
#pragma once

#include <string>

namespace mimicfs {

// Checks both paths, asks SERVER's daemon to mount DIR, and returns an exit
// status: kExitUsage after one line naming what is wrong (SERVER is not a
// mimicfs mount, or not an NFS client's; DIR cannot be a mountpoint),
// kExitFailure when the daemon could not mount it (its log says why).
int mount_client_of(const std::string& server, const std::string& mountpoint);

}  // namespace mimicfs
