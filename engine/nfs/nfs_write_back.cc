// SPDX-License-Identifier: Apache-2.0
// NfsClientLayer's writes and their errors: a buffered write returns before
// the server has it, and the error of one the server refuses is reported at
// the next write, fsync or close (nfs_file_flush, file_check_and_advance_wb_err).
#include "engine/nfs/nfs_client_layer.h"

#include <fcntl.h>

#include <algorithm>
#include <utility>

namespace mimicfs {

Result<void> NfsClientLayer::serve(const ops::Flush& request, Work& work) {
  const auto& [inode, writer] = request;
  auto result = pass(request, work);
  std::lock_guard lock(mutex_);
  // A writer's close writes back and commits (nfs_file_flush -> nfs_wb_all).
  if (writer && result) unsynced_.erase(inode);
  if (auto it = open_.find(inode); it != open_.end()) {
    OpenFile& file = it->second;
    file.flushes = std::min(file.flushes + 1, file.handles);
    file.last_flush = Clock::now();
    // nfs_file_flush: the close of a writer writes back what it has and
    // reports an error of that writeback only (filemap_check_wb_err since
    // the flush began); it stays on the file for an fsync.
    if (writer && file.unseen_error != 0) {
      const int error = std::exchange(file.unseen_error, 0);
      file.unreported_error = error;
      if (result) return fail(error);
    }
  }
  return result;
}

// nfs_file_fsync: writes back, then reports the error seen since this file
// last reported one (file_check_and_advance_wb_err), without a COMMIT.
Result<void> NfsClientLayer::serve(const ops::Fsync& request, Work& work) {
  const uint64_t inode = request.inode;
  writeback_completes(inode);
  if (const int error = take_unreported_error(inode); error != 0) {
    if (error == ESTALE) {
      std::lock_guard lock(mutex_);
      ++stale_requests_;
    }
    return fail(error);
  }
  auto synced = pass(request, work);
  if (synced) {
    std::lock_guard lock(mutex_);
    unsynced_.erase(inode);
  }
  return synced;
}

int NfsClientLayer::writeback_completes(uint64_t inode) {
  if (!writes_refused_.load(std::memory_order_acquire)) return 0;
  std::lock_guard lock(mutex_);
  auto it = open_.find(inode);
  if (it == open_.end() || it->second.unseen_error == 0) return 0;
  OpenFile& file = it->second;
  file.unreported_error = std::exchange(file.unseen_error, 0);
  return file.unreported_error;
}

int NfsClientLayer::take_unreported_error(uint64_t inode) {
  if (!writes_refused_.load(std::memory_order_acquire)) return 0;
  std::lock_guard lock(mutex_);
  auto it = open_.find(inode);
  return it == open_.end() ? 0 : std::exchange(it->second.unreported_error, 0);
}

void NfsClientLayer::changed_since_sync(uint64_t inode) {
  std::lock_guard lock(mutex_);
  if (unsynced_.size() < kMaxUnsynced) unsynced_.insert(inode);
}

bool NfsClientLayer::unsynced(uint64_t inode) {
  std::lock_guard lock(mutex_);
  return unsynced_.contains(inode);
}

namespace {

// What a server's WRITE can refuse at the writeback, or its RPC time out
// with, where the client can no longer tell the program's write(2)
// (nfs_writeback_done). The rest the client
// checks before (EFBIG past the server's maxfilesize, EINVAL, EBADF).
bool refused_at_writeback(int error) {
  return error == ENOSPC || error == EDQUOT || error == EIO || error == ESTALE ||
         error == ETIMEDOUT;  // a softerr mount's major timeout (FaultLayer)
}

}  // namespace

// A buffered write lands in the page cache and returns (write_back). An
// O_SYNC or O_DSYNC write is sent at once and fails at once, and reports what
// an fsync would (generic_write_sync -> nfs_file_fsync); an O_DIRECT one is
// sent at once (nfs_file_direct_write) and leaves the file's errors alone.
Result<size_t> NfsClientLayer::serve(const ops::Write& request, Work& work) {
  const auto& [inode, offset, data, flags, handle] = request;
  if ((flags & kLockLost) != 0) return refuse_lost_lock_write(inode, data.size(), flags, work);
  // Any write counts, direct ones too: a crash of this client puts the file
  // back whole, which must not undo another client's write.
  changed_since_sync(inode);
  if ((flags & (O_SYNC | O_DSYNC | O_DIRECT)) != 0) {
    auto result = stale_files_.load(std::memory_order_relaxed) > 0 && stale(inode)
                      ? fail(ESTALE)
                      : pass(request, work);
    // A write that failed otherwise never reaches generic_write_sync.
    if ((flags & (O_SYNC | O_DSYNC)) == 0 || (!result && result.error() != Errno{ESTALE})) {
      return result;
    }
    writeback_completes(inode);
    const int unreported = take_unreported_error(inode);
    if (result && unreported != 0) return fail(unreported);
    return result;
  }
  const int seen = reported_by_write(inode);
  auto result = write_back(inode, offset, data, flags, work);
  if (seen != 0) {
    // Everything was written back first (nfs_wb_all): one report for all.
    writeback_completes(inode);
    take_unreported_error(inode);
    return fail(seen);
  }
  return result;
}

int NfsClientLayer::reported_by_write(uint64_t inode) {
  if (!writes_refused_.load(std::memory_order_acquire)) return 0;
  std::lock_guard lock(mutex_);
  auto it = open_.find(inode);
  if (it == open_.end()) return 0;
  OpenFile& file = it->second;
  const int error = file.unseen_error;
  if (error != ENOSPC && error != EDQUOT && error != EFBIG) return 0;
  file.unseen_error = 0;
  file.unreported_error = error;
  return error;
}

Result<size_t> NfsClientLayer::write_back(uint64_t inode, uint64_t offset,
                                          std::span<const std::byte> data, int flags,
                                          Work& work) {
  int error = ESTALE;
  if (stale_files_.load(std::memory_order_relaxed) == 0 || !stale(inode)) {
    auto written = pass(ops::Write{inode, offset, data, flags}, work);
    if (written) return written;
    error = written.error().value;
    // A request that never reached the server was never taken either.
    if (work.never_sent) return fail(error);
  }
  if (!refused_at_writeback(error)) return fail(error);
  writeback_failed(inode, error, work);
  return data.size();
}

// The pages of a failed writeback are lost (nfs_mapping_set_error ->
// nfs_set_pageerror): the kernel must read the file again.
void NfsClientLayer::writeback_failed(uint64_t inode, int error, Work& work) {
  work.drop_cached_pages = true;
  std::lock_guard lock(mutex_);
  if (auto it = open_.find(inode); it != open_.end()) {
    writes_refused_.store(true, std::memory_order_release);
    ++deferred_write_errors_;
    it->second.unseen_error = error;
  }
}

// The WRITE's stateid is the lost lock's: the client fails it before
// sending (nfs4_set_rw_stateid -> -EIO). A direct or synchronous write
// returns EIO; a buffered one was taken into the page cache, and its
// writeback's EIO is reported as any other refusal's (nfs_write_error).
Result<size_t> NfsClientLayer::refuse_lost_lock_write(uint64_t inode, size_t size, int flags,
                                                      Work& work) {
  if ((flags & (O_SYNC | O_DSYNC | O_DIRECT)) != 0) return fail(EIO);
  writeback_failed(inode, EIO, work);
  return size;
}

}  // namespace mimicfs
