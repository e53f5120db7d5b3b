// SPDX-License-Identifier: Apache-2.0
// CostModel: what an operation costs in emulated time, from the profile's
// [cost] and [page_cache] keys (docs/profiles.md) and from what the operation did.
//
// Device requests are pipelined: a batch of N requests takes ceil(N / queue_depth)
// request latencies, plus its bytes at the device's bandwidth, plus the work the
// device does for fragmentation (extents a request spans, holes it allocates
// into). Pure arithmetic on integers: the same work always costs the same
// nanoseconds. Thread-safe (immutable).
#pragma once

#include <cstdint>

#include "engine/fs/work.h"
#include "engine/profile/profile.h"

namespace mimicfs {

// An operation's cost, split by where the time goes: in real latency mode the
// device part waits for one of queue_depth device slots, the host part does not.
struct Cost {
  uint64_t host_ns = 0;    // system call and page cache copies
  uint64_t device_ns = 0;  // device or server, network included
  // Parts of device_ns that a shared resource serves one caller at a time
  // (timelines.h): the device's transfers (bandwidth, extents, holes filled)
  // and the journal's commits. The rest of device_ns is request latency, which
  // overlaps with other callers' requests.
  uint64_t transfer_ns = 0;
  uint64_t commit_ns = 0;

  uint64_t total() const { return host_ns + device_ns; }
  Cost& operator+=(const Cost& other) {
    host_ns += other.host_ns;
    device_ns += other.device_ns;
    transfer_ns += other.transfer_ns;
    commit_ns += other.commit_ns;
    return *this;
  }
  Cost times(uint64_t n) const {
    return {host_ns * n, device_ns * n, transfer_ns * n, commit_ns * n};
  }
};

class CostModel {
 public:
  explicit CostModel(const Profile& profile);

  // Requests of a contiguous range of `bytes` (split at max_request_bytes).
  uint64_t requests_for(uint64_t bytes) const;

  Cost device_writes(const DeviceWork& work) const;
  Cost device_reads(const DeviceWork& work) const;
  // A buffered read or write served by the page cache.
  Cost buffered_copy(uint64_t bytes) const;
  // The commit of fsync/fdatasync (after its writeback): journal and cache flush.
  Cost commit() const;
  // A sync of overwrites in place (after its writeback): the cache flush alone
  // (flush_ns, or fsync_ns when that is 0).
  Cost flush() const;
  // create, mkdir, symlink, link, rename, rmdir, setattr, setxattr, removexattr.
  Cost metadata() const;
  // open: on NFS, close-to-open revalidation is one round trip.
  Cost open() const;
  Cost fallocate() const;
  Cost punch() const;
  // An unlink; the extent records and bytes of blocks it frees when it was the
  // file's last link (unless a background task frees them).
  Cost unlink(uint64_t freed_extents, uint64_t freed_bytes) const;
  // Freeing a file's blocks, in the unlink or in a background task: a part per
  // extent record, a part per MiB of blocks (bitmaps or free-space trees).
  Cost freeing(uint64_t extents, uint64_t bytes) const;

  // Everything one operation did (work.h), priced with the functions above;
  // its deferred tasks are not in it (they run later, in the background).
  Cost of(const Work& work) const;
  // A deferred task: what it will take a background worker.
  Cost of(const DeferredTask& task) const;

 private:
  Cost device(uint64_t per_request_ns, const DeviceWork& work) const;

  const Profile& profile_;
};

}  // namespace mimicfs
