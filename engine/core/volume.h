// SPDX-License-Identifier: Apache-2.0
// Volume: the core of the engine, the emulated filesystem itself, as a
// coordinator of its parts: the Namespace (inode table, directories, links,
// rename, and the journal of changes not yet committed), each regular file's
// RegularFile (page cache, direct I/O, sync of a range, allocation, crash
// state), the DeviceSpace (the device's blocks) and DeferredWork. It keeps
// attributes and xattrs, what happens to a file's storage when its last link
// goes, the crash's order, and the stats and layout snapshot. It implements FileSystem
// (file_system.h, where each operation's contract is) and reports each operation's work (work.h);
// emulated time, faults and counting are layers over it (layer.h, engine.h).
//
// Thread-safety: every public method may be called from any thread.
// Lock order (acquire left to right, never the reverse):
//   Namespace::mutex_ -> Inode::mutex -> ExtentReferences -> Allocator
// Layers' own locks (CostLayer::files_mutex_ and schedule_mutex_,
// OperationCounters' errors mutex, FaultInjector::mutex_), DeferredWork's,
// GroupLocks' (taken under Inode::mutex, never with the Allocator's) and the
// Volume's journal_mutex_ are leaves, never held while calling into the Volume
// or running a task's effect.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/base/thread_annotations.h"
#include "engine/data/data_store.h"
#include "engine/durability/page_cache.h"
#include "engine/file/inode.h"
#include "engine/file/regular_file.h"
#include "engine/fs/file_system.h"
#include "engine/fs/result.h"
#include "engine/namespace/namespace.h"
#include "engine/profile/profile.h"
#include "engine/space/device_space.h"
#include "engine/stats/layout.h"
#include "engine/time/deferred_work.h"
#include "engine/time/wall_clock.h"

namespace mimicfs {

class Volume final : public FileSystem {
 public:
  Volume(Profile profile, std::unique_ptr<DataStore> store, const WallClock& clock);
  ~Volume() override;
  Volume(const Volume&) = delete;
  Volume& operator=(const Volume&) = delete;

  const Profile& profile() const override { return profile_; }

  OperationReply dispatch(const Operation& operation, Work& work) override;
  CrashReport crash(Work& work) override;
  uint64_t crashes() override { return crashes_.load(); }
  // An NFS client's crash (Engine::crash_client): `files` lose what they
  // wrote since their last sync, as at a power cut, and nothing else does.
  // The report lists every regular file in dropped_caches (the client's
  // kernel starts empty) and the files put back in restored_files.
  CrashReport lose_unsynced(const std::vector<uint64_t>& files);
  uint64_t write_back_at_random(double fraction, uint64_t seed) override;
  void sync_all(Work& work) override;
  BackgroundReport background(uint64_t now_ns, bool flush, bool commit, Work& work) override;

  bool complete_deferred(uint64_t id) override { return deferred_.complete(id); }
  size_t complete_all_deferred() override { return deferred_.complete_all(); }

  // The whole volume for an image (volume_image.h): synced first, its deferred
  // work done, then its namespace, files and device. No operation may run.
  ImageJson save_image();
  // An image into this new volume, its file contents reopened from the store.
  // Throws ImageError (or nlohmann::json::exception) when the image is malformed.
  void load_image(const ImageJson& image);
  std::string path(uint64_t inode) override;
  Result<Attributes> entry(uint64_t parent, const std::string& name) override;
  Result<FileStats> file_stats(uint64_t inode) override;
  Result<std::vector<Extent>> file_extents(uint64_t inode) override;
  StatsSnapshot snapshot() override;
  DeviceLayout layout() override;
  void reset_statistics() override {}  // the core keeps no counters

  using FileSystem::crash;
  using FileSystem::sync_all;

 private:
  // Each operation (operations.h; its contract is at its call in file_system.h).
  Result<Attributes> serve(const ops::Lookup& request, Work& work);
  Result<void> serve(const ops::Forget& request, Work& work);
  Result<Attributes> serve(const ops::Getattr& request, Work& work);
  Result<Attributes> serve(const ops::Setattr& request, Work& work);
  Result<Attributes> serve(const ops::Create& request, Work& work);
  Result<Attributes> serve(const ops::Tmpfile& request, Work& work);
  Result<Attributes> serve(const ops::Mkdir& request, Work& work);
  Result<Attributes> serve(const ops::Symlink& request, Work& work);
  Result<std::string> serve(const ops::Readlink& request, Work& work);
  Result<Attributes> serve(const ops::Link& request, Work& work);
  Result<void> serve(const ops::Unlink& request, Work& work);
  Result<void> serve(const ops::Rmdir& request, Work& work);
  Result<void> serve(const ops::Rename& request, Work& work);
  Result<std::vector<DirectoryEntry>> serve(const ops::ReadDirectory& request, Work& work);
  Result<void> serve(const ops::Open& request, Work& work);
  Result<void> serve(const ops::Flush& request, Work& work);
  Result<void> serve(const ops::Release& request, Work& work);
  Result<size_t> serve(const ops::Read& request, Work& work);
  Result<size_t> serve(const ops::Write& request, Work& work);
  Result<size_t> serve(const ops::CopyRange& request, Work& work);
  Result<void> serve(const ops::Fallocate& request, Work& work);
  Result<void> serve(const ops::Fsync& request, Work& work);
  Result<uint64_t> serve(const ops::Seek& request, Work& work);
  Result<FilesystemStats> serve(const ops::Statfs& request, Work& work);
  Result<void> serve(const ops::Setxattr& request, Work& work);
  Result<std::string> serve(const ops::Getxattr& request, Work& work);
  Result<std::vector<std::string>> serve(const ops::Listxattr& request, Work& work);
  Result<void> serve(const ops::Removexattr& request, Work& work);

  // A regular file's last link went: the extents it frees are the unlink's
  // work, and its storage goes unless it is open. Requires file->mutex.
  void last_link_locked(const std::shared_ptr<Inode>& file, Work& work) REQUIRES(file->mutex);
  // Frees a gone file's storage: now, or (background_reclaim) by a deferred
  // task added to `work`. Requires inode->mutex.
  void release_storage_locked(Inode& inode) REQUIRES(inode.mutex);
  void free_storage_locked(const std::shared_ptr<Inode>& inode, Work& work) REQUIRES(inode->mutex);
  // The regular file a read or write of [offset, offset+length) goes to, checked
  // (EISDIR, EINVAL; O_DIRECT alignment).
  Result<std::shared_ptr<Inode>> file_for_io(uint64_t inode, uint64_t offset, uint64_t length,
                                             int flags);
  Result<Attributes> do_setattr(Inode& inode, const AttributeChanges& changes)
      REQUIRES(inode.mutex);
  // Clears set-ID bits (and security.capability) as SetIdClearing says, for
  // CallerScope's caller; true when something went.
  bool kill_suidgid_locked(Inode& inode, SetIdClearing why) REQUIRES(inode.mutex);
  Result<void> do_fallocate(Inode& inode, int mode, uint64_t offset, uint64_t length, Work& work)
      REQUIRES(inode.mutex);
  Result<size_t> do_write(uint64_t inode, uint64_t offset, std::span<const std::byte> data,
                          int flags, Work& work);
  Result<void> fallocate_once(uint64_t inode, int mode, uint64_t offset, uint64_t length,
                              Work& work);
  // Runs `attempt`; when it finds no space and background tasks are freeing
  // some, completes every task (as xfs flushes its inode inactivation queue
  // before it gives up an allocation) and runs it once more. No lock held.
  template <typename Attempt>
  auto retry_after_reclaim(Work& work, Attempt&& attempt) -> decltype(attempt());
  // Around a change of a regular file's size, attributes or allocation: on a
  // synchronous profile (NFS) the client writes back and commits the file
  // first, and the server commits the change before it replies.
  void before_attribute_change(Inode& inode, Work& work) REQUIRES(inode.mutex);
  // A rename over an entry writes the source back first (write_back_on_replace).
  void write_back_before_replace(uint64_t parent, const std::string& name, uint64_t new_parent,
                                 const std::string& new_name, unsigned flags, Work& work);
  // After a flush, close or sync of a regular file: st_blocks changed where the
  // kernel cannot see it (Work::changed_attributes).
  void note_blocks_change(const Inode& inode, uint64_t blocks_before, Work& work)
      REQUIRES(inode.mutex);
  // `allocated_end`: where an ALLOCATE that sets the size ends (0: none).
  void after_attribute_change(Inode& inode, uint64_t allocated_end = 0) REQUIRES(inode.mutex);
  FileStats file_stats_locked(const Inode& inode) const REQUIRES(inode.mutex);
  // On one journal (durability.metadata = "journal": ext4, xfs) a file's
  // changes are in the running transaction, which any fsync commits, not
  // only its own (jbd2's transaction, xfs's CIL). After an operation that
  // changed a regular file: lists it if anything of it is not durable.
  void note_uncommitted_locked(Inode& inode) REQUIRES(inode.mutex);
  // A sync committed the journal: every listed file is committed with it
  // (RegularFile::commit: all but its dirty pages). No inode lock held.
  void commit_journal_files();
  // Every regular file in the table now (taken under the namespace lock).
  std::vector<std::shared_ptr<Inode>> regular_files();
  // ImageError unless every device block has one owner (free, metadata, a
  // file's, btrfs's data extents) and the delayed blocks are the reserved ones.
  void check_image(const ImageJson& image);
  DeviceStats device_stats() const;

  const Profile profile_;
  const uint64_t unit_;                // profile_.allocation_unit, in bytes
  const bool attributes_synchronous_;  // durability.metadata = "synchronous"
  const std::unique_ptr<DataStore> store_;
  const WallClock& clock_;
  DeviceSpace space_;
  HostDirtyPages dirty_pages_;
  DeferredWork deferred_;
  std::atomic<uint64_t> crashes_{0};
  const bool journal_commits_files_;  // durability.metadata = "journal"
  std::mutex journal_mutex_;
  // Files changed since a commit last carried them (each once: Inode::in_journal).
  std::vector<uint64_t> uncommitted_ GUARDED_BY(journal_mutex_);
  Namespace namespace_;  // last: destroyed first, while what its files use lives
};

}  // namespace mimicfs
