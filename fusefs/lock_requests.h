// SPDX-License-Identifier: Apache-2.0
// Lock requests: fcntl (F_GETLK, F_SETLK, F_SETLKW, OFD) and flock locks on
// an NFS client's mount, which the emulated server holds for every client
// (RecordLocks, docs/nfs.md "Locks").
//
// The kernel keeps a FUSE mount's locks to itself unless the INIT reply asks
// for them (FUSE_CAP_POSIX_LOCKS, FUSE_CAP_FLOCK_LOCKS): a local profile asks
// for none, so its locks are the kernel's own, per mount. An NFS client asks
// for both, and keeps those its client.local_lock says in tables of its own,
// since a lock taken revalidates the file even so. The kernel then sends
// no unlock at close: a FLUSH (each close) gives back the closing process's
// locks, a RELEASE (the last close) those set through that open file (OFD and
// flock locks), as fs/fuse/file.c's fuse_setlk leaves it to the daemon.
#pragma once

#define FUSE_USE_VERSION 314
#include <fcntl.h>
#include <fuse_lowlevel.h>

#include "fusefs/fuse_reply.h"

namespace mimicfs {

class FuseAdapter;

// The lock capabilities `adapter`'s INIT reply asks for (of `capable`).
uint64_t lock_capabilities(FuseAdapter& adapter, uint64_t capable);

// F_GETLK.
Reply test_lock(FuseAdapter& adapter, fuse_ino_t inode, fuse_file_info* fi,
                const struct flock& lock);
// F_SETLK, or F_SETLKW (`sleep`): a wait ends with EINTR when the kernel
// interrupts `req` (a signal to the caller).
Reply set_lock(FuseAdapter& adapter, fuse_req_t req, fuse_ino_t inode, fuse_file_info* fi,
               const struct flock& lock, bool sleep);
// flock(2)'s `operation` (LOCK_SH, LOCK_EX, LOCK_UN, with LOCK_NB), as the
// Linux NFS client sends it: a whole-file fcntl lock (nfs_flock).
Reply flock_lock(FuseAdapter& adapter, fuse_req_t req, fuse_ino_t inode, fuse_file_info* fi,
                 int operation);

// Whether the open file `fi` set a lock its client lost after a server
// restart (NfsClientLayer::lock_lost): its reads and writes get EIO.
bool lock_lost(FuseAdapter& adapter, fuse_ino_t inode, const fuse_file_info* fi);

// A close's FLUSH (fi->lock_owner: the closing process's locks) and the last
// close's RELEASE (fi->fh: the open file's).
void release_owner_locks(FuseAdapter& adapter, fuse_ino_t inode, const fuse_file_info* fi);
void release_file_locks(FuseAdapter& adapter, fuse_ino_t inode, const fuse_file_info* fi);

}  // namespace mimicfs
