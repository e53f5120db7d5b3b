// SPDX-License-Identifier: Apache-2.0
// NfsClientLayer: what a Linux NFS client does between the program and the
// server, on profiles with `client.nfs` (docs/nfs.md): one per mount of the
// volume (NfsClients). The layers below are the server: they see, count and
// charge every client's requests.
//
// Silly rename (fs/nfs/unlink.c, nfs_sillyrename): the server keeps no state of
// which files a client has open, so removing an open file would pull it from
// under its reader. The client renames it instead, to `.nfs` + 16 hex digits
// of the file id + 8 of a counter, in the same directory, and removes that name
// at the last close (nfs_complete_unlink). Unlink of that name while the file
// is open gets EBUSY; the directory cannot be removed (ENOTEMPTY); a client
// that crashes first leaves the file behind, holding its space. A rename onto
// an open file renames the target away the same way first (nfs_rename).
//
// Which files are open comes from OPEN and RELEASE. FUSE sends RELEASE after
// close(2) has returned (fuse_file_put, in the background), so it may reach the
// daemon after the program's next request. A file whose every handle was
// flushed (a FLUSH comes with each close(2), before it returns) less than
// kCloseGrace ago is probably closing: a removal, rmdir or listing waits for
// its RELEASE, at most until then. An exec'd file gets no FLUSH; it counts as
// flushed at its open.
//
// Attribute cache (fs/nfs/inode.c): a client answers stat(2) from the
// attributes it last had from the server while they are younger than its
// attrtimeo (nfs_attribute_cache_expired). attrtimeo starts at acregmin
// (acdirmin for a directory), doubles at each revalidation that finds the file
// unchanged, up to acregmax, and falls back to the minimum when it changed
// (nfs_update_inode); a revalidation that finds new data drops the client's
// pages (NFS_INO_INVALID_DATA). Only what another client changed can make the
// cache differ from the server: a client alone, or a file only this client
// changed, is answered as the server has it, so a single mount is unchanged.
// Age is emulated time (NfsClients::now_ns).
//
// Write-back errors (fs/nfs/write.c, nfs_write_error; fs/nfs/file.c): a
// buffered write lands in the client's page cache and its writeback reaches
// the server after write(2) returned. A server's refusal of it (ENOSPC, EDQUOT,
// EIO, ESTALE, a softerr mount's ETIMEDOUT) loses the data and drops the
// client's pages; the program learns of it at the file's next write
// (nfs_file_write: ENOSPC, EDQUOT and EFBIG only), fsync (nfs_file_fsync) or
// close (nfs_file_flush), whichever the writeback completes under. Here a
// write is sent to the server at once, so that the server allocates as
// before, and its writeback counts as completing under the next of those
// requests that reports it.
//
// Thread-safety: one mutex for the open-file table and the attribute cache,
// never held across a call to the server (which may wait: real latency, a
// frozen volume).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "engine/base/thread_annotations.h"
#include "engine/layers/layer.h"
#include "engine/nfs/record_locks.h"

namespace mimicfs {

class NfsClients;

class NfsClientLayer final : public Layer {
 public:
  // How long after its last FLUSH a file counts as being closed.
  static constexpr std::chrono::seconds kCloseGrace{1};
  // Requests waiting for a close at once. A wait holds the thread serving the
  // request, and the RELEASE it waits for needs one (FuseSession::kMaxThreads
  // counts them); past this, requests do not wait.
  static constexpr int kMaxWaiters = 2;

  // Attributes kept per client; past this many files, the cache starts over.
  static constexpr size_t kMaxCachedAttributes = 1 << 16;

  // What another client's request changed of a file.
  enum class Change { kData, kAttributes };

  // A client of `server`, one of `peers`, named by its mount point; the
  // server's profile says what it does (client.*).
  NfsClientLayer(FileSystem& server, NfsClients& peers, std::string name);

  std::string name() const EXCLUDES(mutex_) {
    std::lock_guard lock(mutex_);
    return name_;
  }
  void set_name(std::string name) EXCLUDES(mutex_) {
    std::lock_guard lock(mutex_);
    name_ = std::move(name);
  }

  // The operations a client changes (serve() below); the rest pass on.
  OperationReply dispatch(const Operation& operation, Work& work) override;

  // Every client reboots with the server: their silly-renamed files stay behind.
  CrashReport crash(Work& work) override;
  // The volume's power cuts and this client's own crashes: a descriptor
  // opened before either gets EIO.
  uint64_t crashes() override { return Layer::crashes() + own_crashes_.load(); }

  // This client's machine crashes (`ctl crash --client`; NfsClients::crash):
  // it reboots as at a power cut, and, with `hold`, stays down (every request
  // but getattr, statfs and release gets EIO) until restart(). The files
  // whose writes since their last sync (fsync, close) it had not written
  // back: their data is lost, as its page cache is.
  std::vector<uint64_t> crash_client(bool hold) EXCLUDES(mutex_);
  void restart() { down_.store(false, std::memory_order_release); }
  // The server still holds its old boot's locks (NfsClients::crash_client).
  bool departed() const { return departed_.load(std::memory_order_acquire); }
  void set_departed(bool departed) { departed_.store(departed, std::memory_order_release); }
  bool down() const { return down_.load(std::memory_order_acquire); }
  // This client wrote `inode` (or is about to): until its next sync here.
  void changed_since_sync(uint64_t inode) EXCLUDES(mutex_);
  // Whether this client wrote `inode` since the file's last sync here.
  bool unsynced(uint64_t inode) EXCLUDES(mutex_);

  // Byte-range locks (fs/nfs/file.c: nfs_lock, nfs_flock): fcntl locks
  // (kPosix) and flock() locks, which the client sends as whole-file fcntl
  // locks. The server holds them for every client (NfsClients::locks) but
  // the kinds client.local_lock keeps here, in this client's own tables.
  // `request.owner.id` is this client kernel's lock owner. ESTALE for a file
  // another client removed.
  enum class LockKind { kPosix, kFlock };
  // Whether flock() locks stay on this client (local_lock=flock or all).
  bool flock_is_local() const { return local_flock_; }
  // The conflict F_GETLK reports: another client's has no pid (0), as the
  // server's LOCKT reply has none (decode_lock_denied). A request the server
  // answers waits for it through an outage, or times out (reach_server).
  // A request held by the grace period after a server restart is charged its
  // retries in `work.fault_latency_ns`.
  Result<std::optional<RecordLock>> test_lock(uint64_t inode, RecordLock request, Work& work);
  // Takes or gives back a lock; `wait` makes it wait for a conflicting one
  // (RecordLocks::set). Taking one, here or on the server, is a cache
  // coherency point (do_setlk: nfs_zap_caches): the file is revalidated as
  // at an open, and the kernel's pages dropped if another client changed its
  // data (Work::drop_cached_pages).
  Result<void> set_lock(uint64_t inode, RecordLock request, LockKind kind, LockWait* wait,
                        Work& work);
  void interrupt_lock_wait(LockWait& wait);
  // Lock requests waiting now, in every table of the daemon.
  int lock_waiters() const;
  // A close's FLUSH gives back `owner`'s locks of the file; its RELEASE those
  // set through the open file `handle`.
  void release_locks(uint64_t inode, uint64_t owner);
  void release_handle_locks(uint64_t inode, uint64_t handle);
  // Locks this client failed to reclaim after a server restart (NfsClients):
  // until their owner unlocks them or closes the file, reads and writes
  // through the open file `handle` that set one get EIO
  // (nfs4_select_rw_stateid: NFS_LOCK_LOST); a write is then flagged
  // kLockLost and never sent.
  void locks_lost(const std::vector<std::pair<uint64_t, RecordLock>>& lost) EXCLUDES(mutex_);
  // A read or write through `handle` is a request: one after a server
  // restart first learns of it (NfsClients::contact).
  bool lock_lost(uint64_t inode, uint64_t handle) EXCLUDES(mutex_);

  // Adds this client's counters ("client") and every client's ("clients").
  StatsSnapshot snapshot() override;
  // Every client's counters and the server's.
  void reset_statistics() override;

  // Told, on another client's request, of a file whose attributes that client
  // changed and this one has cached: the mount drops what its kernel keeps of
  // them, so that its next stat asks this client's cache. Cleared with {};
  // a clear waits for a call under way.
  using ChangeObserver = std::function<void(uint64_t inode)>;
  void set_change_observer(ChangeObserver observer) EXCLUDES(observer_mutex_);

  // What NfsClients tells one client of the others and of a power cut.
  void removed_elsewhere(uint64_t inode) EXCLUDES(mutex_);
  void changed_elsewhere(uint64_t inode, Change what) EXCLUDES(mutex_);
  ClientStats client_stats() EXCLUDES(mutex_);
  void reboot() EXCLUDES(mutex_);
  // A client mounted or gone: what was cached while this one was alone (or
  // with another) may be older than its own changes since.
  void forget_attributes() EXCLUDES(mutex_);
  void reset_client_statistics() EXCLUDES(mutex_);

 protected:
  // ESTALE for a request about a stale file.
  Result<void> enter(const Call& call, Work& work) override;
  // Tells the other clients of a change of a file's data or attributes.
  void leave(const Call& call, Work& work, int error) override;

 private:
  Result<Attributes> serve(const ops::Lookup& request, Work& work);
  Result<void> serve(const ops::Forget& request, Work& work);
  Result<Attributes> serve(const ops::Getattr& request, Work& work);
  Result<Attributes> serve(const ops::Create& request, Work& work);
  Result<Attributes> serve(const ops::Tmpfile& request, Work& work);
  Result<Attributes> serve(const ops::Mkdir& request, Work& work);
  Result<Attributes> serve(const ops::Symlink& request, Work& work);
  Result<Attributes> serve(const ops::Link& request, Work& work);
  Result<void> serve(const ops::Open& request, Work& work);
  Result<void> serve(const ops::Flush& request, Work& work);
  Result<void> serve(const ops::Fsync& request, Work& work);
  Result<void> serve(const ops::Release& request, Work& work);
  Result<void> serve(const ops::Unlink& request, Work& work);
  Result<void> serve(const ops::Rmdir& request, Work& work);
  Result<std::vector<DirectoryEntry>> serve(const ops::ReadDirectory& request, Work& work);
  Result<void> serve(const ops::Rename& request, Work& work);
  Result<size_t> serve(const ops::Write& request, Work& work);
  // Every other operation goes to the server as it is.
  template <typename R>
  ReplyOf<R> serve(const R& request, Work& work) {
    return pass(request, work);
  }

  using Clock = std::chrono::steady_clock;
  struct OpenFile {
    uint32_t handles = 0;  // OPENs not yet RELEASEd
    uint32_t flushes = 0;  // FLUSHes of handles that may be closing
    Clock::time_point last_flush{};
    // Opened before the last power cut: their RELEASEs still come, but the
    // rebooted client does not count them as open.
    uint32_t handles_before_crash = 0;
    // Removed on the server by another client while open here.
    bool stale = false;
    // Write-back errors (errseq on the file's mapping): a refused write's, not
    // seen yet (its writeback is under way), and one seen, not yet reported to
    // an fsync or a write.
    int unseen_error = 0;
    int unreported_error = 0;
    // Set once renamed away: the name its last close removes.
    uint64_t silly_parent = 0;
    std::string silly_name;
    bool renaming = false;  // a silly rename of it is under way
    bool removing = false;  // its last close is removing its silly name
  };
  struct CachedAttributes {
    Attributes attributes;          // as this client last had them from the server
    uint64_t fetched_ns = 0;        // when (nfsi->read_cache_jiffies)
    uint64_t timeout_ns = 0;        // nfsi->attrtimeo
    uint64_t timeout_since_ns = 0;  // nfsi->attrtimeo_timestamp
    bool known = false;              // a marker until the server's attributes come
    bool changed_elsewhere = false;  // another client changed the file since
    bool data_changed_elsewhere = false;  // its data, not only its attributes
    // The kernel was told to drop its attributes since they were last given
    // to it: another client's next change need not tell it again.
    bool kernel_told = false;
  };

  // The attributes this client answers `inode`'s stat with, if they are
  // cached, young enough, and no longer the server's.
  std::optional<Attributes> cached_attributes(uint64_t inode) EXCLUDES(mutex_);
  // `inode`'s entry, added if missing (the whole cache starts over past
  // kMaxCachedAttributes).
  std::unordered_map<uint64_t, CachedAttributes>::iterator cache_entry(uint64_t inode)
      REQUIRES(mutex_);
  // The server's attributes of a file, just fetched (nfs_update_inode), by a
  // request that started at `generation`.
  void fetched(const Attributes& fresh, uint64_t generation, Work& work) EXCLUDES(mutex_);
  uint64_t generation() EXCLUDES(mutex_);
  // Tells the others that `inode` changed, and forgets this client's own
  // attributes of it: the reply to its change brought the new ones.
  void changed_here(uint64_t inode, Change what) EXCLUDES(mutex_);
  // Whether the cache can differ from the server: another client, and no noac.
  bool caching() const;

  // What a name's file is to a removal: not open here, open (the caller
  // renames it away), already under a silly name, or renamed meanwhile.
  enum class Busy { kNo, kOpen, kRenamed, kMoved };

  void opened(uint64_t inode, bool flushed) EXCLUDES(mutex_);
  // What an open (and a lock) does to the client's caches of a file: its
  // attributes are fetched again unless still the server's, and its pages
  // dropped if another client changed its data since.
  void revalidate(uint64_t inode, Work& work) EXCLUDES(mutex_);
  // Unlinks `name` of `parent`, file `inode`, and tells the other clients.
  Result<void> remove(uint64_t parent, const std::string& name, uint64_t inode, Work& work);
  // A buffered write's writeback: sends it to the server, and keeps the
  // server's refusal to report later. What to return now.
  Result<size_t> write_back(uint64_t inode, uint64_t offset, std::span<const std::byte> data,
                            int flags, Work& work);
  // The writeback under way of `inode` completes: its error is seen (0: none).
  int writeback_completes(uint64_t inode) EXCLUDES(mutex_);
  // nfs_file_write reports the ENOSPC, EDQUOT or EFBIG of a writeback that
  // failed under it (a stream of writes fills the cache and the writeback
  // runs meanwhile); the rest wait for an fsync or close. That error, seen.
  int reported_by_write(uint64_t inode) EXCLUDES(mutex_);
  // Takes the error seen and not yet reported (0: none).
  int take_unreported_error(uint64_t inode) EXCLUDES(mutex_);
  bool lost_through(uint64_t inode, uint64_t handle) EXCLUDES(mutex_);
  // Forgets the lost locks of `inode` that `matches` (their owner gave them back).
  void forget_lost(uint64_t inode, const std::function<bool(const RecordLock&)>& matches)
      EXCLUDES(mutex_);
  // An unlock by `unlock.owner` of its range: those parts of its lost locks go.
  void unlock_lost(uint64_t inode, const RecordLock& unlock) EXCLUDES(mutex_);
  // A buffered write's writeback failed with `error`: reported later.
  void writeback_failed(uint64_t inode, int error, Work& work) EXCLUDES(mutex_);
  // A write through a lost lock: refused before it is sent (kLockLost).
  Result<size_t> refuse_lost_lock_write(uint64_t inode, size_t size, int flags, Work& work)
      EXCLUDES(mutex_);
  // Whether `inode` was removed elsewhere, not open here; counts the request.
  bool gone(uint64_t inode) EXCLUDES(mutex_);
  void mark_gone(uint64_t inode) REQUIRES(mutex_);
  // The kernel has one more lookup of `inode` (a LOOKUP's or a create's reply).
  void looked_up(uint64_t inode) EXCLUDES(mutex_);
  // Tells the other clients what the server removed (Work::unlinked_inodes).
  void tell_removals(Work& work);
  // Whether `inode` is stale here; counts the request when it is.
  bool stale(uint64_t inode) EXCLUDES(mutex_);
  // Erases a file no handle holds any more.
  void forget_file(std::unordered_map<uint64_t, OpenFile>::iterator it) REQUIRES(mutex_);
  // Whether `inode` (named `name` in `parent`) is open here, after waiting
  // for the RELEASE of a file being closed or for a rename of it under way.
  Busy busy(uint64_t parent, const std::string& name, uint64_t inode) EXCLUDES(mutex_);
  // Renames the open file `name` (inode `inode`) of `parent` away.
  Result<void> silly_rename(uint64_t parent, const std::string& name, uint64_t inode, Work& work);
  // The REMOVE of a closed file's silly name, if it is still that file's.
  void remove_silly_name(uint64_t inode, uint64_t parent, const std::string& name, Work& work);
  void finished_removal(uint64_t inode) REQUIRES(mutex_);
  // Waits, at most kCloseGrace, until no silly-renamed file of `directory` is
  // being closed or removed.
  void wait_for_silly_deletes(uint64_t directory) EXCLUDES(mutex_);
  bool closing(const OpenFile& file) const;
  bool silly_delete_pending(uint64_t directory) const REQUIRES(mutex_);
  // Waits on released_ until `deadline`, unless kMaxWaiters already do.
  bool wait(std::unique_lock<std::mutex>& lock, Clock::time_point deadline) REQUIRES(mutex_);

  NfsClients& peers_;
  // client.local_lock: the kinds of lock kept here, in tables of their own
  // (a local flock never conflicts with an fcntl lock).
  const bool local_posix_;
  const bool local_flock_;
  RecordLocks local_posix_locks_;
  RecordLocks local_flock_locks_;
  RecordLocks& table(LockKind kind);
  std::mutex observer_mutex_;  // after mutex_ and the registry's, never before
  ChangeObserver change_observer_ GUARDED_BY(observer_mutex_);
  const bool silly_rename_;
  const bool noac_;
  // The attribute cache's bounds: regular files (and all but directories), directories.
  const uint64_t acregmin_ns_, acregmax_ns_, acdirmin_ns_, acdirmax_ns_;
  mutable std::mutex mutex_;
  std::string name_ GUARDED_BY(mutex_);
  std::condition_variable released_;
  std::unordered_map<uint64_t, OpenFile> open_ GUARDED_BY(mutex_);
  uint32_t silly_counter_ GUARDED_BY(mutex_) = 0;  // as nfs_sillyrename's static sillycounter
  uint64_t silly_renames_ GUARDED_BY(mutex_) = 0;
  uint64_t stale_requests_ GUARDED_BY(mutex_) = 0;
  uint64_t stale_attributes_ GUARDED_BY(mutex_) = 0;
  uint64_t lock_conflicts_ GUARDED_BY(mutex_) = 0;
  uint64_t deferred_write_errors_ GUARDED_BY(mutex_) = 0;
  uint64_t lost_locks_ GUARDED_BY(mutex_) = 0;
  uint64_t client_crashes_ GUARDED_BY(mutex_) = 0;
  // Files written here since their last fsync or close here: what this
  // client's crash loses. Past kMaxUnsynced, new ones are not tracked.
  static constexpr size_t kMaxUnsynced = 1 << 16;
  std::unordered_set<uint64_t> unsynced_ GUARDED_BY(mutex_);
  std::atomic<uint64_t> own_crashes_{0};
  std::atomic<bool> down_{false};
  std::atomic<bool> departed_{false};
  // The locks lost after a server restart and not yet given back, by inode.
  std::unordered_map<uint64_t, std::vector<RecordLock>> lost_ GUARDED_BY(mutex_);
  std::atomic<size_t> lost_locks_held_{0};  // in lost_: while 0, no I/O looks
  std::unordered_map<uint64_t, CachedAttributes> attributes_ GUARDED_BY(mutex_);
  // Moves with every change and reboot: a fetch that saw it move keeps nothing.
  uint64_t generation_ GUARDED_BY(mutex_) = 0;
  // Files whose data another client changed since this one last opened them.
  // Past kMaxChangedElsewhere, every open drops its pages: bounded memory, and
  // a page cache never older than the server.
  static constexpr size_t kMaxChangedElsewhere = 1 << 16;
  std::unordered_set<uint64_t> changed_elsewhere_ GUARDED_BY(mutex_);
  bool all_changed_elsewhere_ GUARDED_BY(mutex_) = false;
  int waiters_ GUARDED_BY(mutex_) = 0;
  // Set at the first write the server refused: until then, no request looks
  // for a write-back error (set under mutex_, so one found is seen).
  std::atomic<bool> writes_refused_{false};
  // Stale files in open_: while 0, no request looks for one.
  std::atomic<uint32_t> stale_files_{0};
  // The inodes this client's kernel has, with its lookup counts (FUSE's
  // nlookup): what another client's removal can make stale here. Past
  // kMaxKnown, new ones are not tracked (no ESTALE for them: ENOENT).
  static constexpr size_t kMaxKnown = 1 << 20;
  std::unordered_map<uint64_t, uint64_t> known_ GUARDED_BY(mutex_);
  // Of those, the files and directories another client removed, not open here.
  std::unordered_set<uint64_t> gone_ GUARDED_BY(mutex_);
  std::atomic<size_t> gone_files_{0};  // gone_.size(): while 0, no request looks
};

}  // namespace mimicfs
