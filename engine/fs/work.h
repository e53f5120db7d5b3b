// SPDX-License-Identifier: Apache-2.0
// Work: what one engine operation did, as the core (Volume) reports it.
//
// The core says what happened (bytes moved, device requests, extents spanned,
// holes filled, commits, extents freed); it computes no time. The layers above
// read it: CostLayer turns it into emulated time through the CostModel,
// CountingLayer into the operation counters, and a FaultLayer adds the latency
// of a fault it injected. One Work belongs to one call: not shared across threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/durability/power_cut.h"
#include "engine/fs/caller.h"

namespace mimicfs {

// The device requests one operation makes, in one direction.
struct DeviceWork {
  uint64_t requests = 0;
  uint64_t bytes = 0;
  uint64_t extra_extents = 0;  // extents past the first that the requests span
  uint64_t gap_fills = 0;      // allocations into a hole between allocated blocks

  DeviceWork& operator+=(const DeviceWork& other) {
    requests += other.requests;
    bytes += other.bytes;
    extra_extents += other.extra_extents;
    gap_fills += other.gap_fills;
    return *this;
  }
  bool empty() const { return requests == 0 && gap_fills == 0; }
};

// Device requests for a contiguous range of `bytes`, split at `max_request_bytes`.
inline uint64_t device_requests(uint64_t bytes, uint64_t max_request_bytes) {
  return bytes / max_request_bytes + (bytes % max_request_bytes != 0);
}

// Work an operation left for later: the core queued it (deferred_work.h) and
// completes it when a layer above says its time has come (CostLayer: when the
// emulated clock reaches it). What it will do is what prices it.
struct DeferredTask {
  enum class Kind : uint8_t {
    kReclaim,  // free an unlinked file's blocks (xfs's background inode inactivation)
  };
  uint64_t id = 0;
  Kind kind = Kind::kReclaim;
  uint64_t file = 0;     // the inode it is for
  uint64_t extents = 0;  // extents it frees
  uint64_t bytes = 0;    // bytes of blocks it frees
};

struct Work {
  // The program the operation runs for (caller.h): the timeline it takes in
  // emulated time.
  uint32_t caller = CallerScope::current();
  // The inode the work is charged to (0: none): per-file emulated time.
  uint64_t file = 0;
  // The operation counters' bytes: data moved by read and write, punched by punch.
  uint64_t bytes = 0;

  // Namespace and attribute updates (create, mkdir, symlink, link, rename,
  // setattr): one server or journal update each.
  uint32_t metadata_updates = 0;
  // Opens that revalidate with the server (NFS close-to-open).
  uint32_t opens = 0;
  // Buffered reads and writes served by the page cache, and their bytes.
  uint32_t cache_copies = 0;
  uint64_t cache_copy_bytes = 0;
  DeviceWork device_reads;
  DeviceWork device_writes;
  // Commits of a sync (journal commit and cache flush).
  uint32_t commits = 0;
  // Syncs that found only overwrites in place to make durable (fdatasync,
  // O_DSYNC): the data is written and the device's cache flushed, no journal
  // transaction (ext4's i_datasync_tid, xfs's ili_datasync_seq). A sync counts
  // one commit or one flush, never both.
  uint32_t flushes = 0;
  uint32_t fallocates = 0;  // fallocate calls that allocated or zeroed
  uint32_t punches = 0;
  // Unlinks and rmdirs, and the extent records and bytes of blocks freed with a
  // file's last link.
  uint32_t unlinks = 0;
  uint64_t extents_freed = 0;
  uint64_t bytes_freed = 0;
  // Work queued for later by this operation.
  std::vector<DeferredTask> deferred;

  // Added by a FaultLayer: the latency of a fault rule that fired, and a crash
  // rule's power cut due when the operation completes (crash=after).
  uint64_t fault_latency_ns = 0;
  bool crash_after = false;
  // Set by the core: an allocation found no space while background tasks were
  // freeing some, so it waited for every one of them (xfs_inodegc_flush) and was
  // retried. The cost layer charges the operation the wait.
  bool waited_for_deferred = false;
  PowerCut power_cut;
  // Set by the CostLayer: what all of the above cost, in emulated nanoseconds.
  uint64_t emulated_ns = 0;
  // Inodes that ceased to exist during the operation: layers drop what they keep per inode.
  std::vector<uint64_t> destroyed_inodes;
  // Inodes whose last name went during the operation (an unlink, rmdir or
  // rename over them), open or not: what an NFS server no longer has.
  std::vector<uint64_t> unlinked_inodes;
  // Inodes whose stat(2) figures changed where the caller could not see it:
  // st_blocks at a flush or sync (allocation) or a close (preallocation
  // trimmed), the mode when a write or an O_TRUNC open cleared a set-ID bit.
  // The size, blocks and times a write, truncate or fallocate changes on its
  // own inode are not listed: the FUSE kernel drops those itself.
  std::vector<uint64_t> changed_attributes;
  // Set by an NFS client's open (close-to-open) or its revalidation of the
  // attributes (a getattr or lookup past the attribute cache's time): the
  // file's data changed on the server since this client last had it, through
  // another client. The caller drops the pages it cached (after an open, the
  // inode is in changed_attributes too).
  bool drop_cached_pages = false;
  // Set by an NFS client answering from its attribute cache what the server
  // has changed since: the caller keeps these attributes no time, so that the
  // client's cache alone says how long they last.
  bool attributes_expire = false;
  // Set by FaultLayer when a request never reached the server (a hard mount's
  // wait it could not keep, a volume without power): an NFS client returns
  // its error at once, even for a buffered write, whose data it would
  // otherwise take as sent.
  bool never_sent = false;
};

// The Work a call fills: the caller's, or, when the caller leaves it out, one
// of the call's own, dropped when the call's statement ends.
class WorkRef {
 public:
  WorkRef() : own_(std::in_place), work_(&*own_) {}
  WorkRef(Work& work) : work_(&work) {}  // NOLINT(google-explicit-constructor)
  WorkRef(const WorkRef&) = delete;
  WorkRef& operator=(const WorkRef&) = delete;

  operator Work&() { return *work_; }  // NOLINT(google-explicit-constructor)

 private:
  std::optional<Work> own_;
  Work* work_;
};

}  // namespace mimicfs
