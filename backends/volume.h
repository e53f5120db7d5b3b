// Volume: the emulated filesystem, the one API the FUSE adapter (and the unit
// tests) call. Inodes, directories, attributes, links, xattrs, and the
// POSIX-shaped operations, each returning a result or an errno the emulated
// backend would give.
//
// Emulated time: every operation is charged by the CostModel for what it did
// (bytes, device requests, extents spanned, holes filled, commits, extents freed)
// and the total goes to the EmulatedClock, per operation class and per file.
// Buffered writes cost memory and stay dirty in the file's FilePageCache until
// fsync, an O_SYNC/O_DSYNC write, close on NFS (flush_on_close) or the dirty
// limit; O_DIRECT goes to the device at once and must be aligned. What a power
// cut would lose is kept by FileDurability and the namespace journal; crash()
// drops it. Fault rules (FaultInjector) are checked first, by path.
//
// Thread-safety: every public method may be called from any thread.
// Lock order (acquire left to right, never the reverse):
//   Volume::namespace_mutex_ -> Inode::mutex -> ExtentReferences -> Allocator -> counters
// No lock is held while the EmulatedClock waits (real latency mode).
//
// Allocation: a write reserves the blocks it needs (so ENOSPC comes at once and
// nothing is half done), then either allocates them or, on a profile with delayed
// allocation, records them in the file's delayed set until fsync, close or
// writeback. Where blocks go is the PlacementPolicy's choice, how many extra a
// growing file gets is the PreallocationPolicy's, and on a copy-on-write profile
// ExtentReferences decides when freed blocks really become free.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/allocator.h"
#include "backends/block_range_set.h"
#include "backends/cost_model.h"
#include "backends/data_store.h"
#include "backends/durability.h"
#include "backends/emulated_clock.h"
#include "backends/extent_map.h"
#include "backends/extent_references.h"
#include "backends/fault_injector.h"
#include "backends/layout.h"
#include "backends/page_cache.h"
#include "backends/placement_policy.h"
#include "backends/preallocation_policy.h"
#include "backends/profile.h"
#include "backends/result.h"
#include "backends/stats.h"
#include "backends/wall_clock.h"

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

// setattr's changes; an absent field is left alone. A timestamp whose tv_nsec is
// UTIME_NOW is set to the volume's current time.
struct AttributeChanges {
  std::optional<uint32_t> mode;  // permission bits only
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::optional<uint64_t> size;
  std::optional<timespec> atime;
  std::optional<timespec> mtime;
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

class Volume {
 public:
  static constexpr uint64_t kRootInode = 1;
  // Inode numbers below this are never handed out: the adapter may use them.
  static constexpr uint64_t kFirstFileInode = 16;

  Volume(Profile profile, std::unique_ptr<DataStore> store, const WallClock& clock,
         LatencyMode latency = {});
  ~Volume();
  Volume(const Volume&) = delete;
  Volume& operator=(const Volume&) = delete;

  const Profile& profile() const { return profile_; }

  // --- Namespace. Each call that returns an entry's Attributes takes one
  // reference on that inode for the caller (the kernel's lookup count); forget()
  // drops them. An unlinked inode lives until its last reference is dropped.
  [[nodiscard]] Result<Attributes> lookup(uint64_t parent, const std::string& name);
  void forget(uint64_t inode, uint64_t references);
  [[nodiscard]] Result<Attributes> getattr(uint64_t inode);
  [[nodiscard]] Result<Attributes> setattr(uint64_t inode, const AttributeChanges& changes);
  // Regular files, FIFOs, sockets and device nodes (type from `mode`).
  // With `open_handle`, the new file is also open (FUSE's CREATE): one handle,
  // released by release(), and no separate "open" is counted.
  [[nodiscard]] Result<Attributes> create(uint64_t parent, const std::string& name, uint32_t mode,
                                          uint64_t rdev, Owner owner, bool open_handle = false);
  [[nodiscard]] Result<Attributes> mkdir(uint64_t parent, const std::string& name, uint32_t mode,
                                         Owner owner);
  [[nodiscard]] Result<Attributes> symlink(uint64_t parent, const std::string& name,
                                           const std::string& target, Owner owner);
  [[nodiscard]] Result<std::string> readlink(uint64_t inode);
  [[nodiscard]] Result<Attributes> link(uint64_t inode, uint64_t new_parent,
                                        const std::string& new_name);
  [[nodiscard]] Result<void> unlink(uint64_t parent, const std::string& name);
  [[nodiscard]] Result<void> rmdir(uint64_t parent, const std::string& name);
  // flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE (others: EINVAL).
  [[nodiscard]] Result<void> rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                                    const std::string& new_name, unsigned flags);
  // ".", ".." and the entries, in name order.
  [[nodiscard]] Result<std::vector<DirectoryEntry>> read_directory(uint64_t inode);

  // --- Files. `flags` are open(2)'s.
  // O_TRUNC empties a regular file, as open(2) does. Each open is one handle,
  // until release(). O_DIRECT on a profile without direct I/O: EINVAL.
  [[nodiscard]] Result<void> open(uint64_t inode, int flags);
  // close(2) of a descriptor opened for writing (`writer`): delayed allocation
  // happens now and, when this is the file's last open handle, the last-close
  // work too (see release()). On NFS (flush_on_close) the file's dirty data is
  // written back and committed: it is durable. Closing a read-only descriptor
  // changes nothing.
  [[nodiscard]] Result<void> flush(uint64_t inode, bool writer);
  // The last reference to an open handle is gone. When it was the file's last
  // handle: delayed allocation happens, an inode reservation is given back and
  // speculative preallocation past EOF is trimmed, as xfs does on the first
  // close only (since Linux 6.12; before, through IDIRTY_RELEASE) and never for a
  // fallocated file. An unlinked file's blocks are freed.
  void release(uint64_t inode);
  // Reads up to out.size() bytes; fewer at EOF. Holes and unwritten extents read
  // as zeros. `flags` are the descriptor's: with O_DIRECT the offset and length
  // must be multiples of the logical block size (else EINVAL) and the device is
  // read; otherwise pages not in the page cache are.
  [[nodiscard]] Result<size_t> read(uint64_t inode, uint64_t offset, std::span<std::byte> out,
                                    int flags = 0);
  // Writes all of `data` at `offset`. `flags` are the descriptor's: O_APPEND
  // writes at EOF; O_DIRECT must be aligned to the logical block size (else
  // EINVAL) and pays the device now; otherwise the data is dirty in the page
  // cache, and with O_SYNC or O_DSYNC written back and committed at once, as a
  // write followed by fdatasync of its range. The allocation units
  // it touches that have no blocks (and, copy-on-write, those it overwrites) are
  // reserved, then allocated now or, with delayed allocation, at fsync, close or
  // writeback; the PreallocationPolicy may add blocks. All or nothing: on ENOSPC
  // nothing is written, reserved or allocated and earlier data is intact.
  [[nodiscard]] Result<size_t> write(uint64_t inode, uint64_t offset,
                                     std::span<const std::byte> data, int flags = 0);
  // fallocate(2) with Linux's mode bits. A mode the profile lacks: EOPNOTSUPP,
  // every time (never ENOSYS, which would disable fallocate for the whole mount).
  // PUNCH_HOLE is counted as its own operation, "punch".
  [[nodiscard]] Result<void> fallocate(uint64_t inode, int mode, uint64_t offset, uint64_t length);
  // Delayed allocation of the file happens now; its dirty data is written back
  // and, when anything of it was not durable, committed. On a journal profile any
  // fsync (of a file or a directory) also makes every namespace change durable.
  [[nodiscard]] Result<void> fsync(uint64_t inode, bool datasync);
  // SEEK_DATA or SEEK_HOLE; ENXIO at or past EOF, as Linux.
  [[nodiscard]] Result<uint64_t> seek(uint64_t inode, uint64_t offset, int whence);
  FilesystemStats statfs();

  // --- Extended attributes. flags: XATTR_CREATE or XATTR_REPLACE or 0.
  [[nodiscard]] Result<void> setxattr(uint64_t inode, const std::string& name,
                                      std::string_view value, int flags);
  [[nodiscard]] Result<std::string> getxattr(uint64_t inode, const std::string& name);
  [[nodiscard]] Result<std::vector<std::string>> listxattr(uint64_t inode);
  [[nodiscard]] Result<void> removexattr(uint64_t inode, const std::string& name);

  // --- Statistics.
  [[nodiscard]] Result<FileStats> file_stats(uint64_t inode);
  [[nodiscard]] Result<std::vector<Extent>> file_extents(uint64_t inode);
  StatsSnapshot snapshot();
  // Every file's extents with their device positions (O(total extents)).
  DeviceLayout layout();
  // Zeroes the operation counters and every emulated time.
  void reset_counters();

  // --- Emulated time, durability and faults.
  // A power cut: every file goes back to its last sync (size and contents),
  // dirty pages are dropped, and on a journal profile the entries created or
  // renamed since the last commit are undone. Open handles stay open.
  CrashReport crash();
  FaultInjector& faults() { return faults_; }
  void set_latency(LatencyMode mode) { emulated_clock_.set_mode(mode); }
  LatencyMode latency() const { return emulated_clock_.mode(); }
  uint64_t emulated_ns() const { return emulated_clock_.total_ns(); }

 private:
  struct Inode;
  struct Charge;
  struct NamespaceChange;

  std::shared_ptr<Inode> find(uint64_t inode);                      // takes namespace_mutex_
  std::shared_ptr<Inode> find_locked(uint64_t inode);               // requires namespace_mutex_
  Result<std::shared_ptr<Inode>> directory_locked(uint64_t inode);  // requires namespace_mutex_
  Result<Attributes> add_entry_locked(Inode& parent, const std::string& name,
                                      std::shared_ptr<Inode> child);  // requires namespace_mutex_
  // Drops one link of `child`, destroying it when unreferenced; requires
  // namespace_mutex_. Returns the extents freed when it was a file's last link.
  uint64_t drop_link_locked(const std::shared_ptr<Inode>& child);
  void destroy_locked(const std::shared_ptr<Inode>& inode);  // requires namespace_mutex_
  // Frees every block and byte of a file that is gone. Requires inode.mutex.
  void release_storage(Inode& inode);
  // A new inode in `parent`'s allocation group; a directory starts the next group.
  std::shared_ptr<Inode> new_inode(uint32_t mode, Owner owner, const Inode& parent);
  Attributes attributes(const Inode& inode) const;  // requires inode.mutex

  Result<Attributes> do_setattr(Inode& inode, const AttributeChanges& changes);
  void truncate_locked(Inode& inode, uint64_t size);  // requires inode.mutex
  // The fault rules' verdict on `op` for the inode (or entry `name` in directory
  // `inode`): the error to return, and any latency spike added to `charge`.
  Result<void> inject(Op op, uint64_t inode, std::string_view name, Charge& charge);
  std::string path_locked(uint64_t inode);  // requires namespace_mutex_
  // Writes `data` at `offset` (reserving and allocating); no cost, no page cache.
  // Requires inode.mutex.
  Result<size_t> write_locked(Inode& inode, uint64_t offset, std::span<const std::byte> data);
  // Saves the synced contents [offset, offset+length) is about to lose. Requires inode.mutex.
  void prepare_change(Inode& inode, uint64_t offset, uint64_t length);
  // Writes the dirty data inside [offset, offset+length) to the device; with
  // `allocate`, delayed allocation happens first. Returns its cost. Requires inode.mutex.
  Cost writeback_locked(Inode& inode, uint64_t offset, uint64_t length, bool allocate);
  // The device requests for [offset, offset+length) of the file. Requires inode.mutex.
  DeviceWork device_work(const Inode& inode, uint64_t offset, uint64_t length) const;
  // Namespace changes since the last commit become durable; true when there were
  // any. Requires namespace_mutex_.
  bool commit_namespace_locked();
  void restore_durable_locked(Inode& inode);  // requires inode.mutex
  // Maps every hole among blocks [first, first+count) that is not awaiting delayed
  // allocation to newly allocated blocks, all or nothing (ENOSPC). Requires inode.mutex.
  Result<void> allocate_holes(Inode& inode, uint64_t first, uint64_t count, bool unwritten);
  // Maps blocks [logical, logical+count) of a file, which must be unmapped, from its
  // reservation or new blocks; the caller has reserved `count` blocks. With
  // `preallocate`, the PreallocationPolicy may add blocks. Requires inode.mutex.
  void allocate_range(Inode& inode, uint64_t logical, uint64_t count, bool unwritten,
                      bool preallocate);
  // Gives blocks a file no longer uses back (through ExtentReferences on a
  // copy-on-write profile). Requires inode.mutex.
  void free_blocks(const std::vector<BlockRange>& runs);
  // Allocates every delayed block of the file. Requires inode.mutex.
  void flush_delayed(Inode& inode);
  void discard_reservation(Inode& inode);  // requires inode.mutex
  // What closing the file's last handle does. Requires inode.mutex.
  void last_close(Inode& inode);
  // Frees whole blocks inside [offset, offset+length) and zeroes the bytes of the
  // rest. Requires inode.mutex.
  void punch_locked(Inode& inode, uint64_t offset, uint64_t length);
  Result<void> do_fallocate(Inode& inode, int mode, uint64_t offset, uint64_t length);
  FileStats file_stats_locked(const Inode& inode) const;  // requires inode.mutex
  DeviceStats device_stats() const;
  // Calls `visit` with each regular file's path and inode (its mutex held);
  // takes namespace_mutex_.
  void for_each_file(const std::function<void(const std::string&, const Inode&)>& visit);

  const Profile profile_;
  const uint64_t unit_;  // profile_.allocation_unit, in bytes
  const std::unique_ptr<DataStore> store_;
  const WallClock& clock_;
  const std::unique_ptr<PlacementPolicy> placement_;
  const std::unique_ptr<PreallocationPolicy> preallocation_;  // null: none
  Allocator allocator_;
  const std::unique_ptr<ExtentReferences> references_;  // copy-on-write profiles only
  OperationCounters counters_;
  const CostModel costs_;
  EmulatedClock emulated_clock_;
  FaultInjector faults_;
  std::atomic<uint64_t> dirty_bytes_{0};  // in every file's page cache

  std::mutex namespace_mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<Inode>> inodes_;  // guarded by namespace_mutex_
  uint64_t next_inode_ = kFirstFileInode;                        // guarded by namespace_mutex_
  uint64_t next_directory_group_ = 1;                            // guarded by namespace_mutex_
  std::vector<NamespaceChange> uncommitted_;                     // guarded by namespace_mutex_
};

}  // namespace mimicfs
