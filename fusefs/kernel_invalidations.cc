// SPDX-License-Identifier: Apache-2.0
#include "fusefs/kernel_invalidations.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <set>
#include <utility>

namespace mimicfs {

void KernelInvalidations::start() {
  std::lock_guard lock(queue_mutex_);
  start_worker();
}

void KernelInvalidations::stop() {
  {
    std::lock_guard lock(queue_mutex_);
    stopping_ = true;
    queue_.clear();
  }
  queue_changed_.notify_all();
  if (worker_.joinable()) worker_.join();
  pending_.store(0);
  session_.store(nullptr);
}

void KernelInvalidations::start_worker() {
  if (stopping_ || worker_.joinable()) return;
  worker_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "mimicfs-inval");
    tell_queued();
  });
}

void KernelInvalidations::tell_queued() {
  // For the condition variable: the analysis sees lock_guard's only, and
  // takes the lock as held even where it is let go around invalidate().
  std::unique_lock lock(queue_mutex_);
  assert_held(queue_mutex_);
  while (true) {
    while (!stopping_ && queue_.empty()) queue_changed_.wait(lock);
    if (stopping_) return;
    CrashReport next = std::move(queue_.front());
    queue_.pop_front();
    telling_ = true;
    lock.unlock();
    invalidate(next);
    lock.lock();
    telling_ = false;
    pending_.fetch_sub(1);
    queue_changed_.notify_all();
  }
}

void KernelInvalidations::invalidate_later(CrashReport report) {
  std::lock_guard lock(queue_mutex_);
  if (stopping_) return;
  queue_.push_back(std::move(report));
  pending_.fetch_add(1);
  start_worker();  // started by start() where the daemon serves
  queue_changed_.notify_one();
}

void KernelInvalidations::wait(std::chrono::milliseconds limit) {
  std::unique_lock lock(queue_mutex_);
  assert_held(queue_mutex_);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto told = [this]() REQUIRES(queue_mutex_) {
    return stopping_ || (queue_.empty() && !telling_);
  };
  while (!told()) {
    if (queue_changed_.wait_until(lock, deadline) == std::cv_status::timeout && !told()) {
      spdlog::warn("restart: the kernel's caches of the crashed volume are not all dropped yet");
      return;
    }
  }
}

void KernelInvalidations::invalidate_attributes(const std::vector<uint64_t>& inodes) {
  fuse_session* session = session_.load();
  if (!session) return;
  for (const uint64_t inode : inodes) {
    // A negative offset: the attributes only, no page, so no lock the request holds is needed.
    const int error = fuse_lowlevel_notify_inval_inode(session, inode, -1, 0);
    // Not yet initialised (ENOSYS) or unmounting (ENODEV): nothing cached to drop.
    if (error != 0 && error != -ENOENT && error != -ENOSYS && error != -ENODEV) {
      spdlog::warn("cannot invalidate the attributes of inode {}: {}", inode, strerror(-error));
    }
  }
}

// A volume held off or frozen may keep a request that holds the pages
// waiting until its restart: then the worker drops them, as it does a crash's.
void KernelInvalidations::drop_pages(uint64_t inode) {
  fuse_session* session = session_.load();
  if (!session) return;
  if (!engine_.powered()) {
    drop_pages_after_reply(inode);
    return;
  }
  const int error = fuse_lowlevel_notify_inval_inode(session, inode, 0, 0);
  if (error != 0 && error != -ENOENT) {
    spdlog::warn("cannot drop the cached pages of inode {}: {}", inode, strerror(-error));
  }
}

void KernelInvalidations::drop_pages_after_reply(uint64_t inode) {
  CrashReport pages;
  pages.dropped_caches.push_back(inode);
  invalidate_later(std::move(pages));
}

void KernelInvalidations::invalidate(const CrashReport& report) {
  fuse_session* session = session_.load();
  if (!session) return;
  std::set<uint64_t> parents;
  for (const auto& [parent, name] : report.removed_entries) {
    const int error = fuse_lowlevel_notify_inval_entry(session, parent, name.c_str(), name.size());
    if (error != 0 && error != -ENOENT) {
      spdlog::warn("crash: cannot invalidate entry {} in {}: {}", name, parent, strerror(-error));
    }
    parents.insert(parent);
  }
  // Their directories' nlink, size and times too: the kernel drops them with
  // an entry only when it has that entry cached.
  for (const uint64_t parent : parents) {
    const int error = fuse_lowlevel_notify_inval_inode(session, parent, -1, 0);
    if (error != 0 && error != -ENOENT) {
      spdlog::warn("crash: cannot invalidate directory {}: {}", parent, strerror(-error));
    }
  }
  // Every file's pages, not only the restored ones': a read or a mapping through
  // a descriptor from before the crash must reach the volume (and get EIO).
  for (const uint64_t inode : report.dropped_caches) {
    const int error = fuse_lowlevel_notify_inval_inode(session, inode, 0, 0);
    if (error != 0 && error != -ENOENT) {
      spdlog::warn("crash: cannot invalidate inode {}: {}", inode, strerror(-error));
    }
  }
}

}  // namespace mimicfs
