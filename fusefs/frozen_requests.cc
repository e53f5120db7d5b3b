// SPDX-License-Identifier: Apache-2.0
#include "fusefs/frozen_requests.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <vector>

#include "fusefs/fuse_ring.h"
#include "fusefs/request_credentials.h"

namespace mimicfs {
namespace {

bool dying(uid_t uid, gid_t gid, pid_t tid) { return RequestCredentials(uid, gid, tid).dying(); }

}  // namespace

FrozenRequests::~FrozenRequests() { stop(); }

bool FrozenRequests::park(fuse_req_t req) {
  if (FuseRing::on_ring_thread() || engine_.has_clients()) return false;
  const std::optional<uint64_t> restarts = engine_.frozen_at();
  if (!restarts) return false;
  const fuse_ctx* ctx = fuse_req_ctx(req);
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    // Before the request is kept: if the thread cannot start, serve() answers it.
    if (!thread_.joinable()) thread_ = std::thread([this] { answer_released(); });
  }
  // Before it is in the list, where the thread may answer (and free) it: an
  // interrupt that comes first finds nothing, and the thread's look at the
  // caller covers it.
  fuse_req_interrupt_func(req, &FrozenRequests::interrupted, this);
  std::lock_guard lock(mutex_);
  if (stopping_) return false;  // stop() answers none it did not see: serve() does
  kept_.push_back(Kept{++last_id_, req, *restarts, ctx->uid, ctx->gid, ctx->pid});
  engine_.count_kept(1);
  return true;
}

void FrozenRequests::wake() {
  std::lock_guard lock(mutex_);
  changed_.notify_all();
}

size_t FrozenRequests::kept() {
  std::lock_guard lock(mutex_);
  return kept_.size();
}

template <typename Release>
std::list<FrozenRequests::Kept> FrozenRequests::take(Release&& release) {
  std::list<Kept> taken;
  for (auto it = kept_.begin(); it != kept_.end();) {
    const auto next = std::next(it);
    if (release(*it)) taken.splice(taken.end(), kept_, it);
    it = next;
  }
  return taken;
}

void FrozenRequests::answer(const std::list<Kept>& requests) {
  // Counted out first: a caller woken by its answer reads the count.
  engine_.count_kept(-static_cast<int>(requests.size()));
  for (const Kept& kept : requests) fuse_reply_err(kept.req, EIO);
}

void FrozenRequests::interrupted(fuse_req_t req, void* data) {
  auto& self = *static_cast<FrozenRequests*>(data);
  Kept found{};
  {
    std::lock_guard lock(self.mutex_);
    // The interrupted request is still allocated while this runs
    // (find_interrupted holds it), so no other can have its address.
    auto it = std::find_if(self.kept_.begin(), self.kept_.end(),
                           [&](const Kept& k) { return k.req == req; });
    if (it == self.kept_.end()) return;
    found = *it;
  }
  // Another signal (a handler's) interrupts nothing: the program is still
  // waiting for a machine whose power went.
  if (!dying(found.uid, found.gid, found.tid)) return;
  std::list<Kept> taken;
  {
    std::lock_guard lock(self.mutex_);
    taken = self.take([&](const Kept& k) { return k.id == found.id; });
  }
  self.answer(taken);
}

void FrozenRequests::answer_released() {
  std::unique_lock lock(mutex_);  // for the condition variable
  assert_held(mutex_);
  while (!stopping_) {
    changed_.wait_for(lock, std::chrono::milliseconds(100));
    if (stopping_) break;
    const uint64_t restarts = engine_.restarts();
    std::list<Kept> taken = take([&](const Kept& k) { return k.restarts < restarts; });
    // Whose caller is dying: read from /proc without the lock.
    std::vector<uint64_t> gone;
    std::vector<Kept> waiting(kept_.begin(), kept_.end());
    lock.unlock();
    for (const Kept& k : waiting) {
      if (dying(k.uid, k.gid, k.tid)) gone.push_back(k.id);
    }
    lock.lock();
    taken.splice(taken.end(), take([&](const Kept& k) {
                   return std::find(gone.begin(), gone.end(), k.id) != gone.end();
                 }));
    lock.unlock();
    answer(taken);
    lock.lock();
  }
}

void FrozenRequests::stop() {
  std::thread thread;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
    thread = std::move(thread_);
  }
  if (thread.joinable()) thread.join();
  std::list<Kept> taken;
  {
    std::lock_guard lock(mutex_);
    taken = take([](const Kept&) { return true; });
  }
  answer(taken);
}

}  // namespace mimicfs
