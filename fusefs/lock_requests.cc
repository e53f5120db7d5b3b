// SPDX-License-Identifier: Apache-2.0
#include "fusefs/lock_requests.h"

#include <sys/file.h>

#include "control/control_files.h"
#include "engine/nfs/nfs_client_layer.h"
#include "fusefs/fuse_adapter.h"

namespace mimicfs {
namespace {

NfsClientLayer* client(FuseAdapter& adapter) {
  return adapter.engine().nfs_client(adapter.view());
}

RecordLock to_record_lock(const struct flock& lock, const fuse_file_info* fi) {
  RecordLock record;
  record.type = lock.l_type == F_RDLCK   ? LockType::kRead
                : lock.l_type == F_WRLCK ? LockType::kWrite
                                         : LockType::kUnlock;
  // libfuse gives the kernel's [start, end] as l_start and l_len (0: to OFFSET_MAX).
  record.start = static_cast<uint64_t>(lock.l_start);
  record.end = lock.l_len == 0 ? RecordLock::kToEnd
                               : static_cast<uint64_t>(lock.l_start + lock.l_len - 1);
  record.owner.id = fi->lock_owner;
  record.handle = fi->fh;
  record.pid = static_cast<uint32_t>(lock.l_pid);
  return record;
}

// What a waiting lock request's interruption (FUSE_INTERRUPT) ends.
struct PendingLock {
  NfsClientLayer* client;
  LockWait wait;
};

void interrupted(fuse_req_t, void* data) {
  auto* pending = static_cast<PendingLock*>(data);
  pending->client->interrupt_lock_wait(pending->wait);
}

// `pending` is the interruption's while this lives, whatever unwinds: libfuse
// calls interrupted() under the request's lock, which the unregistration
// takes, so no call outlives it.
class InterruptRegistration {
 public:
  InterruptRegistration(fuse_req_t req, PendingLock& pending) : req_(req) {
    fuse_req_interrupt_func(req_, interrupted, &pending);
  }
  ~InterruptRegistration() { fuse_req_interrupt_func(req_, nullptr, nullptr); }
  InterruptRegistration(const InterruptRegistration&) = delete;
  InterruptRegistration& operator=(const InterruptRegistration&) = delete;

 private:
  fuse_req_t req_;
};

using LockKind = NfsClientLayer::LockKind;

Reply take(FuseAdapter& adapter, fuse_req_t req, fuse_ino_t inode, const RecordLock& request,
           LockKind kind, bool sleep) {
  NfsClientLayer* nfs = client(adapter);
  if (nfs == nullptr) return ErrorReply{ENOLCK};  // never asked for: the kernel's own
  // .mimicfs/'s files have the same numbers on every mount, and the control
  // layer answers their RELEASE: no lock of theirs would be given back.
  if (ControlLayer::answers(inode)) return ErrorReply{ENOLCK};
  Work work;
  Result<void> result;
  if (sleep && request.type != LockType::kUnlock) {
    PendingLock pending{nfs, {}};
    pending.wait.ending = [&adapter] { return adapter.session_ending(); };
    const InterruptRegistration registration(req, pending);
    result = nfs->set_lock(inode, request, kind, &pending.wait, work);
  } else {
    result = nfs->set_lock(inode, request, kind, nullptr, work);
  }
  if (work.drop_cached_pages) adapter.kernel().drop_pages(inode);
  return ErrorReply{result ? 0 : result.error().value};
}

}  // namespace

// Even the locks client.local_lock keeps on the client: taking one
// revalidates the file (NfsClientLayer::set_lock), which the kernel's own
// locks would not.
uint64_t lock_capabilities(FuseAdapter& adapter, uint64_t capable) {
  if (client(adapter) == nullptr) return 0;
  return (FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS) & capable;
}

Reply test_lock(FuseAdapter& adapter, fuse_ino_t inode, fuse_file_info* fi,
                const struct flock& lock) {
  NfsClientLayer* nfs = client(adapter);
  if (nfs == nullptr || ControlFiles::owns(inode)) return ErrorReply{ENOLCK};
  if (opened_before_crash(fi, adapter.fs().crashes())) return ErrorReply{EIO};
  Work work;
  auto conflict = nfs->test_lock(inode, to_record_lock(lock, fi), work);
  if (!conflict) return ErrorReply{conflict.error().value};
  LockReply reply;
  reply.lock.l_whence = SEEK_SET;
  if (!*conflict) {
    reply.lock.l_type = F_UNLCK;
    return reply;
  }
  const RecordLock& held = **conflict;
  reply.lock.l_type = held.type == LockType::kRead ? F_RDLCK : F_WRLCK;
  reply.lock.l_start = static_cast<off_t>(held.start);
  reply.lock.l_len =
      held.end == RecordLock::kToEnd ? 0 : static_cast<off_t>(held.end - held.start + 1);
  reply.lock.l_pid = static_cast<pid_t>(held.pid);
  return reply;
}

Reply set_lock(FuseAdapter& adapter, fuse_req_t req, fuse_ino_t inode, fuse_file_info* fi,
               const struct flock& lock, bool sleep) {
  if (opened_before_crash(fi, adapter.fs().crashes())) return ErrorReply{EIO};
  return take(adapter, req, inode, to_record_lock(lock, fi), LockKind::kPosix, sleep);
}

Reply flock_lock(FuseAdapter& adapter, fuse_req_t req, fuse_ino_t inode, fuse_file_info* fi,
                 int operation) {
  if (opened_before_crash(fi, adapter.fs().crashes())) return ErrorReply{EIO};
  RecordLock request;
  const int kind = operation & (LOCK_SH | LOCK_EX | LOCK_UN);
  request.type = kind == LOCK_SH   ? LockType::kRead
                 : kind == LOCK_EX ? LockType::kWrite
                                   : LockType::kUnlock;
  // Sent to the server, a whole-file POSIX lock (nfs_flock), for which the
  // descriptor must be open for the kind of lock (nfs4_proc_lock: EBADF,
  // as the VFS checks for fcntl but not for flock); a local flock() is not.
  const int access = fi->fh != 0 ? reinterpret_cast<const Handle*>(fi->fh)->flags & O_ACCMODE
                                 : O_RDWR;
  NfsClientLayer* nfs = client(adapter);
  if (nfs != nullptr && !nfs->flock_is_local() &&
      ((request.type == LockType::kRead && access == O_WRONLY) ||
       (request.type == LockType::kWrite && access == O_RDONLY))) {
    return ErrorReply{EBADF};
  }
  request.owner.id = fi->lock_owner;  // the open file
  request.handle = fi->fh;
  request.pid = static_cast<uint32_t>(fuse_req_ctx(req)->pid);
  return take(adapter, req, inode, request, LockKind::kFlock, (operation & LOCK_NB) == 0);
}

// Asking is a contact with the server (NfsClients::contact): a control file's
// read or write asks nothing.
bool lock_lost(FuseAdapter& adapter, fuse_ino_t inode, const fuse_file_info* fi) {
  if (ControlLayer::answers(inode)) return false;
  NfsClientLayer* nfs = client(adapter);
  return nfs != nullptr && fi != nullptr && nfs->lock_lost(inode, fi->fh);
}

// A descriptor from before a crash gives back nothing: the crashed client's
// locks are its old boot's, which the server holds until its lease expires
// (a power cut dropped them already).
void release_owner_locks(FuseAdapter& adapter, fuse_ino_t inode, const fuse_file_info* fi) {
  if (opened_before_crash(fi, adapter.fs().crashes())) return;
  if (NfsClientLayer* nfs = client(adapter)) nfs->release_locks(inode, fi->lock_owner);
}

void release_file_locks(FuseAdapter& adapter, fuse_ino_t inode, const fuse_file_info* fi) {
  if (ControlLayer::answers(inode)) return;  // it holds none (take)
  if (opened_before_crash(fi, adapter.fs().crashes())) return;
  if (NfsClientLayer* nfs = client(adapter)) nfs->release_handle_locks(inode, fi->fh);
}

}  // namespace mimicfs
