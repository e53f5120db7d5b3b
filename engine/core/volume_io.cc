// SPDX-License-Identifier: Apache-2.0
// Volume's file data path: read, write, copy_file_range, fallocate and seek,
// each handed to the file's RegularFile under its inode's lock; an allocation
// that finds the device full waits for the space background work is freeing.
#include "engine/core/volume.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <algorithm>

namespace mimicfs {

Result<std::shared_ptr<Inode>> Volume::file_for_io(uint64_t inode, uint64_t offset, uint64_t length,
                                                   int flags) {
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  if (node->is_directory()) return fail(EISDIR);
  if (!node->is_regular()) return fail(EINVAL);
  // The kernel checks no alignment for FUSE; the emulated device does, as
  // ext4 and xfs do for O_DIRECT (NFS has no constraint: logical_block_size 1).
  if ((flags & O_DIRECT) &&
      (offset % profile_.logical_block_size != 0 || length % profile_.logical_block_size != 0)) {
    return fail(EINVAL);
  }
  return node;
}

Result<size_t> Volume::serve(const ops::Read& request, Work& work) {
  const auto& [inode, offset, out, flags, handle] = request;
  auto found = file_for_io(inode, offset, out.size(), flags);
  if (!found) return std::unexpected(found.error());
  Inode& node = **found;
  work.file = node.number;
  std::lock_guard lock(node.mutex);
  return node.file->read(offset, out, (flags & O_DIRECT) != 0, work);
}

template <typename Attempt>
auto Volume::retry_after_reclaim(Work& work, Attempt&& attempt) -> decltype(attempt()) {
  const uint64_t boot = crashes();
  auto result = attempt();
  if (result || result.error().value != ENOSPC || !profile_.background_reclaim) return result;
  // As xfs: flush the queue (tasks another thread is running included) and
  // retry once, whatever the flush freed.
  deferred_.flush();
  work.waited_for_deferred = true;
  if (crashes() != boot) return fail(EIO);  // the power went meanwhile
  return attempt();
}

Result<size_t> Volume::serve(const ops::Write& request, Work& work) {
  const auto& [inode, offset, data, flags, handle] = request;
  return retry_after_reclaim(work, [&] { return do_write(inode, offset, data, flags, work); });
}

Result<size_t> Volume::do_write(uint64_t inode, uint64_t offset, std::span<const std::byte> data,
                                int flags, Work& work) {
  auto found = file_for_io(inode, offset, data.size(), flags);
  if (!found) return std::unexpected(found.error());
  Inode& node = **found;
  work.file = node.number;
  const uint32_t flushes_before = work.flushes;  // copy_range writes chunks into one Work
  {
    std::lock_guard lock(node.mutex);
    // Before the data, as file_remove_privs: a failed write has cleared them too.
    if ((flags & kKillSuidgid) && kill_suidgid_locked(node, SetIdClearing::kModification)) {
      work.changed_attributes.push_back(node.number);  // the kernel drops size, not mode
    }
    auto written = node.file->write(offset, data, flags, work);
    if (!written || *written == 0) return written;
    node.mtime = node.ctime = clock_.now();
    note_uncommitted_locked(node);
  }
  if (flags & O_DSYNC) {
    // Its commit is fsync's: on a journal every namespace change, and every
    // other file's changes, go with it. A flush alone (O_DSYNC over blocks
    // written in place, RegularFile::write) commits no transaction.
    const bool in_place = work.flushes > flushes_before;
    if (namespace_.commit(node.number, /*only_its_creation=*/false, work)) {
      if (in_place) {  // the journal's commit flushes the data too
        --work.flushes;
        ++work.commits;
      }
      commit_journal_files();
    } else if (!in_place) {
      commit_journal_files();
    }
  }
  return data.size();
}

Result<size_t> Volume::serve(const ops::CopyRange& request, Work& work) {
  const auto& [in, in_offset, out, out_offset, length, flags] = request;
  // Overlapping ranges of one file, compared without overflow.
  if (in == out && (in_offset <= out_offset ? out_offset - in_offset < length
                                            : in_offset - out_offset < length)) {
    return fail(EINVAL);
  }
  // In chunks, each read then written: one request, the work of both. A power
  // cut between chunks ends it: what follows would land on the crashed volume.
  constexpr uint64_t kChunk = 1 << 20;
  const uint64_t boot = crashes();
  std::vector<std::byte> buffer(std::min(length, kChunk));
  uint64_t copied = 0;
  const auto partial = [&](Errno error) -> Result<size_t> {
    if (copied > 0) return copied;
    return std::unexpected(error);
  };
  while (copied < length) {
    if (crashes() != boot) return partial(Errno{EIO});
    const std::span<std::byte> chunk(buffer.data(), std::min(length - copied, kChunk));
    auto got = read(in, in_offset + copied, chunk, 0, work);
    if (!got) return partial(got.error());
    if (*got == 0) break;  // the source's end
    auto put = write(out, out_offset + copied, chunk.first(*got), flags & (O_SYNC | O_DSYNC), work);
    if (!put) return partial(put.error());
    copied += *got;
    if (*got < chunk.size()) break;
  }
  work.bytes = copied;
  work.file = out;
  return copied;
}

Result<void> Volume::do_fallocate(Inode& node, int mode, uint64_t offset, uint64_t length,
                                  Work& work) {
  FallocateMode kind;
  if (mode == 0) {
    kind = FallocateMode::kAllocate;
  } else if (mode == FALLOC_FL_KEEP_SIZE) {
    kind = FallocateMode::kKeepSize;
  } else if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
    kind = FallocateMode::kPunchHole;
  } else if ((mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE) {
    kind = FallocateMode::kZeroRange;
  } else {
    return fail(EOPNOTSUPP);
  }
  if (!profile_.supports(kind)) return fail(EOPNOTSUPP);
  if (node.is_directory()) return fail(EISDIR);
  if (!node.is_regular()) return fail(ENODEV);
  const uint64_t size_before = node.file->size();
  // NFS 4.2's client writes the file back before a DEALLOCATE, not an ALLOCATE.
  if (kind == FallocateMode::kPunchHole) before_attribute_change(node, work);
  if (auto done =
          node.file->fallocate(kind, (mode & FALLOC_FL_KEEP_SIZE) != 0, offset, length, work);
      !done) {
    return done;
  }
  const bool sets_size = kind == FallocateMode::kAllocate && !(mode & FALLOC_FL_KEEP_SIZE);
  after_attribute_change(node, sets_size ? offset + length : 0);
  const timespec now = clock_.now();
  if (node.file->size() != size_before) node.mtime = now;
  node.ctime = now;
  return {};
}

Result<void> Volume::serve(const ops::Fallocate& request, Work& work) {
  const auto& [inode, mode, offset, length] = request;
  return retry_after_reclaim(work,
                             [&] { return fallocate_once(inode, mode, offset, length, work); });
}

Result<void> Volume::fallocate_once(uint64_t inode, int mode, uint64_t offset, uint64_t length,
                                    Work& work) {
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  work.file = node->number;
  std::lock_guard lock(node->mutex);
  if (auto done = do_fallocate(*node, mode, offset, length, work); !done) return done;
  if (mode & FALLOC_FL_PUNCH_HOLE) {
    ++work.punches;
    work.bytes = length;
  } else {
    ++work.fallocates;
  }
  return {};
}

Result<uint64_t> Volume::serve(const ops::Seek& request, Work&) {
  const auto& [inode, offset, whence] = request;
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return fail(EINVAL);
  auto node = namespace_.find(inode);
  if (!node) return fail(ENOENT);
  if (!node->is_regular()) return fail(EINVAL);
  std::lock_guard lock(node->mutex);
  return node->file->seek(offset, whence);
}

}  // namespace mimicfs
