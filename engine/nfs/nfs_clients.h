// SPDX-License-Identifier: Apache-2.0
// NfsClients: the clients of one emulated NFS server (docs/nfs.md). Each mount
// of the volume is one NfsClientLayer over the same server layers; this
// registry owns them and carries what one client's request means to the others:
// a file removed on the server is gone for every client that has it open
// (ESTALE), since an NFS server keeps no state of who has a file open. The
// server's locks are kept here too (RecordLocks): they are every client's.
//
// A server restart (`ctl server restart`) loses the server's locks; each
// client reclaims its own in the grace period once it learns of the restart
// (nfs4_state_manager -> nfs4_reclaim_locks -> nfs4_lock_reclaim): at its
// next request, or at its lease renewal, which comes two thirds of the lease
// after its last one (nfs4_schedule_state_renewal; here, the latest it can:
// that long after the restart). A client that learns of it after the grace
// period loses its locks (nfs4_lock_expired sets NFS_LOCK_LOST): another
// client may take them, and the program's reads and writes through them
// get EIO (nfs4_select_rw_stateid). With client.recover_lost_locks the
// client asks for each again, and loses only those another owner holds.
// Meanwhile the table keeps the locks not yet reclaimed: a new lock waits
// for the grace period's end (FaultLayer), when every client's fate is known.
//
// A client's crash (`ctl crash --client`): a client back at once mounts
// again with a new client verifier, and the server drops its old state. One
// held down leaves its locks on the server until its lease expires
// (nfs4_laundromat: server.lease_ns after its last renewal, here after the
// crash) or it comes back (`ctl restart`).
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

#include "engine/base/thread_annotations.h"
#include "engine/nfs/nfs_client_layer.h"
#include "engine/nfs/record_locks.h"

namespace mimicfs {

class NfsClients {
 public:
  // The clients' time in ns, which expires their attribute caches: emulated
  // time (Engine::client_time_ns).
  using Clock = std::function<uint64_t()>;
  using Change = NfsClientLayer::Change;

  // `server`: the layers every client sends its requests to.
  NfsClients(FileSystem& server, Clock now)
      : server_(server),
        now_(std::move(now)),
        recover_lost_locks_(server.profile().recover_lost_locks),
        renewal_ns_(server.profile().lease_ns / 3 * 2),
        lease_ns_(server.profile().lease_ns) {}
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
  // The server restarted now, with a grace period of `grace_ns`: every
  // client's locks are to be reclaimed.
  void server_restarted(uint64_t grace_ns) EXCLUDES(mutex_);
  // A request of `client` reaches the server: it learns of a restart it had
  // not, and reclaims or loses its locks.
  void contact(NfsClientLayer& client) {
    if (recovering_.load(std::memory_order_acquire)) recover(&client, server_now());
    if (departed_any_.load(std::memory_order_acquire) && client.departed()) rebooted(client);
  }
  // The server's state now (a lock request, after it waited out any grace
  // period; a waiting one, now and then; `ctl time advance`): every client that has not reclaimed
  // by the grace's end loses its locks, and a crashed client's go once its
  // lease expired.
  void settle() {
    if (recovering_.load(std::memory_order_acquire)) recover(nullptr, server_now());
    if (departed_any_.load(std::memory_order_acquire)) expire_leases(server_now());
  }
  // `client`'s machine crashed (NfsClientLayer::crash_client): its locks
  // go, or, `hold`, stay until its lease expires or client_up(). The files whose data it alone had not
  // written back (no other client wrote them since their last sync): they
  // lose what was written since.
  std::vector<uint64_t> crash_client(NfsClientLayer& client, bool hold) EXCLUDES(mutex_);
  // A held client is back: its old boot's locks go.
  void client_up(const NfsClientLayer& client) EXCLUDES(mutex_) { rebooted(client); }
  void reset_statistics() EXCLUDES(mutex_);

  // The server's byte-range locks, every client's (NfsClientLayer::set_lock).
  RecordLocks& locks() { return locks_; }
  // A request that reaches the server without the layers' stack (a LOCK,
  // LOCKT or LOCKU) passes its outage here: it waits or times out as any
  // other (FaultLayer::reach_server). Set once, before any request.
  // `in_grace`: a request the grace period after a restart holds (a new
  // LOCK or LOCKT), charged its retries in `work.fault_latency_ns`.
  // `server_now`: the server's clock (emulated uptime), for its grace
  // periods and leases; `serve_wait`: makes the caller wait what `work`
  // was charged (the grace's retries, a soft timeout), before the request's
  // outcome is settled.
  using ServerGate = std::function<Result<void>(Work&, bool in_grace)>;
  void set_server_gate(ServerGate gate, Clock server_now, std::function<void(Work&)> serve_wait) {
    server_gate_ = std::move(gate);
    server_now_ = std::move(server_now);
    serve_wait_ = std::move(serve_wait);
  }
  // Passes the outage and, `in_grace`, the grace period; the wait served.
  Result<void> reach_server(Work& work, bool in_grace) {
    auto reached = server_gate_ ? server_gate_(work, in_grace) : Result<void>{};
    if (serve_wait_ && work.fault_latency_ns > 0) serve_wait_(work);
    return reached;
  }
  uint64_t server_now() const { return server_now_ ? server_now_() : now_(); }
  // Waits for a recovery under way to finish taking locks: a lock given
  // back meanwhile is then not left among the lost ones.
  void pass_recovery() EXCLUDES(mutex_) {
    if (recovering_.load(std::memory_order_acquire)) {
      std::lock_guard lock(mutex_);
    }
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
  Clock server_now_;
  std::function<void(Work&)> serve_wait_;

  // One client (null: every one) learns of the restart at `at_ns`.
  void recover(const NfsClientLayer* client, uint64_t at_ns) EXCLUDES(mutex_);
  // `client` missed the grace period: its locks go (or are asked for again).
  void lose_locks(NfsClientLayer& client) REQUIRES(mutex_);
  const bool recover_lost_locks_;
  const uint64_t renewal_ns_;  // two thirds of the lease
  // Clients that have not learnt of the last restart yet.
  std::vector<NfsClientLayer*> reclaiming_ GUARDED_BY(mutex_);
  uint64_t restart_ns_ GUARDED_BY(mutex_) = 0;
  uint64_t grace_end_ns_ GUARDED_BY(mutex_) = 0;
  std::atomic<bool> recovering_{false};  // !reclaiming_.empty()

  // Crashed clients whose old locks the server still holds, and when their
  // leases expire (the clients' time).
  struct Departed {
    NfsClientLayer* client;
    uint64_t expires_ns;
  };
  std::vector<Departed> departed_ GUARDED_BY(mutex_);
  std::atomic<bool> departed_any_{false};  // !departed_.empty()
  const uint64_t lease_ns_;
  // The old locks of every departed client that matches go.
  void drop_departed(const std::function<bool(const Departed&)>& matches) EXCLUDES(mutex_);
  void rebooted(const NfsClientLayer& client) EXCLUDES(mutex_);
  void expire_leases(uint64_t at_ns) EXCLUDES(mutex_);
};

}  // namespace mimicfs
