// SPDX-License-Identifier: Apache-2.0
// NfsClientLayer's attribute cache, as Linux's client keeps it
// (fs/nfs/inode.c): a stat answered from attributes young enough
// (nfs_attribute_cache_expired), the timeout that grows while a file does not
// change (nfs_update_inode), close-to-open revalidation, and what one client
// tells the others of its changes.
#include "engine/nfs/nfs_client_layer.h"

#include "engine/nfs/nfs_clients.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
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

bool NfsClientLayer::caching() const { return !noac_ && peers_.several(); }

// nfs_getattr -> nfs_revalidate_inode: no GETATTR while the cached attributes
// are young enough (nfs_attribute_cache_expired).
Result<Attributes> NfsClientLayer::serve(const ops::Getattr& request, Work& work) {
  const uint64_t inode = request.inode;
  if (auto cached = cached_attributes(inode)) {
    work.attributes_expire = true;
    return *cached;
  }
  const uint64_t generation = this->generation();
  auto fresh = pass(request, work);
  if (fresh) fetched(*fresh, generation, work);
  return fresh;
}

// FUSE asks again for a name whose entry expired in the kernel; Linux's
// client finds it in its dentry cache (nfs_lookup_revalidate) and keeps the
// inode's cached attributes.
Result<Attributes> NfsClientLayer::serve(const ops::Lookup& request, Work& work) {
  const uint64_t generation = this->generation();
  auto found = pass(request, work);
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

// nfs_open revalidates the file with the server (close-to-open): pages
// cached before another client changed the data are dropped, with the
// attributes, cached or not. An O_TRUNC open changes the data for the others.
Result<void> NfsClientLayer::serve(const ops::Open& request, Work& work) {
  const auto& [inode, flags, handle] = request;
  auto result = pass(request, work);
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

}  // namespace mimicfs
