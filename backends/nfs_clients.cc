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
  for (const auto& client : clients_) client->reboot();
}

void NfsClients::reset_statistics() {
  std::lock_guard lock(mutex_);
  for (const auto& client : clients_) client->reset_client_statistics();
}

}  // namespace mimicfs
