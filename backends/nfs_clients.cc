// SPDX-License-Identifier: Apache-2.0
#include "backends/nfs_clients.h"

#include <algorithm>

namespace mimicfs {

NfsClientLayer& NfsClients::add(std::string name) {
  auto client = std::make_unique<NfsClientLayer>(server_, *this, std::move(name));
  std::lock_guard lock(mutex_);
  for (const auto& other : clients_) other->forget_attributes();
  clients_.push_back(std::move(client));
  count_.store(clients_.size());
  return *clients_.back();
}

void NfsClients::remove(const NfsClientLayer& client) {
  locks_.release_client(&client);
  std::lock_guard lock(mutex_);
  std::erase(reclaiming_, &client);
  recovering_.store(!reclaiming_.empty(), std::memory_order_release);
  std::erase_if(clients_, [&client](const auto& c) { return c.get() == &client; });
  count_.store(clients_.size());
  for (const auto& other : clients_) other->forget_attributes();
}

void NfsClients::removed(uint64_t inode, const NfsClientLayer& by) {
  std::lock_guard lock(mutex_);
  for (const auto& client : clients_) {
    if (client.get() == &by) continue;
    client->removed_elsewhere(inode);
    client->changed_elsewhere(inode, NfsClientLayer::Change::kAttributes);  // its link count
  }
}

void NfsClients::changed(uint64_t inode, const NfsClientLayer& by, Change what) {
  if (!several()) return;
  std::lock_guard lock(mutex_);
  for (const auto& client : clients_) {
    if (client.get() != &by) client->changed_elsewhere(inode, what);
  }
}

std::vector<ClientStats> NfsClients::stats() {
  std::lock_guard lock(mutex_);
  std::vector<ClientStats> all;
  for (const auto& client : clients_) all.push_back(client->client_stats());
  return all;
}

void NfsClients::reboot_all() {
  locks_.clear();  // the server's state, and no client is there to reclaim
  std::lock_guard lock(mutex_);
  reclaiming_.clear();
  recovering_.store(false, std::memory_order_release);
  for (const auto& client : clients_) client->reboot();
}

void NfsClients::server_restarted(uint64_t grace_ns) {
  std::lock_guard lock(mutex_);
  restart_ns_ = now_();
  grace_end_ns_ = restart_ns_ + grace_ns;
  reclaiming_.clear();
  for (const auto& client : clients_) reclaiming_.push_back(client.get());
  recovering_.store(!reclaiming_.empty(), std::memory_order_release);
}

void NfsClients::recover(const NfsClientLayer* client, uint64_t at_ns) {
  std::lock_guard lock(mutex_);
  // A client learns of the restart at its first request or its renewal,
  // whichever comes first; in time if by the grace period's end.
  const uint64_t renewal = restart_ns_ + renewal_ns_;
  std::erase_if(reclaiming_, [&](NfsClientLayer* waiting) REQUIRES(mutex_) {
    if (client != nullptr && waiting != client) return false;
    const uint64_t learnt = client != nullptr ? std::min(at_ns, renewal) : renewal;
    if (client == nullptr && at_ns < grace_end_ns_) return false;  // not over yet
    if (learnt > grace_end_ns_) lose_locks(*waiting);
    return true;
  });
  recovering_.store(!reclaiming_.empty(), std::memory_order_release);
}

void NfsClients::lose_locks(NfsClientLayer& client) {
  std::vector<std::pair<uint64_t, RecordLock>> lost;
  for (auto& [inode, held] : locks_.take_client(&client)) {
    // nfs4_lock_expired: asked for again only with recover_lost_locks.
    if (recover_lost_locks_ && locks_.set(inode, held, nullptr)) continue;
    lost.emplace_back(inode, held);
  }
  if (!lost.empty()) client.locks_lost(lost);
}

void NfsClients::reset_statistics() {
  std::lock_guard lock(mutex_);
  for (const auto& client : clients_) client->reset_client_statistics();
}

}  // namespace mimicfs
