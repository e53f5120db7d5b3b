// SPDX-License-Identifier: Apache-2.0
#include "engine/nfs/nfs_client_layer.h"

#include "engine/nfs/nfs_clients.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace mimicfs {
namespace {

// __FMODE_EXEC (include/linux/fcntl.h): open_exec() opens a program or an
// interpreter with it, and FUSE passes it on in OPEN's flags. Such a file is
// never flushed; its RELEASE comes when the last mapping goes.
constexpr int kOpenForExec = 0x20;

// What nfs_update_inode compares to decide the attributes changed: the
// change attribute (here the ctime, which every change moves), the mtime and
// the size.
bool same_attributes(const Attributes& a, const Attributes& b) {
  auto same = [](const timespec& x, const timespec& y) {
    return x.tv_sec == y.tv_sec && x.tv_nsec == y.tv_nsec;
  };
  return a.size == b.size && same(a.mtime, b.mtime) && same(a.ctime, b.ctime);
}

// New data: nfs_update_inode sets NFS_INO_INVALID_DATA when the mtime or the
// size moved.
bool same_data(const Attributes& a, const Attributes& b) {
  return a.size == b.size && a.mtime.tv_sec == b.mtime.tv_sec && a.mtime.tv_nsec == b.mtime.tv_nsec;
}

}  // namespace

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

bool NfsClientLayer::caching() const { return !noac_ && peers_.several(); }

// nfs_getattr -> nfs_revalidate_inode: no GETATTR while the cached attributes
// are young enough (nfs_attribute_cache_expired).
Result<Attributes> NfsClientLayer::getattr(uint64_t inode, Work& work) {
  if (auto cached = cached_attributes(inode)) {
    work.attributes_expire = true;
    return *cached;
  }
  const uint64_t generation = this->generation();
  auto fresh = Layer::getattr(inode, work);
  if (fresh) fetched(*fresh, generation, work);
  return fresh;
}

// FUSE asks again for a name whose entry expired in the kernel; Linux's
// client finds it in its dentry cache (nfs_lookup_revalidate) and keeps the
// inode's cached attributes.
Result<Attributes> NfsClientLayer::lookup(uint64_t parent, const std::string& name, Work& work) {
  const uint64_t generation = this->generation();
  auto found = Layer::lookup(parent, name, work);
  if (!found) return found;
  looked_up(found->inode);
  if (auto cached = cached_attributes(found->inode)) {
    work.attributes_expire = true;
    return *cached;
  }
  fetched(*found, generation, work);
  return found;
}

std::optional<Attributes> NfsClientLayer::cached_attributes(uint64_t inode) {
  if (!caching()) return std::nullopt;
  const uint64_t now = peers_.now_ns();
  std::lock_guard lock(mutex_);
  auto it = attributes_.find(inode);
  if (it == attributes_.end() || !it->second.changed_elsewhere || !it->second.known) {
    return std::nullopt;
  }
  const CachedAttributes& cached = it->second;
  // A file removed since too: Linux answers from its cache until it expires.
  if (now < cached.fetched_ns || now - cached.fetched_ns >= cached.timeout_ns) return std::nullopt;
  ++stale_attributes_;
  return cached.attributes;
}

// nfs_update_inode: attributes that changed restart attrtimeo at its minimum;
// unchanged ones, once attrtimeo has passed since it was last set, double it
// up to the maximum. New data drops the pages the client cached.
uint64_t NfsClientLayer::generation() {
  std::lock_guard lock(mutex_);
  return generation_;
}

void NfsClientLayer::fetched(const Attributes& fresh, uint64_t generation, Work& work) {
  if (!caching()) return;
  const uint64_t now = peers_.now_ns();
  const bool directory = S_ISDIR(fresh.mode);
  const uint64_t min_ns = directory ? acdirmin_ns_ : acregmin_ns_;
  const uint64_t max_ns = directory ? acdirmax_ns_ : acregmax_ns_;
  std::lock_guard lock(mutex_);
  CachedAttributes& cached = cache_entry(fresh.inode)->second;
  cached.kernel_told = false;  // the kernel keeps these for its own timeout
  const bool expired = now < cached.fetched_ns || now - cached.fetched_ns >= cached.timeout_ns;
  if (cached.known && !cached.changed_elsewhere && !expired) {
    // What the cache would answer: the server has nothing another client did.
    cached.attributes = fresh;
    return;
  }
  const bool changed = !cached.known || !same_attributes(cached.attributes, fresh);
  // Pages cached before another client's change, compared or not.
  const bool new_data =
      cached.known ? !same_data(cached.attributes, fresh) : cached.data_changed_elsewhere;
  if (changed && cached.changed_elsewhere && new_data && S_ISREG(fresh.mode)) {
    work.drop_cached_pages = true;
  }
  // A change or a reboot during the request: these attributes may be older
  // than it (nfs_inode_attrs_cmp's attr_gencount); the next request asks again.
  if (generation != generation_) return;
  if (changed) {
    cached.timeout_ns = min_ns;
    cached.timeout_since_ns = now;
  } else if (now < cached.timeout_since_ns) {
    cached.timeout_since_ns = now;  // the clock was reset: a new start, no doubling
  } else if (now - cached.timeout_since_ns >= cached.timeout_ns) {
    cached.timeout_ns = std::min(cached.timeout_ns * 2, max_ns);
    cached.timeout_since_ns = now;
  }
  cached.attributes = fresh;
  cached.fetched_ns = now;
  cached.known = true;
  cached.changed_elsewhere = false;
  cached.data_changed_elsewhere = false;
}

std::unordered_map<uint64_t, NfsClientLayer::CachedAttributes>::iterator
NfsClientLayer::cache_entry(uint64_t inode) {
  if (attributes_.size() >= kMaxCachedAttributes && !attributes_.contains(inode)) {
    // Bounded memory: entries the server agrees with go first, as if
    // expired; those another client changed keep what their revalidation
    // needs, unless nothing else is left.
    std::erase_if(attributes_, [](const auto& entry) { return !entry.second.changed_elsewhere; });
    if (attributes_.size() >= kMaxCachedAttributes) attributes_.clear();
  }
  return attributes_.try_emplace(inode).first;
}

Result<Attributes> NfsClientLayer::create(uint64_t parent, const std::string& name, uint32_t mode,
                                          uint64_t rdev, Owner owner, bool open_handle,
                                          Work& work) {
  auto created = Layer::create(parent, name, mode, rdev, owner, open_handle, work);
  if (!created) return created;
  looked_up(created->inode);
  if (open_handle) opened(created->inode, false);
  return created;
}

Result<Attributes> NfsClientLayer::tmpfile(uint64_t parent, uint32_t mode, Owner owner,
                                           Work& work) {
  auto created = Layer::tmpfile(parent, mode, owner, work);
  if (!created) return created;
  looked_up(created->inode);
  opened(created->inode, false);
  return created;
}

Result<Attributes> NfsClientLayer::mkdir(uint64_t parent, const std::string& name, uint32_t mode,
                                         Owner owner, Work& work) {
  auto made = Layer::mkdir(parent, name, mode, owner, work);
  if (made) looked_up(made->inode);
  return made;
}

Result<Attributes> NfsClientLayer::symlink(uint64_t parent, const std::string& name,
                                           const std::string& link_target, Owner owner,
                                           Work& work) {
  auto made = Layer::symlink(parent, name, link_target, owner, work);
  if (made) looked_up(made->inode);
  return made;
}

// nfs_open revalidates the file with the server (close-to-open): pages
// cached before another client changed the data are dropped, with the
// attributes, cached or not. An O_TRUNC open changes the data for the others.
Result<void> NfsClientLayer::open(uint64_t inode, int flags, Work& work) {
  auto result = Layer::open(inode, flags, work);
  if (!result) return result;
  opened(inode, (flags & kOpenForExec) != 0);
  revalidate(inode, work);
  if ((flags & O_TRUNC) != 0) changed_here(inode, Change::kData);
  return result;
}

void NfsClientLayer::revalidate(uint64_t inode, Work& work) {
  std::lock_guard lock(mutex_);
  // The open revalidates the attributes (NFSv4 OPEN's GETATTR): still the
  // server's, they are as young as the open; else the next stat asks.
  if (auto it = attributes_.find(inode); it != attributes_.end()) {
    CachedAttributes& cached = it->second;
    if (cached.known && !cached.changed_elsewhere && caching()) {
      cached.fetched_ns = peers_.now_ns();
    } else {
      attributes_.erase(it);  // its pages go with this open (changed_elsewhere_)
      ++generation_;
    }
  }
  if (changed_elsewhere_.erase(inode) > 0 || all_changed_elsewhere_) {
    work.drop_cached_pages = true;
    work.changed_attributes.push_back(inode);
  }
}

Result<std::optional<RecordLock>> NfsClientLayer::test_lock(uint64_t inode, RecordLock request,
                                                             Work& work) {
  if (stale_files_.load(std::memory_order_relaxed) > 0 && stale(inode)) {
    return fail(ESTALE);
  }
  if (!local_posix_) {
    // LOCKT: answered by the server, refused in its grace period (nfsd4_lockt).
    peers_.contact(*this);
    if (auto reached = peers_.reach_server(work, true); !reached) {
      return std::unexpected(reached.error());
    }
    peers_.settle();
  }
  request.owner.client = this;
  auto conflict = table(LockKind::kPosix).conflict(inode, request);
  if (conflict && conflict->owner.client != this) conflict->pid = 0;
  return conflict;
}

RecordLocks& NfsClientLayer::table(LockKind kind) {
  if (kind == LockKind::kFlock) return local_flock_ ? local_flock_locks_ : peers_.locks();
  return local_posix_ ? local_posix_locks_ : peers_.locks();
}

Result<void> NfsClientLayer::set_lock(uint64_t inode, RecordLock request, LockKind kind,
                                      LockWait* wait, Work& work) {
  if (stale_files_.load(std::memory_order_relaxed) > 0 && stale(inode)) {
    return fail(ESTALE);
  }
  // LOCK and LOCKU go to the server, unless client.local_lock keeps the kind.
  // A new LOCK waits out a restart's grace period (NFS4ERR_GRACE); a LOCKU
  // does not (nfsd4_locku).
  if (&table(kind) == &peers_.locks()) {
    peers_.contact(*this);
    const bool unlock = request.type == LockType::kUnlock;
    if (auto reached = peers_.reach_server(work, !unlock); !reached) return reached;
    peers_.settle();
    // A crashed client's lease or the grace may end while it waits.
    if (wait != nullptr) wait->poll = [this] { peers_.settle(); };
  }
  request.owner.client = this;
  if (request.type == LockType::kUnlock) unlock_lost(inode, request);
  // A crash while it waits ends the wait: the lock would be the old boot's,
  // which no close gives back (lock_requests.h).
  const uint64_t boot = crashes();
  if (wait != nullptr) {
    wait->ending = [this, boot, ending = std::move(wait->ending)] {
      return crashes() != boot || (ending && ending());
    };
  }
  auto result = table(kind).set(inode, request, wait);
  if (crashes() != boot) {
    if (result && request.type != LockType::kUnlock) {
      RecordLock undo = request;
      undo.type = LockType::kUnlock;
      (void)table(kind).set(inode, undo, nullptr);
    }
    return fail(EIO);
  }
  const bool refused = !result && result.error() == Errno{EAGAIN};
  if (wait != nullptr ? wait->waited : refused) {
    std::lock_guard lock(mutex_);
    ++lock_conflicts_;
  }
  if (result && request.type != LockType::kUnlock) revalidate(inode, work);
  return result;
}

int NfsClientLayer::lock_waiters() const { return peers_.locks().waiters(); }

// Whichever table it waits in.
void NfsClientLayer::interrupt_lock_wait(LockWait& wait) {
  for (RecordLocks* locks : {&peers_.locks(), &local_posix_locks_, &local_flock_locks_}) {
    locks->interrupt(wait);
  }
}

void NfsClientLayer::release_locks(uint64_t inode, uint64_t owner) {
  for (RecordLocks* locks : {&peers_.locks(), &local_posix_locks_, &local_flock_locks_}) {
    locks->release_owner(inode, LockOwner{this, owner});
  }
  peers_.pass_recovery();
  if (lost_locks_held_.load(std::memory_order_acquire) > 0) {
    forget_lost(inode, [owner](const RecordLock& lost) { return lost.owner.id == owner; });
  }
}

void NfsClientLayer::release_handle_locks(uint64_t inode, uint64_t handle) {
  for (RecordLocks* locks : {&peers_.locks(), &local_posix_locks_, &local_flock_locks_}) {
    locks->release_handle(inode, this, handle);
  }
  peers_.pass_recovery();
  if (lost_locks_held_.load(std::memory_order_acquire) > 0) {
    forget_lost(inode, [handle](const RecordLock& lost) { return lost.handle == handle; });
  }
}

void NfsClientLayer::locks_lost(const std::vector<std::pair<uint64_t, RecordLock>>& lost) {
  std::lock_guard lock(mutex_);
  for (const auto& [inode, held] : lost) lost_[inode].push_back(held);
  lost_locks_ += lost.size();
  lost_locks_held_.fetch_add(lost.size(), std::memory_order_release);
}

bool NfsClientLayer::lock_lost(uint64_t inode, uint64_t handle) {
  peers_.contact(*this);
  return lost_locks_held_.load(std::memory_order_acquire) > 0 && lost_through(inode, handle);
}

bool NfsClientLayer::lost_through(uint64_t inode, uint64_t handle) {
  std::lock_guard lock(mutex_);
  auto it = lost_.find(inode);
  return it != lost_.end() && std::ranges::any_of(it->second, [handle](const RecordLock& lost) {
           return lost.handle == handle;
         });
}

// What an unlock leaves of the owner's lost locks: the parts outside its
// range (the lock state goes once the owner holds nothing of the file).
void NfsClientLayer::unlock_lost(uint64_t inode, const RecordLock& unlock) {
  if (lost_locks_held_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(mutex_);
  auto it = lost_.find(inode);
  if (it == lost_.end()) return;
  std::vector<RecordLock> kept;
  for (const RecordLock& lost : it->second) {
    if (lost.owner.id != unlock.owner.id || lost.end < unlock.start || lost.start > unlock.end) {
      kept.push_back(lost);
    } else {
      keep_outside(lost, unlock.start, unlock.end, kept);
    }
  }
  const size_t before = it->second.size();
  const size_t after = kept.size();
  if (kept.empty()) {
    lost_.erase(it);
  } else {
    it->second = std::move(kept);
  }
  if (after > before) {
    lost_locks_held_.fetch_add(after - before, std::memory_order_release);
  } else {
    lost_locks_held_.fetch_sub(before - after, std::memory_order_release);
  }
}

void NfsClientLayer::forget_lost(uint64_t inode,
                                 const std::function<bool(const RecordLock&)>& matches) {
  std::lock_guard lock(mutex_);
  auto it = lost_.find(inode);
  if (it == lost_.end()) return;
  const size_t forgotten = std::erase_if(it->second, matches);
  if (it->second.empty()) lost_.erase(it);
  lost_locks_held_.fetch_sub(forgotten, std::memory_order_release);
}

void NfsClientLayer::changed_elsewhere(uint64_t inode, Change what) {
  bool first_change = false;  // since this client last had the attributes
  {
    std::lock_guard lock(mutex_);
    if (!noac_ && (known_.contains(inode) || attributes_.contains(inode))) {
      // The kernel may hold attributes this client never cached here (a
      // create's, an open's): a marker, never answered from, tells it once.
      CachedAttributes& cached = cache_entry(inode)->second;
      first_change = !cached.kernel_told;
      cached.kernel_told = true;
      cached.changed_elsewhere = true;
      cached.data_changed_elsewhere = cached.data_changed_elsewhere || what == Change::kData;
    }
    if (noac_) first_change = known_.contains(inode);  // no cache: the kernel's only
    ++generation_;
    if (what == Change::kData && !all_changed_elsewhere_) {
      if (changed_elsewhere_.size() >= kMaxChangedElsewhere) {
        changed_elsewhere_.clear();
        all_changed_elsewhere_ = true;
      } else {
        changed_elsewhere_.insert(inode);
      }
    }
  }
  if (first_change) {
    std::lock_guard lock(observer_mutex_);
    if (change_observer_) change_observer_(inode);
  }
}

void NfsClientLayer::set_change_observer(ChangeObserver observer) {
  std::lock_guard lock(observer_mutex_);
  change_observer_ = std::move(observer);
}

// The reply to this client's own change brought the server's attributes
// (the kernel keeps them for its own timeout): the entry becomes a marker,
// which keeps what another client changed before for the next revalidation.
// With no other client there is no entry (NfsClients::add clears them).
void NfsClientLayer::changed_here(uint64_t inode, Change what) {
  if (!peers_.several()) return;
  {
    std::lock_guard lock(mutex_);
    if (auto it = attributes_.find(inode); it != attributes_.end()) {
      CachedAttributes& cached = it->second;
      if (cached.changed_elsewhere) {
        cached.known = false;
        cached.kernel_told = false;
      } else {
        attributes_.erase(it);
      }
    }
    ++generation_;
  }
  peers_.changed(inode, *this, what);
}

// What the server removed (Work::unlinked_inodes, its own report: not the
// file a name had when the client looked, which may have moved since) is
// stale on the other clients; told once.
void NfsClientLayer::tell_removals(Work& work) {
  for (const uint64_t inode : work.unlinked_inodes) {
    {
      std::lock_guard lock(mutex_);
      attributes_.erase(inode);
    }
    peers_.removed(inode, *this);
  }
  work.unlinked_inodes.clear();
}

void NfsClientLayer::forget_attributes() {
  std::lock_guard lock(mutex_);
  attributes_.clear();
  ++generation_;
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
Result<Attributes> NfsClientLayer::link(uint64_t inode, uint64_t new_parent,
                                        const std::string& new_name, Work& work) {
  auto linked = Layer::link(inode, new_parent, new_name, work);
  if (!linked) return linked;
  looked_up(inode);
  changed_here(inode, Change::kAttributes);
  return linked;
}

void NfsClientLayer::opened(uint64_t inode, bool flushed) {
  std::lock_guard lock(mutex_);
  OpenFile& file = open_[inode];
  ++file.handles;
  if (flushed) {
    ++file.flushes;
    file.last_flush = Clock::now();
  }
  released_.notify_all();  // a removal waiting for a close sees the file in use again
}

Result<void> NfsClientLayer::flush(uint64_t inode, bool writer, Work& work) {
  auto result = Layer::flush(inode, writer, work);
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
Result<void> NfsClientLayer::fsync(uint64_t inode, bool datasync, Work& work) {
  writeback_completes(inode);
  if (const int error = take_unreported_error(inode); error != 0) {
    if (error == ESTALE) {
      std::lock_guard lock(mutex_);
      ++stale_requests_;
    }
    return fail(error);
  }
  auto synced = Layer::fsync(inode, datasync, work);
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

// The last close removes the silly name (nfs_dentry_iput -> nfs_complete_unlink
// -> nfs_call_unlink: a REMOVE), before the server's close here, so that the
// file's blocks are free once the kernel has no handle left (stats.json's
// open.handles, which ScopedMount::wait_for_releases reads).
void NfsClientLayer::release(uint64_t inode, Work& work) {
  uint64_t parent = 0;
  std::string name;
  {
    std::lock_guard lock(mutex_);
    if (auto it = open_.find(inode); it != open_.end()) {
      OpenFile& file = it->second;
      // Which handle this was is not known here: one from before a power cut first.
      if (file.handles_before_crash > 0) {
        --file.handles_before_crash;
      } else if (file.handles > 0) {
        --file.handles;
      }
      file.flushes = std::min(file.flushes > 0 ? file.flushes - 1 : 0, file.handles);
      if (file.handles == 0 && file.handles_before_crash == 0 && !file.renaming && !file.removing) {
        if (file.silly_name.empty()) {
          forget_file(it);
        } else {
          // Kept until the REMOVE is done: an rmdir of its directory waits for
          // it, as nfs_rmdir does (it takes rmdir_sem, which a silly delete holds).
          parent = file.silly_parent;
          name = std::move(file.silly_name);
          file.silly_name.clear();
          file.removing = true;
        }
      }
      released_.notify_all();
    }
  }
  if (!name.empty()) remove_silly_name(inode, parent, name, work);
  Layer::release(inode, work);
  if (!name.empty()) {
    std::lock_guard lock(mutex_);
    finished_removal(inode);
  }
}

void NfsClientLayer::remove_silly_name(uint64_t inode, uint64_t parent, const std::string& name,
                                       Work& work) {
  // Renamed or removed by someone else meanwhile: another file may have the name now.
  if (auto entry = target().entry(parent, name); !entry || entry->inode != inode) return;
  if (auto removed = target().unlink(parent, name, work); !removed) {
    spdlog::warn("nfs client: removing {} at its last close: {}", name,
                 std::strerror(removed.error().value));
  } else {
    changed_here(parent, Change::kAttributes);
    tell_removals(work);  // not the file, if it has another name now
  }
}

void NfsClientLayer::finished_removal(uint64_t inode) {
  if (auto it = open_.find(inode); it != open_.end()) {
    OpenFile& file = it->second;
    file.removing = false;
    file.silly_parent = 0;
    if (file.handles == 0 && file.handles_before_crash == 0 && !file.renaming) forget_file(it);
  }
  released_.notify_all();
}

bool NfsClientLayer::closing(const OpenFile& file) const {
  return file.handles > 0 && file.flushes >= file.handles &&
         Clock::now() - file.last_flush < kCloseGrace;
}

bool NfsClientLayer::silly_delete_pending(uint64_t directory) const {
  return std::any_of(open_.begin(), open_.end(), [this, directory](const auto& open) {
    const OpenFile& file = open.second;
    return file.silly_parent == directory && (file.removing || closing(file));
  });
}

bool NfsClientLayer::wait(std::unique_lock<std::mutex>& lock, Clock::time_point deadline) {
  if (waiters_ >= kMaxWaiters) return false;
  ++waiters_;
  released_.wait_until(lock, deadline);
  --waiters_;
  return Clock::now() < deadline;
}

NfsClientLayer::Busy NfsClientLayer::busy(uint64_t parent, const std::string& name,
                                          uint64_t inode) {
  std::unique_lock lock(mutex_);  // a unique_lock for the condition variable:
  assert_held(mutex_);            // the analysis sees lock_guard's only
  // closing() ends kCloseGrace after the last FLUSH, before this deadline.
  const auto deadline = Clock::now() + kCloseGrace;
  for (;;) {
    auto it = open_.find(inode);
    if (it == open_.end()) return Busy::kNo;
    const OpenFile& file = it->second;
    if (!(file.renaming || closing(file)) || !wait(lock, deadline)) break;
  }
  auto it = open_.find(inode);
  if (it == open_.end() || it->second.handles == 0) return Busy::kNo;
  OpenFile& file = it->second;
  if (file.renaming) return Busy::kRenamed;  // still under way: the server is slow
  if (!file.silly_name.empty()) {
    // nfs_sillyrename: a dentry is not silly-renamed twice. A name that was
    // renamed away meanwhile is looked up again by the caller.
    return file.silly_parent == parent && file.silly_name == name ? Busy::kRenamed : Busy::kMoved;
  }
  file.renaming = true;  // the caller renames it away
  return Busy::kOpen;
}

// nfs_sillyrename: the first `.nfs<fileid><counter>` name that does not exist
// in the same directory, then a RENAME the server sees like any other.
Result<void> NfsClientLayer::silly_rename(uint64_t parent, const std::string& name,
                                          uint64_t inode, Work& work) {
  const uint64_t boot = crashes();
  std::string silly;
  Result<void> renamed = fail(EEXIST);
  for (int attempt = 0; attempt < 100 && !renamed && renamed.error().value == EEXIST; ++attempt) {
    {
      std::lock_guard lock(mutex_);
      silly = fmt::format(".nfs{:016x}{:08x}", inode, ++silly_counter_);
    }
    if (target().entry(parent, silly)) continue;  // a name in use is skipped
    // NOREPLACE: a name made since the lookup is not lost.
    renamed = target().rename(parent, name, parent, silly, RENAME_NOREPLACE, work);
  }
  // A power cut meanwhile: the rebooted client does not remove it.
  const bool crashed = crashes() != boot;
  if (renamed) {  // sent to the server directly: this layer's leave() did not see it
    changed_here(parent, Change::kAttributes);
    changed_here(inode, Change::kAttributes);
  }

  bool remove_now = false;
  {
    std::lock_guard lock(mutex_);
    auto it = open_.find(inode);  // kept while `renaming`
    OpenFile& file = it->second;
    file.renaming = false;
    if (renamed) ++silly_renames_;
    if (renamed && !crashed) {
      file.silly_parent = parent;
      if (file.handles > 0 || file.handles_before_crash > 0) {
        file.silly_name = silly;
      } else {
        // Closed while it was being renamed: its last close had no name to remove.
        file.removing = true;
        remove_now = true;
      }
    } else if (file.handles == 0 && file.handles_before_crash == 0 && !file.removing) {
      forget_file(it);
    }
    released_.notify_all();
  }
  if (remove_now) {
    remove_silly_name(inode, parent, silly, work);
    std::lock_guard lock(mutex_);
    finished_removal(inode);
  }
  return renamed;
}

// nfs_unlink: a file open on this client (its dentry in use) is silly-renamed.
// The kernel tells the daemon which inode is open, not through which name: a
// file with other links is removed as it is, since the server keeps it anyway.
Result<void> NfsClientLayer::unlink(uint64_t parent, const std::string& name, Work& work) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto entry = target().entry(parent, name);
    if (!entry || S_ISDIR(entry->mode) || entry->nlink != 1) break;
    switch (silly_rename_ ? busy(parent, name, entry->inode) : Busy::kNo) {
      case Busy::kNo:
        return remove(parent, name, entry->inode, work);
      case Busy::kRenamed:
        return fail(EBUSY);
      case Busy::kOpen:
        return silly_rename(parent, name, entry->inode, work);
      case Busy::kMoved:
        continue;
    }
  }
  return Layer::unlink(parent, name, work);
}

Result<void> NfsClientLayer::remove(uint64_t parent, const std::string& name, uint64_t inode,
                                    Work& work) {
  auto removed = Layer::unlink(parent, name, work);
  if (removed) changed_here(inode, Change::kAttributes);  // its link count, with other links
  return removed;
}

void NfsClientLayer::wait_for_silly_deletes(uint64_t directory) {
  std::unique_lock lock(mutex_);
  assert_held(mutex_);
  const auto deadline = Clock::now() + kCloseGrace;
  while (silly_delete_pending(directory) && wait(lock, deadline)) {
  }
}

// nfs_rmdir waits for the silly deletes pending in the directory: a program
// that closes its last file there and removes the directory succeeds.
Result<void> NfsClientLayer::rmdir(uint64_t parent, const std::string& name, Work& work) {
  auto dir = target().entry(parent, name);
  if (silly_rename_ && dir && S_ISDIR(dir->mode)) wait_for_silly_deletes(dir->inode);
  return Layer::rmdir(parent, name, work);
}

// Linux's silly delete is an RPC started at the last close, done well before a
// program's next request on a LAN; here that close's RELEASE may come after
// it. A listing waits for it, so that what a test sees does not depend on it.
Result<std::vector<DirectoryEntry>> NfsClientLayer::read_directory(uint64_t inode, Work& work) {
  if (silly_rename_) wait_for_silly_deletes(inode);
  return Layer::read_directory(inode, work);
}

// nfs_rename: a target open on this client is silly-renamed first, so that
// the rename does not remove it from under its reader.
Result<void> NfsClientLayer::rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                                    const std::string& new_name, unsigned flags, Work& work) {
  // Into a directory another client removed: its handle is stale.
  if (gone_files_.load(std::memory_order_relaxed) > 0 && gone(new_parent)) return fail(ESTALE);
  for (int attempt = 0; attempt < 3 && flags == 0; ++attempt) {
    auto replaced = target().entry(new_parent, new_name);
    if (!replaced || S_ISDIR(replaced->mode) || replaced->nlink != 1) break;
    auto source = target().entry(parent, name);
    if (!source || source->inode == replaced->inode) break;
    const Busy state = silly_rename_ ? busy(new_parent, new_name, replaced->inode) : Busy::kNo;
    if (state == Busy::kMoved) continue;
    if (state == Busy::kRenamed) return fail(EBUSY);
    if (state == Busy::kOpen) {
      if (auto moved = silly_rename(new_parent, new_name, replaced->inode, work); !moved) {
        return moved;
      }
    }
    break;
  }
  auto renamed = Layer::rename(parent, name, new_parent, new_name, flags, work);
  if (renamed && new_parent != parent) changed_here(new_parent, Change::kAttributes);
  return renamed;
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

void NfsClientLayer::changed_since_sync(uint64_t inode) {
  std::lock_guard lock(mutex_);
  if (unsynced_.size() < kMaxUnsynced) unsynced_.insert(inode);
}

bool NfsClientLayer::unsynced(uint64_t inode) {
  std::lock_guard lock(mutex_);
  return unsynced_.contains(inode);
}

void NfsClientLayer::forget_file(std::unordered_map<uint64_t, OpenFile>::iterator it) {
  if (it->second.stale) {
    stale_files_.fetch_sub(1, std::memory_order_relaxed);
    // Closed, it stays stale while the kernel has it (its FORGET may have come first).
    if (known_.contains(it->first)) mark_gone(it->first);
  }
  open_.erase(it);
}

// The server removed a file or directory: its handle is stale here from now
// on (nfs_revalidate_inode's ESTALE marks the inode, NFS_INO_STALE). An open
// file keeps its own record (a write to it is lost, not refused); any other
// that this client's kernel has is kept until it forgets it, or a lookup
// finds it again (a power cut that undid the removal). Inode numbers are not
// reused.
void NfsClientLayer::removed_elsewhere(uint64_t inode) {
  std::lock_guard lock(mutex_);
  if (auto it = open_.find(inode); it != open_.end() && it->second.handles > 0) {
    if (it->second.stale) return;
    it->second.stale = true;
    stale_files_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (known_.contains(inode)) mark_gone(inode);
}

void NfsClientLayer::mark_gone(uint64_t inode) {
  gone_.insert(inode);
  gone_files_.store(gone_.size(), std::memory_order_relaxed);
}

void NfsClientLayer::looked_up(uint64_t inode) {
  std::lock_guard lock(mutex_);
  if (known_.size() >= kMaxKnown && !known_.contains(inode)) return;  // bounded: no ESTALE for it
  ++known_[inode];
  // The server has it under a name: not removed after all (a power cut undid it).
  if (gone_.erase(inode) > 0) gone_files_.store(gone_.size(), std::memory_order_relaxed);
}

bool NfsClientLayer::gone(uint64_t inode) {
  std::lock_guard lock(mutex_);
  if (!gone_.contains(inode)) return false;
  ++stale_requests_;
  return true;
}

// The kernel's lookups of it are over (FUSE's nlookup): it holds nothing of
// the inode any more.
void NfsClientLayer::forget(uint64_t inode, uint64_t references, Work& work) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = known_.find(inode); it != known_.end()) {
      if (it->second > references) {
        it->second -= references;
      } else {
        known_.erase(it);
        attributes_.erase(inode);
        if (gone_.erase(inode) > 0) gone_files_.store(gone_.size(), std::memory_order_relaxed);
      }
    }
  }
  Layer::forget(inode, references, work);
}

bool NfsClientLayer::stale(uint64_t inode) {
  std::lock_guard lock(mutex_);
  auto it = open_.find(inode);
  if (it == open_.end() || !it->second.stale) return false;
  ++stale_requests_;
  return true;
}

namespace {

// The requests about one file that go to the server with its file handle. A
// RELEASE does not (NFSv3 has no CLOSE), nor does a FLUSH of a file with no
// dirty pages; a write goes to the page cache (NfsClientLayer::write).
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
  // write fails it (NfsClientLayer::fsync).
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
Result<size_t> NfsClientLayer::write(uint64_t inode, uint64_t offset,
                                     std::span<const std::byte> data, int flags, Work& work) {
  if ((flags & kLockLost) != 0) return refuse_lost_lock_write(inode, data.size(), flags, work);
  // Any write counts, direct ones too: a crash of this client puts the file
  // back whole, which must not undo another client's write.
  changed_since_sync(inode);
  if ((flags & (O_SYNC | O_DSYNC | O_DIRECT)) != 0) {
    auto result = stale_files_.load(std::memory_order_relaxed) > 0 && stale(inode)
                      ? fail(ESTALE)
                      : Layer::write(inode, offset, data, flags, work);
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
    auto written = Layer::write(inode, offset, data, flags, work);
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
