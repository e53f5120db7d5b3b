// SPDX-License-Identifier: Apache-2.0
// NfsClientLayer: what every request does (enter, leave), the creation of
// names (create, mkdir, symlink, link), the client's crash and its
// statistics. Its other jobs have a file each: nfs_attribute_cache.cc
// (lookup, getattr, open), nfs_stale_files.cc, nfs_client_locks.cc,
// nfs_silly_rename.cc (release, unlink, rmdir, rename, readdir),
// nfs_write_back.cc (write, flush, fsync).
#include "engine/nfs/nfs_client_layer.h"

#include "engine/nfs/nfs_clients.h"

#include <algorithm>
#include <utility>

namespace mimicfs {

NfsClientLayer::NfsClientLayer(FileSystem& server, NfsClients& peers, std::string name)
    : Layer(server),
      peers_(peers),
      local_posix_(server.profile().local_lock == "posix" || server.profile().local_lock == "all"),
      local_flock_(server.profile().local_lock == "flock" || server.profile().local_lock == "all"),
      local_posix_locks_(peers.lock_waiters()),
      local_flock_locks_(peers.lock_waiters()),
      silly_rename_(server.profile().silly_rename),
      noac_(server.profile().noac),
      acregmin_ns_(server.profile().acregmin_ns),
      acregmax_ns_(server.profile().acregmax_ns),
      acdirmin_ns_(server.profile().acdirmin_ns),
      acdirmax_ns_(server.profile().acdirmax_ns),
      name_(std::move(name)) {}

OperationReply NfsClientLayer::dispatch(const Operation& operation, Work& work) {
  return serve_operation(operation, [&](const auto& request) { return serve(request, work); });
}

Result<Attributes> NfsClientLayer::serve(const ops::Create& request, Work& work) {
  auto created = pass(request, work);
  if (!created) return created;
  looked_up(created->inode);
  if (request.open_handle) opened(created->inode, false);
  return created;
}

Result<Attributes> NfsClientLayer::serve(const ops::Tmpfile& request, Work& work) {
  auto created = pass(request, work);
  if (!created) return created;
  looked_up(created->inode);
  opened(created->inode, false);
  return created;
}

Result<Attributes> NfsClientLayer::serve(const ops::Mkdir& request, Work& work) {
  auto made = pass(request, work);
  if (made) looked_up(made->inode);
  return made;
}

Result<Attributes> NfsClientLayer::serve(const ops::Symlink& request, Work& work) {
  auto made = pass(request, work);
  if (made) looked_up(made->inode);
  return made;
}

void NfsClientLayer::leave(const Call& call, Work& work, int error) {
  if (error == 0) {
    switch (call.op) {
      case Op::kTruncate:
      case Op::kFallocate:
      case Op::kPunch:
      case Op::kCopyFileRange:
        changed_since_sync(call.inode);  // a write counts at its start (write())
        [[fallthrough]];
      case Op::kWrite:
        changed_here(call.inode, Change::kData);
        break;
      // A file's own attributes, or a directory's (`inode` is the parent):
      // its mtime, size and link count.
      case Op::kSetattr:
      case Op::kSetxattr:
      case Op::kRemovexattr:
      case Op::kCreate:
      case Op::kMkdir:
      case Op::kSymlink:
      case Op::kLink:
      case Op::kUnlink:
      case Op::kRmdir:
      case Op::kRename:
        changed_here(call.inode, Change::kAttributes);
        tell_removals(work);
        break;
      default:
        break;
    }
  }
  Layer::leave(call, work, error);
}

// The file's link count and ctime change too, not only the new parent's.
Result<Attributes> NfsClientLayer::serve(const ops::Link& request, Work& work) {
  const uint64_t inode = request.inode;
  auto linked = pass(request, work);
  if (!linked) return linked;
  looked_up(inode);
  changed_here(inode, Change::kAttributes);
  return linked;
}

CrashReport NfsClientLayer::crash(Work& work) {
  peers_.reboot_all();
  return Layer::crash(work);
}

void NfsClientLayer::reboot() {
  // The locks its kernel kept (client.local_lock) went with it.
  local_posix_locks_.clear();
  local_flock_locks_.clear();
  std::lock_guard lock(mutex_);
  attributes_.clear();
  lost_.clear();  // the rebooted client's locks went with it
  unsynced_.clear();  // a power cut loses them on the server too
  lost_locks_held_.store(0, std::memory_order_release);
  ++generation_;
  for (auto& [inode, file] : open_) {
    file.handles_before_crash += file.handles;
    file.handles = 0;
    file.flushes = 0;
    file.unseen_error = 0;  // the rebooted client's pages went with it
    file.unreported_error = 0;
    if (!file.removing) {
      file.silly_name.clear();  // the server keeps the file; nobody removes it now
      file.silly_parent = 0;
    }
  }
  released_.notify_all();
}

std::vector<uint64_t> NfsClientLayer::crash_client(bool hold) {
  std::vector<uint64_t> unsynced;
  {
    std::lock_guard lock(mutex_);
    unsynced.assign(unsynced_.begin(), unsynced_.end());
    ++client_crashes_;
  }
  reboot();
  own_crashes_.fetch_add(1);
  down_.store(hold, std::memory_order_release);
  return unsynced;
}

namespace {

// The requests about one file that go to the server with its file handle. A
// RELEASE does not (NFSv3 has no CLOSE), nor does a FLUSH of a file with no
// dirty pages; a write goes to the page cache (its write, nfs_write_back.cc).
bool uses_file_handle(Op op) {
  switch (op) {
    case Op::kGetattr:
    case Op::kSetattr:
    case Op::kTruncate:
    case Op::kOpen:
    case Op::kRead:
    case Op::kFsync:
    case Op::kFdatasync:
    case Op::kFallocate:
    case Op::kPunch:
    case Op::kLseek:
    case Op::kSetxattr:
    case Op::kGetxattr:
    case Op::kListxattr:
    case Op::kRemovexattr:
    case Op::kCopyFileRange:
      return true;
    default:
      return false;
  }
}

// Those, and the requests about a name in a directory, which go to the server
// with the directory's handle.
bool uses_handle(Op op) {
  switch (op) {
    case Op::kLookup:
    case Op::kCreate:
    case Op::kTmpfile:
    case Op::kMkdir:
    case Op::kSymlink:
    case Op::kLink:
    case Op::kUnlink:
    case Op::kRmdir:
    case Op::kRename:
    case Op::kReaddir:
    case Op::kReadlink:
      return true;
    default:
      return uses_file_handle(op);
  }
}

}  // namespace

Result<void> NfsClientLayer::enter(const Call& call, Work& work) {
  // A client held down after its crash answers nothing but what keeps the
  // mount walkable and lets descriptors close, and sends nothing.
  if (down_.load(std::memory_order_acquire)) {
    if (call.op != Op::kGetattr && call.op != Op::kStatfs && call.op != Op::kRelease) {
      return fail(EIO);
    }
    return Layer::enter(call, work);
  }
  // A request after a server restart tells of it; a close does not (a
  // clean file's close sends nothing: nfs_file_flush).
  if (call.op != Op::kFlush && call.op != Op::kRelease) {
    peers_.contact(*this);
  }
  // An fsync sends nothing for a clean file (nfs_file_fsync): only a lost
  // write fails it (its fsync, nfs_write_back.cc).
  if (stale_files_.load(std::memory_order_relaxed) > 0 && uses_file_handle(call.op) &&
      call.op != Op::kFsync && call.op != Op::kFdatasync && stale(call.inode)) {
    return fail(ESTALE);
  }
  // A directory another client removed, where a program still works (its
  // working directory: "Stale file handle"), or a file the kernel still has
  // whose attributes expired (the VFS then looks the name up again: ENOENT).
  if (gone_files_.load(std::memory_order_relaxed) > 0 && uses_handle(call.op) &&
      gone(call.inode)) {
    return fail(ESTALE);
  }
  return Layer::enter(call, work);
}

ClientStats NfsClientLayer::client_stats() {
  std::lock_guard lock(mutex_);
  ClientStats client;
  client.mount = name_;
  client.silly_renames = silly_renames_;
  client.silly_renamed_open = static_cast<uint64_t>(
      std::count_if(open_.begin(), open_.end(), [](const auto& open) {
        return !open.second.silly_name.empty() || open.second.removing;
      }));
  client.stale_handles = stale_requests_;
  client.lock_conflicts = lock_conflicts_;
  client.deferred_write_errors = deferred_write_errors_;
  client.lost_locks = lost_locks_;
  client.crashes = client_crashes_;
  client.stale_attributes = stale_attributes_;
  return client;
}

StatsSnapshot NfsClientLayer::snapshot() {
  StatsSnapshot snapshot = Layer::snapshot();
  snapshot.client = client_stats();
  snapshot.clients = peers_.stats();
  return snapshot;
}

void NfsClientLayer::reset_statistics() {
  Layer::reset_statistics();
  peers_.reset_statistics();
}

void NfsClientLayer::reset_client_statistics() {
  std::lock_guard lock(mutex_);
  silly_renames_ = 0;
  stale_requests_ = 0;
  stale_attributes_ = 0;
  lock_conflicts_ = 0;
  deferred_write_errors_ = 0;
  lost_locks_ = 0;
  client_crashes_ = 0;
}

}  // namespace mimicfs
