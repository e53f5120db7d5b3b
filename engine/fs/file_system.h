// SPDX-License-Identifier: Apache-2.0
// FileSystem: the engine's interface, the one the FUSE adapter calls. The core
// (Volume) implements it; layers (layer.h) implement it over another FileSystem
// and change what they are for: faults, emulated time, counting.
//
// Every operation is one request (operations.h) through one virtual,
// dispatch(); the calls below build the request and return its reply. Each
// returns a value or the errno the emulated backend would give (positive, as
// in <errno.h>), and fills `work` with what it did (work.h), or with a Work
// of its own when the caller leaves `work` out.
//
// Thread-safety: every method may be called from any thread, concurrently.
// Inode numbers are never reused while the filesystem exists.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "engine/fs/operations.h"
#include "engine/fs/result.h"
#include "engine/fs/values.h"
#include "engine/fs/work.h"
#include "engine/profile/profile.h"
#include "engine/space/extent_map.h"
#include "engine/stats/layout.h"
#include "engine/stats/stats.h"

namespace mimicfs {

class FileSystem {
 public:
  static constexpr uint64_t kRootInode = mimicfs::kRootInode;
  // Inode numbers below this are never handed out: the adapter may use them.
  static constexpr uint64_t kFirstFileInode = 16;

  virtual ~FileSystem() = default;

  virtual const Profile& profile() const = 0;

  // Every operation comes through here: the core serves it, a layer changes
  // what it is for and passes the rest on (Layer::pass).
  virtual OperationReply dispatch(const Operation& operation, Work& work) = 0;
  // One request, with its own reply type.
  template <typename R>
  ReplyOf<R> run(const R& request, Work& work) {
    return std::get<ReplyOf<R>>(dispatch(Operation(std::in_place_type<R>, request), work));
  }

  // --- Namespace. Each call that returns an entry's Attributes takes one
  // reference on that inode for the caller (the kernel's lookup count); forget()
  // drops them. An unlinked inode lives until its last reference is dropped.
  [[nodiscard]] Result<Attributes> lookup(uint64_t parent, const std::string& name,
                                          WorkRef work = {}) {
    return run(ops::Lookup{parent, name}, work);
  }
  void forget(uint64_t inode, uint64_t references, WorkRef work = {}) {
    (void)run(ops::Forget{inode, references}, work);
  }
  [[nodiscard]] Result<Attributes> getattr(uint64_t inode, WorkRef work = {}) {
    return run(ops::Getattr{inode}, work);
  }
  // With `changes.size`, a truncate (counted as its own operation, "truncate").
  [[nodiscard]] Result<Attributes> setattr(uint64_t inode, const AttributeChanges& changes,
                                           WorkRef work = {}) {
    return run(ops::Setattr{inode, changes}, work);
  }
  // Regular files, FIFOs, sockets and device nodes (type from `mode`).
  // With `open_handle`, the new file is also open (FUSE's CREATE): one handle,
  // released by release(), and no separate "open" is counted.
  [[nodiscard]] Result<Attributes> create(uint64_t parent, const std::string& name, uint32_t mode,
                                          uint64_t rdev, Owner owner, bool open_handle = false,
                                          WorkRef work = {}) {
    return run(ops::Create{parent, name, mode, rdev, owner, open_handle}, work);
  }
  // open(2) with O_TMPFILE in directory `parent`: a regular file with no name
  // (nlink 0), open once (one handle, released by release()) and referenced
  // once. link() may give it a name, once; without one it goes at its last
  // release and forget, as an unlinked open file.
  [[nodiscard]] Result<Attributes> tmpfile(uint64_t parent, uint32_t mode, Owner owner,
                                           WorkRef work = {}) {
    return run(ops::Tmpfile{parent, mode, owner}, work);
  }
  [[nodiscard]] Result<Attributes> mkdir(uint64_t parent, const std::string& name, uint32_t mode,
                                         Owner owner, WorkRef work = {}) {
    return run(ops::Mkdir{parent, name, mode, owner}, work);
  }
  [[nodiscard]] Result<Attributes> symlink(uint64_t parent, const std::string& name,
                                           const std::string& target, Owner owner,
                                           WorkRef work = {}) {
    return run(ops::Symlink{parent, name, target, owner}, work);
  }
  [[nodiscard]] Result<std::string> readlink(uint64_t inode, WorkRef work = {}) {
    return run(ops::Readlink{inode}, work);
  }
  [[nodiscard]] Result<Attributes> link(uint64_t inode, uint64_t new_parent,
                                        const std::string& new_name, WorkRef work = {}) {
    return run(ops::Link{inode, new_parent, new_name}, work);
  }
  [[nodiscard]] Result<void> unlink(uint64_t parent, const std::string& name, WorkRef work = {}) {
    return run(ops::Unlink{parent, name}, work);
  }
  [[nodiscard]] Result<void> rmdir(uint64_t parent, const std::string& name, WorkRef work = {}) {
    return run(ops::Rmdir{parent, name}, work);
  }
  // flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE (others: EINVAL).
  [[nodiscard]] Result<void> rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                                    const std::string& new_name, unsigned flags,
                                    WorkRef work = {}) {
    return run(ops::Rename{parent, name, new_parent, new_name, flags}, work);
  }
  // ".", ".." and the entries, in name order.
  [[nodiscard]] Result<std::vector<DirectoryEntry>> read_directory(
      uint64_t inode, WorkRef work = {}) {
    return run(ops::ReadDirectory{inode}, work);
  }

  // --- Files. `flags` are open(2)'s, as the descriptor has them now, and
  // kKillSuidgid where it applies.
  // O_TRUNC empties a regular file, as open(2) does. Each open is one handle,
  // until release(). O_DIRECT on a profile without direct I/O: EINVAL.
  [[nodiscard]] Result<void> open(uint64_t inode, int flags, WorkRef work = {}) {
    return run(ops::Open{inode, flags}, work);
  }
  // close(2) of a descriptor opened for writing (`writer`): delayed allocation
  // happens now and, when this is the file's last open handle, the last-close
  // work too (see release()). On NFS (flush_on_close) the file's dirty data is
  // written back and committed: it is durable. Closing a read-only descriptor
  // changes nothing.
  [[nodiscard]] Result<void> flush(uint64_t inode, bool writer, WorkRef work = {}) {
    return run(ops::Flush{inode, writer}, work);
  }
  // The last reference to an open handle is gone. When it was the file's last
  // handle: delayed allocation happens, an inode reservation is given back and
  // speculative preallocation past EOF is trimmed, as xfs does on the first
  // close only (since Linux 6.12; before, through IDIRTY_RELEASE) and never for a
  // fallocated file. An unlinked file's blocks are freed.
  void release(uint64_t inode, WorkRef work = {}) {
    (void)run(ops::Release{inode}, work);
  }
  // Reads up to out.size() bytes; fewer at EOF. Holes and unwritten extents read
  // as zeros. With O_DIRECT the offset and length must be multiples of the
  // logical block size (else EINVAL) and the device is read; otherwise pages
  // not in the page cache are.
  [[nodiscard]] Result<size_t> read(uint64_t inode, uint64_t offset, std::span<std::byte> out,
                                    int flags = 0, WorkRef work = {}) {
    return run(ops::Read{inode, offset, out, flags}, work);
  }
  // Writes all of `data` at `offset`. O_APPEND writes at EOF; O_DIRECT must be
  // aligned to the logical block size (else EINVAL) and pays the device now;
  // otherwise the data is dirty in the page cache, and with O_SYNC or O_DSYNC
  // written back (its delayed blocks allocated) and committed at once, as a
  // write followed by fdatasync of its range. The allocation units it touches
  // that have no blocks (and, copy-on-write, those it overwrites) are reserved,
  // then allocated now or, with delayed allocation, at fsync, close or
  // writeback; the PreallocationPolicy may add blocks. All or nothing: on
  // ENOSPC nothing is written, reserved or allocated and earlier data is intact.
  [[nodiscard]] Result<size_t> write(uint64_t inode, uint64_t offset,
                                     std::span<const std::byte> data, int flags = 0,
                                     WorkRef work = {}) {
    return run(ops::Write{inode, offset, data, flags}, work);
  }
  // copy_file_range(2): up to `length` bytes of `in` from `in_offset` (fewer at
  // its EOF; 0 past it) written into `out` at `out_offset`, as the write of what
  // a read returned: the destination's blocks are allocated as a write's, holes
  // included (the kernel's splice fallback and ext4 do so; xfs and btrfs would
  // share the extents, which is not modelled). `flags`: the destination's
  // O_SYNC/O_DSYNC, as its writes'. Overlapping ranges of one file: EINVAL. A
  // power cut stops it between chunks. Returns the bytes copied.
  [[nodiscard]] Result<size_t> copy_range(uint64_t in, uint64_t in_offset, uint64_t out,
                                          uint64_t out_offset, uint64_t length, int flags = 0,
                                          WorkRef work = {}) {
    return run(ops::CopyRange{in, in_offset, out, out_offset, length, flags}, work);
  }
  // fallocate(2) with Linux's mode bits. A mode the profile lacks: EOPNOTSUPP,
  // every time (never ENOSYS, which would disable fallocate for the whole mount).
  // PUNCH_HOLE is counted as its own operation, "punch".
  [[nodiscard]] Result<void> fallocate(uint64_t inode, int mode, uint64_t offset, uint64_t length,
                                       WorkRef work = {}) {
    return run(ops::Fallocate{inode, mode, offset, length}, work);
  }
  // Delayed allocation of the file happens now; its dirty data is written back
  // and, when anything of it was not durable, committed, with the namespace
  // changes the profile's durability.metadata commits with it (docs/time.md).
  [[nodiscard]] Result<void> fsync(uint64_t inode, bool datasync, WorkRef work = {}) {
    return run(ops::Fsync{inode, datasync}, work);
  }
  // SEEK_DATA or SEEK_HOLE; ENXIO at or past EOF, as Linux.
  [[nodiscard]] Result<uint64_t> seek(uint64_t inode, uint64_t offset, int whence,
                                      WorkRef work = {}) {
    return run(ops::Seek{inode, offset, whence}, work);
  }
  [[nodiscard]] Result<FilesystemStats> statfs(WorkRef work = {}) {
    return run(ops::Statfs{}, work);
  }

  // --- Extended attributes. flags: XATTR_CREATE or XATTR_REPLACE or 0.
  [[nodiscard]] Result<void> setxattr(uint64_t inode, const std::string& name,
                                      std::string_view value, int flags, WorkRef work = {}) {
    return run(ops::Setxattr{inode, name, value, flags}, work);
  }
  [[nodiscard]] Result<std::string> getxattr(uint64_t inode, const std::string& name,
                                             WorkRef work = {}) {
    return run(ops::Getxattr{inode, name}, work);
  }
  [[nodiscard]] Result<std::vector<std::string>> listxattr(uint64_t inode, WorkRef work = {}) {
    return run(ops::Listxattr{inode}, work);
  }
  [[nodiscard]] Result<void> removexattr(uint64_t inode, const std::string& name,
                                         WorkRef work = {}) {
    return run(ops::Removexattr{inode, name}, work);
  }

  // --- Power cut. Every file goes back to its last sync (size and contents),
  // dirty pages are dropped, and the entries created or renamed but not yet
  // durable are undone. The report names every file whose cached pages went.
  virtual CrashReport crash(Work& work) = 0;
  // How many power cuts the volume has been through: a descriptor opened before
  // the last one belongs to a world that ended (the adapter answers it EIO).
  virtual uint64_t crashes() = 0;
  // Just before a power cut: the device or the flusher wrote back part of the
  // data written since each file's sync (RegularFile::persist_some; none on a
  // copy-on-write profile, which never overwrites in place). Returns the bytes.
  virtual uint64_t write_back_at_random(double fraction, uint64_t seed) = 0;
  // Everything written is durable now, every namespace change committed, as
  // sync(1) makes it on the real filesystem (FUSE passes no syncfs on; `ctl sync`).
  virtual void sync_all(Work& work) = 0;
  void sync_all() {
    Work work;
    sync_all(work);
  }

  // --- The kernel's own threads, in emulated time; a layer above decides when
  // (CostLayer: as the clock passes each page_cache.writeback_interval_ns and
  // durability.commit_interval_ns). `now_ns` is the emulated time, which a file
  // that becomes dirty afterwards takes as its dirtied_when. `flush`: the
  // flusher writes back every file dirty since `page_cache.dirty_expire_ns` or
  // longer; `commit`: the filesystem commits on its own
  // (RegularFile::commit on every file, every pending namespace
  // change). Not an operation: never counted, charged or faulted; the blocks
  // whose allocation it changed are in work.changed_attributes.
  virtual BackgroundReport background(uint64_t now_ns, bool flush, bool commit, Work& work) = 0;

  // --- Deferred work (work.h's DeferredTask): an operation that queues a task
  // reports it in Work::deferred; a layer above decides when it is done. Not
  // operations (never counted, charged or faulted); any thread.
  // Completes task `id` now, its effect applied: false if it is not pending.
  virtual bool complete_deferred(uint64_t id) = 0;
  // Completes every pending task now; returns how many.
  virtual size_t complete_all_deferred() = 0;

  // --- Inspection: not operations (never counted, charged or faulted).
  // The path of an inode from the root ("/dir/file"), "/" for the root, "" when
  // it has no entry.
  virtual std::string path(uint64_t inode) = 0;
  // What `name` in directory `parent` is, as a client's own caches know it
  // (NfsClientLayer): unlike lookup(), no reference is taken.
  [[nodiscard]] virtual Result<Attributes> entry(uint64_t parent, const std::string& name) = 0;
  [[nodiscard]] virtual Result<FileStats> file_stats(uint64_t inode) = 0;
  [[nodiscard]] virtual Result<std::vector<Extent>> file_extents(uint64_t inode) = 0;
  // Each layer adds its part: the core the device and files, the cost layer the
  // clock and emulated times, the counting layer the operations, faults the rules.
  virtual StatsSnapshot snapshot() = 0;
  // Every file's extents with their device positions (O(total extents)).
  virtual DeviceLayout layout() = 0;
  // Zeroes the operation counters and every emulated time.
  virtual void reset_statistics() = 0;

  CrashReport crash() {
    Work work;
    return crash(work);
  }
};

}  // namespace mimicfs
