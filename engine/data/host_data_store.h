// SPDX-License-Identifier: Apache-2.0
// HostDataStore: file contents in sparse files under a host directory
// (`mimicfs mount --data-dir DIR`), so a volume can hold more than the daemon's
// memory. The memory store stays the default.
//
// DIR holds:
//   mimicfs-data   the marker, "mimicfs data directory 1"; locked (flock) while
//                  a daemon uses DIR, so two mounts never share it
//   files/N        the contents of one emulated file, created at its first
//                  write that holds data (an empty file has no host file)
//   volume.meta    the volume saved at the last clean unmount (VolumeImage, in
//                  CBOR): the next mount of DIR restores it
//   mounted        present while a daemon serves the volume: found at open, it
//                  says the last daemon died (killed) without saving, so the
//                  files no longer match volume.meta and DIR is refused
//
// A host file is as sparse as the emulated file: zeros are never written
// (skipped past the host file's end, punched inside it), zero() punches a hole
// (or cuts the host file short at its end), and a page left all zero is
// punched whole, so a page of zeros costs the host no block. Before the volume records a write, reserve()
// allocates the host blocks for its data (fallocate, KEEP_SIZE): a full host
// filesystem fails the write with ENOSPC and nothing written before is lost.
//
// A host file goes when its emulated file is emptied (removed, or truncated to
// nothing); one holding data stays when its FileData goes, for the saved
// volume that names it. Each file holding data keeps a descriptor open; the
// soft RLIMIT_NOFILE is raised to the hard one.
#pragma once

#include <atomic>
#include <expected>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "engine/base/volume_image.h"
#include "engine/data/data_store.h"

namespace mimicfs {

class HostDataStore;

class HostFileData final : public FileData {
 public:
  static constexpr uint64_t kPageSize = 4096;

  HostFileData(HostDataStore& store, uint64_t number) : store_(store), number_(number) {}
  // A host file of an earlier mount, open as `fd`, `size` bytes long.
  HostFileData(HostDataStore& store, uint64_t number, int fd, uint64_t size)
      : store_(store), number_(number), fd_(fd), host_end_(size) {}
  ~HostFileData() override;
  HostFileData(const HostFileData&) = delete;
  HostFileData& operator=(const HostFileData&) = delete;

  Result<void> reserve(uint64_t offset, std::span<const std::byte> data) override;
  void unreserve(uint64_t offset, std::span<const std::byte> data) override;
  void write(uint64_t offset, std::span<const std::byte> data) override;
  void read(uint64_t offset, std::span<std::byte> out) const override;
  void zero(uint64_t offset, uint64_t length) override;
  uint64_t stored_bytes() const override;
  // An empty host file is not kept: the file restores as a new one.
  std::string key() const override { return fd_ < 0 || host_end_ == 0 ? "" : name(); }

  // The host file's name under DIR/files.
  std::string name() const { return std::to_string(number_); }

 private:
  // Creates the host file at the first write; the errno when it cannot.
  int open_host_file();
  // Punches [offset, offset+length) inside the host file (writes zeros where
  // the host cannot punch).
  void punch(uint64_t offset, uint64_t length);
  // Punches the page holding `offset` if it now reads as all zero.
  void punch_page_if_zero(uint64_t offset);
  [[noreturn]] void fail(const char* call) const;

  HostDataStore& store_;
  const uint64_t number_;
  int fd_ = -1;
  uint64_t host_end_ = 0;  // the host file's size: bytes past it read as zero
};

class HostDataStore final : public DataStore {
 public:
  static constexpr std::string_view kMarkerName = "mimicfs-data";
  static constexpr std::string_view kMarkerText = "mimicfs data directory 1\n";

  // Opens (or, when empty, makes) the data directory `dir`. The error is one
  // line naming `dir` and what is wrong: missing, not a directory, not
  // writable, not empty and not a data directory, a marker of another version,
  // or in use by another daemon. Nothing in DIR is overwritten.
  // `check_only`: to say whether DIR would do, not to serve a volume from it.
  static std::expected<std::unique_ptr<HostDataStore>, std::string> open(const std::string& dir,
                                                                        bool check_only = false);
  ~HostDataStore() override;

  std::unique_ptr<FileData> create_file() override;
  std::expected<std::unique_ptr<FileData>, std::string> reopen_file(
      const std::string& key) override;

  const std::string& directory() const { return directory_; }

  // The volume saved at the last clean unmount, if any; the reason when
  // volume.meta cannot be read (another version, corrupt), naming DIR.
  std::expected<std::optional<ImageJson>, std::string> load_volume() const;
  // Writes `image` as volume.meta, atomically (a new file renamed over it).
  std::expected<void, std::string> save_volume(const ImageJson& image) const;
  // The `mounted` marker: made before the volume is served, removed once it
  // is saved. note_serving() says why it stays: "saving" (a mount waits for
  // the save), or "save failed: REASON" (the next open says so).
  std::expected<void, std::string> begin_serving() const;
  void note_serving(std::string_view state) const;
  void end_serving() const;

 private:
  friend class HostFileData;
  HostDataStore(std::string directory, int dir_fd, int marker_fd, int files_fd);
  // Makes a later create_file() never reuse `number`.
  void note_number(uint64_t number);

  const std::string directory_;
  const int dir_fd_;     // DIR
  const int marker_fd_;  // holds the lock
  const int files_fd_;   // DIR/files
  std::set<uint64_t> reopened_;  // reopen_file()'s numbers: each once (loads are single-threaded)
  std::atomic<uint64_t> next_number_{1};
  std::atomic<bool> can_reserve_{true};  // false once the host refuses fallocate
  std::atomic<bool> can_punch_{true};    // false once the host refuses to punch holes
};

}  // namespace mimicfs
