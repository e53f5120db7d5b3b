// SPDX-License-Identifier: Apache-2.0
// Stats: what the emulated storage was asked to do and what it looks like now.
//
// OperationCounters are updated on every Volume operation (lock-free on success);
// StatsSnapshot is the one picture of everything, with one JSON form
// (docs/stats.md) that stats.json, `mimicfs stats` and tests all read.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/thread_annotations.h"
#include "engine/fs/operations.h"
#include "engine/fs/result.h"

namespace mimicfs {

struct OperationStats {
  uint64_t count = 0;
  uint64_t bytes = 0;                      // data moved by read and write; punched by punch
  uint64_t emulated_ns = 0;                // emulated time charged to this class
  std::map<std::string, uint64_t> errors;  // errno name -> count
};

struct FileStats {
  uint64_t inode = 0;
  uint64_t size = 0;
  uint64_t allocated_bytes = 0;
  uint64_t extents = 0;    // FIEMAP records: a hole always ends one
  uint64_t fragments = 0;  // filefrag's count
  uint64_t unwritten_extents = 0;
  uint64_t holes = 0;               // runs inside [0, size) with neither blocks nor delayed data
  uint64_t delayed_bytes = 0;       // written, awaiting delayed allocation (in st_blocks)
  uint64_t preallocated_bytes = 0;  // mapped past EOF, or reserved for the file's next blocks
  uint64_t dirty_bytes = 0;         // in the page cache, not yet written to the device
  uint64_t unsynced_bytes = 0;      // written since the last sync: a crash would lose them
  uint64_t emulated_ns = 0;         // emulated time of the operations on this file
  std::optional<uint64_t> first_group;  // the allocation group of its first block, if it has one
  // Extent lengths in bytes, each rounded up to a power of two -> number of extents.
  std::map<uint64_t, uint64_t> extent_size_histogram;
};

struct DeviceStats {
  uint64_t allocation_unit = 0;
  uint64_t capacity_bytes = 0;
  uint64_t allocated_bytes = 0;     // including metadata_bytes and unreferenced_bytes
  uint64_t metadata_bytes = 0;      // the filesystem's own structures (mkfs_geometry.h), never free
  uint64_t unreferenced_bytes = 0;  // copy-on-write extents kept whole by a referenced part
  uint64_t reserved_bytes = 0;      // free, promised to delayed allocations
  uint64_t free_bytes = 0;          // including reserved_bytes
  uint64_t free_extents = 0;
  uint64_t largest_free_extent_bytes = 0;
};

// Work the core queued for later (deferred_work.h) and has not finished.
struct DeferredStats {
  uint64_t pending_tasks = 0;
  uint64_t pending_free_bytes = 0;  // blocks still allocated that the tasks will free
  uint64_t completed_tasks = 0;
  uint64_t last_due_ns = 0;  // emulated time at which the last pending task completes
  uint64_t task_ns = 0;      // the worker's time for every task queued since the last reset
};

// The kernel's own threads in emulated time (FileSystem::background): the
// flusher's writeback of expired files and the filesystem's periodic commits,
// since the start or the last reset.
struct BackgroundStats {
  uint64_t flusher_runs = 0;        // the flusher woke (page_cache.writeback_interval_ns)
  uint64_t files_written_back = 0;  // expired files it wrote back (page_cache.dirty_expire_ns)
  uint64_t bytes_written_back = 0;
  uint64_t commits = 0;          // periodic commits that made anything durable
  uint64_t files_committed = 0;  // files they made durable
  uint64_t next_flush_ns = 0;    // emulated time of the next wake (clock.emulated_ns's scale); 0: none
  uint64_t next_commit_ns = 0;   // of the next periodic commit; 0: none
};

// Descriptors the kernel still holds open on regular files (its RELEASE comes
// after close(2) returns), and the files among them no name points to any more.
struct OpenStats {
  uint64_t handles = 0;
  uint64_t files = 0;
  uint64_t unlinked_files = 0;
  uint64_t unlinked_bytes = 0;  // their allocated blocks: freed at the last release
};

// One NFS client's own work (NfsClientLayer), on profiles with client.nfs.
struct ClientStats {
  std::string mount;                // the client's mount point
  uint64_t silly_renames = 0;       // open files renamed to .nfsXXXX instead of removed
  uint64_t silly_renamed_open = 0;  // such files still open: their .nfs names are still there
  // Requests answered ESTALE: about a file open here that another client removed.
  uint64_t stale_handles = 0;
  // stat(2)s and lookups answered from the attribute cache with what another
  // client has changed since on the server (client.acregmin_ns).
  uint64_t stale_attributes = 0;
  // Lock requests that found another owner's lock in the way: refused
  // (EAGAIN) or made to wait (client.local_lock).
  uint64_t lock_conflicts = 0;
  // Buffered writes the server refused at their writeback (ENOSPC, EDQUOT,
  // EIO, ESTALE, ETIMEDOUT): lost, and reported at the file's next write,
  // fsync or close.
  uint64_t deferred_write_errors = 0;
  // Locks the client failed to reclaim after a server restart (`ctl server
  // restart`): reads and writes through them get EIO.
  uint64_t lost_locks = 0;
  // `ctl crash --client`s of this client.
  uint64_t crashes = 0;
};

struct ClockStats {
  std::string mode = "virtual";  // "virtual", "real" or "real:SCALE"
  uint64_t emulated_ns = 0;      // every operation's emulated time
};

struct StatsSnapshot {
  static constexpr int kSchemaVersion = 1;
  std::string profile;
  ClockStats clock;
  DeviceStats device;
  DeferredStats deferred;
  BackgroundStats background;
  OpenStats open;
  std::optional<ClientStats> client;                // NFS profiles: this mount's client
  std::vector<ClientStats> clients;                 // and every client of the server
  std::map<std::string, OperationStats> ops;        // only operations that happened
  std::map<std::string, FileStats> files;           // by path, "/" rooted; regular files only
  nlohmann::json faults = nlohmann::json::array();  // FaultInjector::to_json()
  nlohmann::json power = nlohmann::json::object();  // FaultLayer: {"on", "crashes"}
  nlohmann::json server = nlohmann::json::object();  // FaultLayer, NFS profiles: outages
};

nlohmann::json to_json(const StatsSnapshot& snapshot);

// Per-operation counters. Thread-safe: count and bytes are atomics, the error
// table has its own mutex (errors are rare).
class OperationCounters {
 public:
  void record(Op op, uint64_t bytes, int error);
  void add_time(Op op, uint64_t emulated_ns);
  std::map<std::string, OperationStats> snapshot() const;
  void reset();
  // The counters for a volume image (by operation name), and back.
  nlohmann::json save() const;
  void load(const nlohmann::json& saved);

  // Records the outcome of an operation and passes the result through:
  // `return counters_.record(Op::kWrite, n, result);`
  template <typename T>
  Result<T> record(Op op, uint64_t bytes, Result<T> result) {
    record(op, result ? bytes : 0, result ? 0 : result.error().value);
    return result;
  }

 private:
  struct Counter {
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> emulated_ns{0};
  };
  std::array<Counter, static_cast<size_t>(Op::kCount)> counters_;
  mutable std::mutex errors_mutex_;
  std::array<std::map<int, uint64_t>, static_cast<size_t>(Op::kCount)> errors_
      GUARDED_BY(errors_mutex_);
};

}  // namespace mimicfs
