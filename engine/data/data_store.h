// SPDX-License-Identifier: Apache-2.0
// DataStore: where the bytes of emulated files live.
//
// Allocation (ExtentMap, Allocator) decides what the device looks like; the
// DataStore only keeps contents. Invariant kept by Volume: every byte outside
// written data is zero in the store (holes, unwritten extents, beyond EOF),
// but the bytes a truncate cut past EOF until a sync (RegularFile's cut tail).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <expected>
#include <span>
#include <string>

#include "engine/fs/result.h"

namespace mimicfs {

// The contents of one file. Not thread-safe: the owning inode's mutex guards it.
class FileData {
 public:
  virtual ~FileData() = default;
  // Makes sure a write() of `data` at `offset` will find room, before the
  // volume records the write: ENOSPC (nothing changed) when the store is full.
  // A store in memory has nothing to reserve (it throws std::bad_alloc instead).
  virtual Result<void> reserve(uint64_t /*offset*/, std::span<const std::byte> /*data*/) {
    return {};
  }
  // What reserve() set aside for a write the volume then refused goes back.
  virtual void unreserve(uint64_t /*offset*/, std::span<const std::byte> /*data*/) {}
  // Stores `data` at `offset`. Throws std::bad_alloc when memory runs out, and
  // std::system_error when the store's host fails.
  virtual void write(uint64_t offset, std::span<const std::byte> data) = 0;
  // Fills `out` from `offset`; bytes never written read as zero.
  virtual void read(uint64_t offset, std::span<std::byte> out) const = 0;
  // The bytes of [offset, offset+length) where they lie in this process's
  // memory, stored and in one piece, to be read in place (before the next
  // change); null where they do not (a store on the host, a page not stored),
  // and the caller read()s them.
  virtual const std::byte* stored_in_memory(uint64_t /*offset*/, uint64_t /*length*/) const {
    return nullptr;
  }
  // Hands the memory of [offset, offset+length) over as it is, without a copy,
  // where the store can (hand_over_bytes()): the bytes, kept until the last
  // pointer to them goes, and the range then reads as zero. Null, and nothing
  // changed, where it cannot.
  virtual std::shared_ptr<std::byte[]> hand_over(uint64_t /*offset*/, uint64_t /*length*/) {
    return nullptr;
  }
  // What hand_over() can take: a piece this long at a multiple of it; 0 where
  // the store takes none.
  virtual uint64_t hand_over_bytes() const { return 0; }
  // Makes [offset, offset+length) read as zero and frees what it can.
  virtual void zero(uint64_t offset, uint64_t length) = 0;
  // Bytes of memory or disk the contents take (not the file size).
  virtual uint64_t stored_bytes() const = 0;
  // What names the contents in a store that keeps them across mounts (see
  // DataStore::reopen_file); "" where nothing is kept.
  virtual std::string key() const { return ""; }
};

class DataStore {
 public:
  virtual ~DataStore() = default;
  virtual std::unique_ptr<FileData> create_file() = 0;
  // The contents a FileData of an earlier mount had under `key` (its key()):
  // the reason when they cannot be had. Only a store that keeps contents
  // across mounts (one on the host) has any.
  virtual std::expected<std::unique_ptr<FileData>, std::string> reopen_file(
      const std::string& key) {
    return std::unexpected("file contents \"" + key + "\" are not kept by this store");
  }
};

}  // namespace mimicfs
