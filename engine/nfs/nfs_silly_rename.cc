// SPDX-License-Identifier: Apache-2.0
// NfsClientLayer's open files and silly rename (fs/nfs/unlink.c,
// nfs_sillyrename): the handles each file has here and their release; a file
// removed while open here becomes .nfsXXXX until its last close removes it,
// and what that does to rmdir, rename and a listing.
#include "engine/nfs/nfs_client_layer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace mimicfs {

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

// The last close removes the silly name (nfs_dentry_iput -> nfs_complete_unlink
// -> nfs_call_unlink: a REMOVE), before the server's close here, so that the
// file's blocks are free once the kernel has no handle left (stats.json's
// open.handles, which ScopedMount::wait_for_releases reads).
Result<void> NfsClientLayer::serve(const ops::Release& request, Work& work) {
  const uint64_t inode = request.inode;
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
  (void)pass(request, work);  // a release cannot fail
  if (!name.empty()) {
    std::lock_guard lock(mutex_);
    finished_removal(inode);
  }
  return {};
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
Result<void> NfsClientLayer::serve(const ops::Unlink& request, Work& work) {
  const auto& [parent, name] = request;
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
  return pass(request, work);
}

Result<void> NfsClientLayer::remove(uint64_t parent, const std::string& name, uint64_t inode,
                                    Work& work) {
  auto removed = pass(ops::Unlink{parent, name}, work);
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
Result<void> NfsClientLayer::serve(const ops::Rmdir& request, Work& work) {
  const auto& [parent, name] = request;
  auto dir = target().entry(parent, name);
  if (silly_rename_ && dir && S_ISDIR(dir->mode)) wait_for_silly_deletes(dir->inode);
  return pass(request, work);
}

void NfsClientLayer::forget_file(std::unordered_map<uint64_t, OpenFile>::iterator it) {
  if (it->second.stale) {
    stale_files_.fetch_sub(1, std::memory_order_relaxed);
    // Closed, it stays stale while the kernel has it (its FORGET may have come first).
    if (known_.contains(it->first)) mark_gone(it->first);
  }
  open_.erase(it);
}

// nfs_rename: a target open on this client is silly-renamed first, so that
// the rename does not remove it from under its reader.
Result<void> NfsClientLayer::serve(const ops::Rename& request, Work& work) {
  const auto& [parent, name, new_parent, new_name, flags] = request;
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
  auto renamed = pass(request, work);
  if (renamed && new_parent != parent) changed_here(new_parent, Change::kAttributes);
  return renamed;
}

// Linux's silly delete is an RPC started at the last close, done well before a
// program's next request on a LAN; here that close's RELEASE may come after
// it. A listing waits for it, so that what a test sees does not depend on it.
Result<std::vector<DirectoryEntry>> NfsClientLayer::serve(const ops::ReadDirectory& request,
                                                          Work& work) {
  const uint64_t inode = request.inode;
  if (silly_rename_) wait_for_silly_deletes(inode);
  return pass(request, work);
}

}  // namespace mimicfs
