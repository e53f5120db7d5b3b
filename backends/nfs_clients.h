// SPDX-License-Identifier: Apache-2.0
// NfsClients: the clients of one emulated NFS server (docs/nfs.md). Each mount
// of the volume is one NfsClientLayer over the same server layers; this
// registry owns them and carries what one client's request means to the others:
// a file removed on the server is gone for every client that has it open
// (ESTALE), since an NFS server keeps no state of who has a file open. The
// server's locks are kept here too (RecordLocks): they are every client's.
//
// Thread-safety: one mutex for the list, taken before a client's own lock,
// never the other way round.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/nfs_client_layer.h"
#include "backends/record_locks.h"
#include "backends/thread_annotations.h"

namespace mimicfs {

class NfsClients {
 public:
  // The clients' time in ns, which expires their attribute caches: emulated
  // time (Engine::client_time_ns).
  using Clock = std::function<uint64_t()>;
  using Change = NfsClientLayer::Change;

  // `server`: the layers every client sends its requests to.
  NfsClients(FileSystem& server, Clock now) : server_(server), now_(std::move(now)) {}
  NfsClients(const NfsClients&) = delete;
  NfsClients& operator=(const NfsClients&) = delete;

  // A new client, named by its mount point in stats.json. It lives until
  // remove(), or as long as the registry.
  NfsClientLayer& add(std::string name) EXCLUDES(mutex_);
  // The client's mount has gone: what it left on the server stays there, but
  // its locks (it unlocks them as its files close).
  void remove(const NfsClientLayer& client) EXCLUDES(mutex_);

  // The server removed `inode` at `by`'s request: it is stale on the others.
  void removed(uint64_t inode, const NfsClientLayer& by) EXCLUDES(mutex_);
  // `by` changed `inode`'s data, or only its attributes (a chmod, a name added
  // to a directory): the others' caches of it are old.
  void changed(uint64_t inode, const NfsClientLayer& by, Change what) EXCLUDES(mutex_);
  // Whether a client has others to hear from: one alone caches nothing.
  bool several() const { return count_.load(std::memory_order_relaxed) > 1; }
  uint64_t now_ns() const { return now_(); }
  // Every client's counters, in the order they were added.
  std::vector<ClientStats> stats() EXCLUDES(mutex_);
  // A power cut of server and clients: every client reboots.
  void reboot_all() EXCLUDES(mutex_);
  void reset_statistics() EXCLUDES(mutex_);

  // The server's byte-range locks, every client's (NfsClientLayer::set_lock).
  RecordLocks& locks() { return locks_; }
  // A request that reaches the server without the layers' stack (a LOCK,
  // LOCKT or LOCKU) passes its outage here: it waits or times out as any
  // other (FaultLayer::reach_server). Set once, before any request.
  using ServerGate = std::function<Result<void>(Work&)>;
  void set_server_gate(ServerGate gate) { server_gate_ = std::move(gate); }
  Result<void> reach_server(Work& work) {
    return server_gate_ ? server_gate_(work) : Result<void>{};
  }
  // What every lock table of the daemon shares: the server's and the
  // clients' own (client.local_lock).
  LockWaiters& lock_waiters() { return lock_waiters_; }

 private:
  FileSystem& server_;
  const Clock now_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<NfsClientLayer>> clients_ GUARDED_BY(mutex_);
  // clients_.size(), read without the lock: one client has nobody to tell.
  std::atomic<size_t> count_{0};
  LockWaiters lock_waiters_;
  RecordLocks locks_{lock_waiters_};
  ServerGate server_gate_;
};

}  // namespace mimicfs
