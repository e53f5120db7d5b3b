// MemoryDataStore: file contents in RAM as sparse 4 KiB pages.
//
// A page that is entirely zero is never kept, so a 100 GiB zero-filled file costs
// almost nothing: writing zeros over a stored page frees it.
#pragma once

#include <array>
#include <map>

#include "backends/data_store.h"

namespace mimicfs {

class MemoryFileData final : public FileData {
 public:
  static constexpr uint64_t kPageSize = 4096;

  void write(uint64_t offset, std::span<const std::byte> data) override;
  void read(uint64_t offset, std::span<std::byte> out) const override;
  void zero(uint64_t offset, uint64_t length) override;
  uint64_t stored_bytes() const override { return pages_.size() * kPageSize; }

 private:
  using Page = std::array<std::byte, kPageSize>;
  std::map<uint64_t, std::unique_ptr<Page>> pages_;  // page index -> contents, never all zero
};

class MemoryDataStore final : public DataStore {
 public:
  std::unique_ptr<FileData> create_file() override { return std::make_unique<MemoryFileData>(); }
};

}  // namespace mimicfs
