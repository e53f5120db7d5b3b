// SPDX-License-Identifier: Apache-2.0
// The seed cases' workloads, as plain syscalls on any filesystem: written once
// and used by the scenario tests (tests/scenarios), the side-by-side driver
// (tools/scenario_driver.cc) and, through `mimicfs-workload`
// (tools/workload.cc), by scripts/measure-real-fs.sh on real ext4, xfs and
// btrfs. Each returns what failed, with errno's text, or nothing.
#pragma once

#include <sys/types.h>

#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace mimicfs::workloads {

using Outcome = std::expected<void, std::string>;

inline constexpr off_t kKiB = 1024;
inline constexpr off_t kMiB = 1024 * kKiB;
inline constexpr off_t kInnodbPage = 16 * kKiB;

// Writes `length` bytes of `fill` at `offset`, `chunk` bytes per pwrite.
Outcome write_range(int fd, off_t offset, off_t length, off_t chunk, char fill);

// Seed 000: how a tablespace is extended to `size` before its pages are written.
enum class Extension {
  kPosixFallocate,    // glibc's posix_fallocate: on NFS, a byte per 4 KiB block
  kFallocateOrZeros,  // fallocate(0), and 1 MiB zero writes when it is refused (the fix)
  kZeros,             // 1 MiB zero writes
  kFtruncate,         // a sparse file
};
inline constexpr std::string_view kExtensionNames =
    "posix_fallocate, fallocate_or_zeros, zeros, ftruncate";
std::optional<Extension> extension_named(std::string_view name);
std::string_view name_of(Extension extension);
Outcome extend(int fd, off_t size, Extension how);

// Seed 001: a tablespace that needs `pages` pages of `page` bytes, grown
// `per_extension` pages at a time (the last extension whole, so the file may end
// larger): as fil_extend_space_to_desired_size, zeros written past EOF then an
// fsync per extension; each page is then written with rows.
Outcome grow(int fd, int pages, int per_extension, off_t page = kInnodbPage);

// Seed 003: `count` processes, started together, each zero-fill DIR/datafileN
// of `file_size` in O_SYNC writes of `write_size`, optionally after
// fallocate(KEEP_SIZE) of the whole file.
struct Writers {
  int count = 4;
  off_t file_size = 128 * kMiB;
  off_t write_size = 32 * kKiB;
  bool reserve_first = false;
};
Outcome concurrent_writers(const std::string& dir, const Writers& writers);

// Seed 004: page compression: the last `punched` bytes of every `page` of
// [0, size) are punched (PUNCH_HOLE | KEEP_SIZE).
Outcome punch_page_tails(int fd, off_t size, off_t page = kInnodbPage, off_t punched = 8 * kKiB);

// Per-call costs (scripts/measure-real-fs.sh times each phase and divides by
// its calls): [0, size) reserved one page per fallocate(0) call, as a
// tablespace extended a page at a time; and the first `pages` pages
// overwritten in place, each followed by fdatasync, as a database flushing
// one page (on a copy-on-write filesystem every overwrite is new blocks).
Outcome fallocate_pages(int fd, off_t size, off_t page = kInnodbPage);
Outcome overwrite_pages_synced(int fd, int pages, off_t page = kInnodbPage);

}  // namespace mimicfs::workloads
