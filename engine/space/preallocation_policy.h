// SPDX-License-Identifier: Apache-2.0
// PreallocationPolicy: how many blocks beyond a request an allocation takes.
//
// Real filesystems allocate more than a write asks for, so that the next write
// of a growing file lands next to it. ext4 keeps the surplus as a per-inode
// reservation that only that file's next blocks come from; xfs maps it past end of
// file (visible in st_blocks) and trims it when the file is closed. Which one a
// profile uses is its allocation.inode_window_max_bytes and
// allocation.speculative_preallocation keys; with neither, an allocation takes
// exactly what it needs.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/profile/profile.h"

namespace mimicfs {

// Where a preallocation's extra blocks go.
enum class PreallocationKind : uint8_t {
  kInodeReservation,  // set aside for the file's next blocks, not mapped (ext4 mballoc)
  kBeyondEndOfFile,   // mapped past EOF, trimmed on close (xfs speculative preallocation)
};

struct AllocationRequest {
  uint64_t logical = 0;      // first file block the caller needs
  uint64_t count = 0;        // blocks the caller needs
  uint64_t mapped_end = 0;   // one past the file's last mapped block (0: none)
  uint64_t size_blocks = 0;  // the file's size, in blocks, once the write is done
};

// A file's preallocation state, kept in its inode.
struct PreallocationState {
  uint64_t next_window = 0;  // blocks; 0 until the first window
};

class PreallocationPolicy {
 public:
  virtual ~PreallocationPolicy() = default;
  virtual PreallocationKind kind() const = 0;
  // How many blocks to allocate right after the request, contiguous with it.
  virtual uint64_t extra_blocks(const AllocationRequest& request,
                                PreallocationState& state) const = 0;
};

// ext4's mballoc per-inode preallocation: a file written as a stream gets
// reservation windows that double from the request size up to `max_blocks`
// (8 MiB), so two files appended at the same time interleave in ever larger
// chunks instead of write by write.
class InodeWindows final : public PreallocationPolicy {
 public:
  explicit InodeWindows(uint64_t max_blocks) : max_blocks_(max_blocks) {}
  PreallocationKind kind() const override { return PreallocationKind::kInodeReservation; }
  uint64_t extra_blocks(const AllocationRequest& request, PreallocationState& state) const override;

 private:
  uint64_t max_blocks_;
};

// xfs's speculative end-of-file preallocation: an allocation that extends the
// file also maps blocks past EOF, up to the next power of two of its size (so the
// file doubles; at most `max_blocks` extra, none below `min_blocks`), so a growing
// file needs a new extent only once per doubling, and none when nobody else
// allocates between. On a real xfs two files appended in 32 KiB O_SYNC writes
// interleave in chunks of 8, 8, 16, 32 ... 16384 blocks: 13 extents per 128 MiB.
class SpeculativeEndOfFile final : public PreallocationPolicy {
 public:
  SpeculativeEndOfFile(uint64_t min_blocks, uint64_t max_blocks)
      : min_blocks_(min_blocks), max_blocks_(max_blocks) {}
  PreallocationKind kind() const override { return PreallocationKind::kBeyondEndOfFile; }
  uint64_t extra_blocks(const AllocationRequest& request, PreallocationState& state) const override;

 private:
  uint64_t min_blocks_;
  uint64_t max_blocks_;
};

// The policy a profile asks for; nullptr when it asks for none.
std::unique_ptr<PreallocationPolicy> make_preallocation_policy(const Profile& profile);

}  // namespace mimicfs
