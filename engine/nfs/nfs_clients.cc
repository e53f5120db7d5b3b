// SPDX-License-Identifier: Apache-2.0
#include "engine/nfs/nfs_clients.h"

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
  std::erase_if(departed_, [&client](const Departed& d) { return d.client == &client; });
  departed_any_.store(!departed_.empty(), std::memory_order_release);
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
  departed_.clear();
  departed_any_.store(false, std::memory_order_release);
  for (const auto& client : clients_) client->reboot();
}

void NfsClients::server_restarted(uint64_t grace_ns) {
  recover(nullptr, server_now());  // what the last restart's grace settled
  // A crashed client's old state is gone with the server's; it reclaims nothing.
  drop_departed([](const Departed&) { return true; });
  std::lock_guard lock(mutex_);
  restart_ns_ = server_now();
  grace_end_ns_ = restart_ns_ + grace_ns;
  reclaiming_.clear();
  for (const auto& client : clients_) {
    if (!client->down()) reclaiming_.push_back(client.get());
  }
  recovering_.store(!reclaiming_.empty(), std::memory_order_release);
}

void NfsClients::recover(const NfsClientLayer* client, uint64_t at_ns) {
  std::lock_guard lock(mutex_);
  // A client learns of the restart at its first request or its renewal,
  // whichever comes first; in time if by the grace period's end.
  const uint64_t renewal = restart_ns_ + renewal_ns_;
  // Past the grace's end every client's fate is known: the one asking now
  // learnt at `at_ns` at the latest, the others at their renewal.
  const bool over = at_ns >= grace_end_ns_;
  std::erase_if(reclaiming_, [&](NfsClientLayer* waiting) REQUIRES(mutex_) {
    if (waiting != client && !over) return false;
    const uint64_t learnt = waiting == client ? std::min(at_ns, renewal) : renewal;
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

// All under the lock: no request of the new boot meets the old one's state.
std::vector<uint64_t> NfsClients::crash_client(NfsClientLayer& client, bool hold) {
  std::lock_guard lock(mutex_);
  const std::vector<uint64_t> unsynced = client.crash_client(hold);
  std::vector<uint64_t> lost;
  for (const uint64_t inode : unsynced) {
    const bool shared = std::ranges::any_of(clients_, [&](const auto& other) {
      return other.get() != &client && other->unsynced(inode);
    });
    if (!shared) lost.push_back(inode);
  }
  // A crash in a restart's grace period: it reclaims nothing, so what it
  // held goes at the grace's end at the latest.
  uint64_t expires = server_now() + lease_ns_;
  if (std::erase(reclaiming_, &client) > 0) expires = std::min(expires, grace_end_ns_);
  recovering_.store(!reclaiming_.empty(), std::memory_order_release);
  std::erase_if(departed_, [&client](const Departed& d) { return d.client == &client; });
  if (hold) {
    departed_.push_back({&client, expires});
    client.set_departed(true);
  } else {
    // Back at once: its new boot's mount tells the server (a new verifier),
    // which drops the old boot's state.
    locks_.release_client(&client);
  }
  departed_any_.store(!departed_.empty(), std::memory_order_release);
  return lost;
}

// Under the lock, so that no new boot's lock is taken between.
void NfsClients::drop_departed(const std::function<bool(const Departed&)>& matches) {
  std::lock_guard lock(mutex_);
  std::erase_if(departed_, [&](const Departed& d) {
    if (!matches(d)) return false;
    locks_.release_client(d.client);
    d.client->set_departed(false);
    return true;
  });
  departed_any_.store(!departed_.empty(), std::memory_order_release);
}

// Its new boot's first request: the server drops the old boot's state.
void NfsClients::rebooted(const NfsClientLayer& client) {
  drop_departed([&client](const Departed& d) { return d.client == &client; });
}

void NfsClients::expire_leases(uint64_t at_ns) {
  drop_departed([at_ns](const Departed& d) { return d.expires_ns <= at_ns; });
}

void NfsClients::reset_statistics() {
  std::lock_guard lock(mutex_);
  for (const auto& client : clients_) client->reset_client_statistics();
}

}  // namespace mimicfs
