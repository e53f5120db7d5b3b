// SPDX-License-Identifier: Apache-2.0
// FileSystem: the engine's interface, the one the FUSE adapter calls. The core
// (Volume) implements it; layers (layer.h) implement it over another FileSystem
// and change what they are for: faults, emulated time, counting.
//
// Every operation returns a value or the errno the emulated backend would give
// (positive, as in <errno.h>), and fills `work` with what it did (work.h). Each
// also has an overload without `work` for callers that do not look at it.
//
// Thread-safety: every method may be called from any thread, concurrently.
// Inode numbers are never reused while the filesystem exists.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/fs/result.h"
#include "engine/fs/work.h"
#include "engine/profile/profile.h"
#include "engine/space/extent_map.h"
#include "engine/stats/layout.h"
#include "engine/stats/stats.h"

namespace mimicfs {

struct Attributes {
  uint64_t inode = 0;
  uint32_t mode = 0;  // type and permission bits, as st_mode
  uint32_t nlink = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t rdev = 0;
  uint64_t size = 0;
  uint64_t blocks = 0;      // 512-byte units allocated, as st_blocks
  uint32_t block_size = 0;  // st_blksize: the profile's statfs block size
  timespec atime{}, mtime{}, ctime{};
};

// Why a file may lose its S_ISUID and S_ISGID bits, as Linux's VFS decides
// (the kernel says which with FUSE_HANDLE_KILLPRIV_V2's flags). S_ISUID goes;
// S_ISGID goes with group execute, or when the caller (CallerScope's
// Credentials) is neither in the file's group nor holds CAP_FSETID
// (setattr_should_drop_sgid, Linux 6.2+); security.capability goes too.
enum class SetIdClearing : uint8_t {
  kNone,
  // A write, truncate or open with O_TRUNC by a caller without CAP_FSETID:
  // regular files only (setattr_should_drop_suidgid, file_remove_privs).
  kModification,
  // chown or chgrp, by anyone: every type but a directory (chown_common).
  kOwnerChange,
  // A SETATTR that sets nothing: the kernel's own __remove_privs before a
  // write, fallocate or copy_file_range, or a chown(-1, -1). From a caller
  // with CAP_FSETID only security.capability goes (the kernel kills nothing
  // else for it); from the owner or a caller that may write the file, as
  // kOwnerChange; from anyone else nothing (ext4 refuses that chown).
  kPrivilegeRemoval,
};

// Not an open(2) flag (Linux's end at bit 22): with open's O_TRUNC or a
// write, SetIdClearing::kModification.
inline constexpr int kKillSuidgid = 1 << 30;
// Nor is this: the write goes through an NFS lock the client lost after a
// server restart (NfsClientLayer::lock_lost): it never reaches the server.
inline constexpr int kLockLost = 1 << 29;

// setattr's changes; an absent field is left alone. A timestamp whose tv_nsec is
// UTIME_NOW is set to the volume's current time.

struct AttributeChanges {
  std::optional<uint32_t> mode;  // permission bits only
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::optional<uint64_t> size;
  std::optional<timespec> atime;
  std::optional<timespec> mtime;
  // Set-ID bits cleared first, if the change is accepted.
  SetIdClearing kill_suidgid = SetIdClearing::kNone;
  // The size comes through a descriptor (ftruncate): the times change even
  // when the size does not. The VFS asks for that with ATTR_MTIME, which the
  // FUSE kernel leaves out for an ftruncate (update_mtime in fs/fuse/dir.c).
  bool by_descriptor = false;
};

struct Owner {
  uint32_t uid = 0;
  uint32_t gid = 0;
};

struct DirectoryEntry {
  std::string name;
  uint64_t inode = 0;
  uint32_t type = 0;  // S_IFMT bits
};

// What crash() undid, for a cache in front of the volume (the kernel's) to forget.
struct CrashReport {
  std::vector<std::pair<uint64_t, std::string>> removed_entries;  // (directory, name)
  std::vector<uint64_t> restored_files;                           // inode numbers
  std::vector<uint64_t> dropped_caches;  // every regular file: its cached pages went
};

// What the kernel's own threads did in one call of FileSystem::background.
struct BackgroundReport {
  uint64_t files_written_back = 0;  // by the flusher
  uint64_t bytes_written_back = 0;
  uint64_t files_committed = 0;     // made durable by the commit
  bool committed = false;           // the commit made anything durable
};

struct FilesystemStats {
  uint64_t block_size = 0;     // f_bsize
  uint64_t fragment_size = 0;  // f_frsize
  uint64_t blocks = 0;         // f_blocks, in fragment_size units
  uint64_t blocks_free = 0;
  uint64_t blocks_available = 0;
  uint64_t files = 0;
  uint64_t files_free = 0;
  uint64_t name_max = 0;
};

class FileSystem {
 public:
  static constexpr uint64_t kRootInode = 1;
  // Inode numbers below this are never handed out: the adapter may use them.
  static constexpr uint64_t kFirstFileInode = 16;

  virtual ~FileSystem() = default;

  virtual const Profile& profile() const = 0;

  // --- Namespace. Each call that returns an entry's Attributes takes one
  // reference on that inode for the caller (the kernel's lookup count); forget()
  // drops them. An unlinked inode lives until its last reference is dropped.
  [[nodiscard]] virtual Result<Attributes> lookup(uint64_t parent, const std::string& name,
                                                  Work& work) = 0;
  virtual void forget(uint64_t inode, uint64_t references, Work& work) = 0;
  [[nodiscard]] virtual Result<Attributes> getattr(uint64_t inode, Work& work) = 0;
  // With `changes.size`, a truncate (counted as its own operation, "truncate").
  [[nodiscard]] virtual Result<Attributes> setattr(uint64_t inode, const AttributeChanges& changes,
                                                   Work& work) = 0;
  // Regular files, FIFOs, sockets and device nodes (type from `mode`).
  // With `open_handle`, the new file is also open (FUSE's CREATE): one handle,
  // released by release(), and no separate "open" is counted.
  [[nodiscard]] virtual Result<Attributes> create(uint64_t parent, const std::string& name,
                                                  uint32_t mode, uint64_t rdev, Owner owner,
                                                  bool open_handle, Work& work) = 0;
  // open(2) with O_TMPFILE in directory `parent`: a regular file with no name
  // (nlink 0), open once (one handle, released by release()) and referenced
  // once. link() may give it a name, once; without one it goes at its last
  // release and forget, as an unlinked open file.
  [[nodiscard]] virtual Result<Attributes> tmpfile(uint64_t parent, uint32_t mode, Owner owner,
                                                   Work& work) = 0;
  [[nodiscard]] virtual Result<Attributes> mkdir(uint64_t parent, const std::string& name,
                                                 uint32_t mode, Owner owner, Work& work) = 0;
  [[nodiscard]] virtual Result<Attributes> symlink(uint64_t parent, const std::string& name,
                                                   const std::string& target, Owner owner,
                                                   Work& work) = 0;
  [[nodiscard]] virtual Result<std::string> readlink(uint64_t inode, Work& work) = 0;
  [[nodiscard]] virtual Result<Attributes> link(uint64_t inode, uint64_t new_parent,
                                                const std::string& new_name, Work& work) = 0;
  [[nodiscard]] virtual Result<void> unlink(uint64_t parent, const std::string& name,
                                            Work& work) = 0;
  [[nodiscard]] virtual Result<void> rmdir(uint64_t parent, const std::string& name,
                                           Work& work) = 0;
  // flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE (others: EINVAL).
  [[nodiscard]] virtual Result<void> rename(uint64_t parent, const std::string& name,
                                            uint64_t new_parent, const std::string& new_name,
                                            unsigned flags, Work& work) = 0;
  // ".", ".." and the entries, in name order.
  [[nodiscard]] virtual Result<std::vector<DirectoryEntry>> read_directory(uint64_t inode,
                                                                           Work& work) = 0;

  // --- Files. `flags` are open(2)'s, as the descriptor has them now, and
  // kKillSuidgid where it applies.
  // O_TRUNC empties a regular file, as open(2) does. Each open is one handle,
  // until release(). O_DIRECT on a profile without direct I/O: EINVAL.
  [[nodiscard]] virtual Result<void> open(uint64_t inode, int flags, Work& work) = 0;
  // close(2) of a descriptor opened for writing (`writer`): delayed allocation
  // happens now and, when this is the file's last open handle, the last-close
  // work too (see release()). On NFS (flush_on_close) the file's dirty data is
  // written back and committed: it is durable. Closing a read-only descriptor
  // changes nothing.
  [[nodiscard]] virtual Result<void> flush(uint64_t inode, bool writer, Work& work) = 0;
  // The last reference to an open handle is gone. When it was the file's last
  // handle: delayed allocation happens, an inode reservation is given back and
  // speculative preallocation past EOF is trimmed, as xfs does on the first
  // close only (since Linux 6.12; before, through IDIRTY_RELEASE) and never for a
  // fallocated file. An unlinked file's blocks are freed.
  virtual void release(uint64_t inode, Work& work) = 0;
  // Reads up to out.size() bytes; fewer at EOF. Holes and unwritten extents read
  // as zeros. With O_DIRECT the offset and length must be multiples of the
  // logical block size (else EINVAL) and the device is read; otherwise pages
  // not in the page cache are.
  [[nodiscard]] virtual Result<size_t> read(uint64_t inode, uint64_t offset,
                                            std::span<std::byte> out, int flags, Work& work) = 0;
  // Writes all of `data` at `offset`. O_APPEND writes at EOF; O_DIRECT must be
  // aligned to the logical block size (else EINVAL) and pays the device now;
  // otherwise the data is dirty in the page cache, and with O_SYNC or O_DSYNC
  // written back (its delayed blocks allocated) and committed at once, as a
  // write followed by fdatasync of its range. The allocation units it touches
  // that have no blocks (and, copy-on-write, those it overwrites) are reserved,
  // then allocated now or, with delayed allocation, at fsync, close or
  // writeback; the PreallocationPolicy may add blocks. All or nothing: on
  // ENOSPC nothing is written, reserved or allocated and earlier data is intact.
  [[nodiscard]] virtual Result<size_t> write(uint64_t inode, uint64_t offset,
                                             std::span<const std::byte> data, int flags,
                                             Work& work) = 0;
  // copy_file_range(2): up to `length` bytes of `in` from `in_offset` (fewer at
  // its EOF; 0 past it) written into `out` at `out_offset`, as the write of what
  // a read returned: the destination's blocks are allocated as a write's, holes
  // included (the kernel's splice fallback and ext4 do so; xfs and btrfs would
  // share the extents, which is not modelled). `flags`: the destination's
  // O_SYNC/O_DSYNC, as its writes'. Overlapping ranges of one file: EINVAL. A
  // power cut stops it between chunks. Returns the bytes copied.
  [[nodiscard]] virtual Result<size_t> copy_range(uint64_t in, uint64_t in_offset, uint64_t out,
                                                  uint64_t out_offset, uint64_t length, int flags,
                                                  Work& work) = 0;
  // fallocate(2) with Linux's mode bits. A mode the profile lacks: EOPNOTSUPP,
  // every time (never ENOSYS, which would disable fallocate for the whole mount).
  // PUNCH_HOLE is counted as its own operation, "punch".
  [[nodiscard]] virtual Result<void> fallocate(uint64_t inode, int mode, uint64_t offset,
                                               uint64_t length, Work& work) = 0;
  // Delayed allocation of the file happens now; its dirty data is written back
  // and, when anything of it was not durable, committed, with the namespace
  // changes the profile's durability.metadata commits with it (docs/time.md).
  [[nodiscard]] virtual Result<void> fsync(uint64_t inode, bool datasync, Work& work) = 0;
  // SEEK_DATA or SEEK_HOLE; ENXIO at or past EOF, as Linux.
  [[nodiscard]] virtual Result<uint64_t> seek(uint64_t inode, uint64_t offset, int whence,
                                              Work& work) = 0;
  [[nodiscard]] virtual Result<FilesystemStats> statfs(Work& work) = 0;

  // --- Extended attributes. flags: XATTR_CREATE or XATTR_REPLACE or 0.
  [[nodiscard]] virtual Result<void> setxattr(uint64_t inode, const std::string& name,
                                              std::string_view value, int flags, Work& work) = 0;
  [[nodiscard]] virtual Result<std::string> getxattr(uint64_t inode, const std::string& name,
                                                     Work& work) = 0;
  [[nodiscard]] virtual Result<std::vector<std::string>> listxattr(uint64_t inode, Work& work) = 0;
  [[nodiscard]] virtual Result<void> removexattr(uint64_t inode, const std::string& name,
                                                 Work& work) = 0;

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

  // --- The same operations for callers that do not look at the work.
  Result<Attributes> lookup(uint64_t parent, const std::string& name);
  void forget(uint64_t inode, uint64_t references);
  Result<Attributes> getattr(uint64_t inode);
  Result<Attributes> setattr(uint64_t inode, const AttributeChanges& changes);
  Result<Attributes> create(uint64_t parent, const std::string& name, uint32_t mode, uint64_t rdev,
                            Owner owner, bool open_handle = false);
  Result<Attributes> tmpfile(uint64_t parent, uint32_t mode, Owner owner);
  Result<Attributes> mkdir(uint64_t parent, const std::string& name, uint32_t mode, Owner owner);
  Result<Attributes> symlink(uint64_t parent, const std::string& name, const std::string& target,
                             Owner owner);
  Result<std::string> readlink(uint64_t inode);
  Result<Attributes> link(uint64_t inode, uint64_t new_parent, const std::string& new_name);
  Result<void> unlink(uint64_t parent, const std::string& name);
  Result<void> rmdir(uint64_t parent, const std::string& name);
  Result<void> rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                      const std::string& new_name, unsigned flags);
  Result<std::vector<DirectoryEntry>> read_directory(uint64_t inode);
  Result<void> open(uint64_t inode, int flags);
  Result<void> flush(uint64_t inode, bool writer);
  void release(uint64_t inode);
  Result<size_t> read(uint64_t inode, uint64_t offset, std::span<std::byte> out, int flags = 0);
  Result<size_t> write(uint64_t inode, uint64_t offset, std::span<const std::byte> data,
                       int flags = 0);
  Result<size_t> copy_range(uint64_t in, uint64_t in_offset, uint64_t out, uint64_t out_offset,
                            uint64_t length, int flags = 0);
  Result<void> fallocate(uint64_t inode, int mode, uint64_t offset, uint64_t length);
  Result<void> fsync(uint64_t inode, bool datasync);
  Result<uint64_t> seek(uint64_t inode, uint64_t offset, int whence);
  Result<FilesystemStats> statfs();
  Result<void> setxattr(uint64_t inode, const std::string& name, std::string_view value, int flags);
  Result<std::string> getxattr(uint64_t inode, const std::string& name);
  Result<std::vector<std::string>> listxattr(uint64_t inode);
  Result<void> removexattr(uint64_t inode, const std::string& name);
  CrashReport crash();
};

}  // namespace mimicfs
