// SPDX-License-Identifier: Apache-2.0
#include "engine/data/host_data_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/falloc.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>
#include <thread>

#include "engine/data/zero_bytes.h"

namespace mimicfs {
namespace {

constexpr uint64_t kPage = HostFileData::kPageSize;
constexpr const char* kFilesName = "files";
constexpr const char* kVolumeName = "volume.meta";
constexpr const char* kVolumeNewName = "volume.meta.new";
constexpr const char* kMountedName = "mounted";
constexpr std::string_view kVolumeFormat = "mimicfs volume";
constexpr uint64_t kVolumeVersion = 1;
constexpr int kLockAttempts = 60;     // 50 ms apart: 3 s
constexpr int kSaveAttempts = 12000;  // 10 minutes
constexpr std::string_view kSaving = "saving";
constexpr std::string_view kSaveFailed = "save failed: ";

// Calls visit(offset, piece, zeros) for each run of `data` written at
// `offset`, in order: runs whose pieces (the parts of `data` in each 4 KiB page
// of the file) are all zero, and runs of pieces holding data.
template <typename Visit>
void for_each_run(uint64_t offset, std::span<const std::byte> data, Visit&& visit) {
  size_t run_start = 0;
  bool run_zero = false;
  for (size_t i = 0; i < data.size();) {
    const size_t length = std::min<uint64_t>(kPage - (offset + i) % kPage, data.size() - i);
    const bool zero = all_zero(data.data() + i, length);
    if (i == run_start) {
      run_zero = zero;
    } else if (zero != run_zero) {
      visit(offset + run_start, data.subspan(run_start, i - run_start), run_zero);
      run_start = i;
      run_zero = zero;
    }
    i += length;
  }
  if (run_start < data.size()) visit(offset + run_start, data.subspan(run_start), run_zero);
}

// pwrite until all of `data` is written; false with errno set when it fails.
bool write_all(int fd, const std::byte* data, size_t length, uint64_t offset) {
  while (length > 0) {
    const ssize_t n = ::pwrite(fd, data, length, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    length -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

// Reads up to `length` bytes; the count read (short only at the host file's
// end), or -1 with errno set.
ssize_t read_all(int fd, std::byte* out, size_t length, uint64_t offset) {
  size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, out + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

// Calls visit(name) for each entry of a directory but . and .., until it
// returns false: 0, or the errno when the directory cannot be listed.
template <typename Visit>
int for_each_entry(int dir_fd, Visit&& visit) {
  const int list_fd = dup(dir_fd);
  if (list_fd < 0) return errno;
  DIR* listing = fdopendir(list_fd);
  if (!listing) {
    const int error = errno;
    ::close(list_fd);
    return error;
  }
  while (const dirent* entry = readdir(listing)) {
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (!visit(name)) break;
  }
  closedir(listing);
  return 0;
}

// A directory's first entry other than . and .. ("" when empty), or the errno.
std::expected<std::string, int> first_entry(int dir_fd) {
  std::string found;
  if (const int error = for_each_entry(dir_fd, [&](std::string_view name) {
        found = name;
        return false;
      });
      error != 0) {
    return std::unexpected(error);
  }
  return found;
}

// The first line of DIR/mounted ("" when missing or empty).
std::string serving_state(int dir_fd) {
  const int fd = openat(dir_fd, "mounted", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  std::array<char, 512> text{};
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  ::close(fd);
  std::string line(text.data(), n > 0 ? static_cast<size_t>(n) : 0);
  return line.substr(0, line.find('\n'));
}

// The largest number among a directory's entries named by one (0: none).
std::expected<uint64_t, int> last_number(int dir_fd) {
  uint64_t last = 0;
  if (const int error = for_each_entry(dir_fd, [&](std::string_view name) {
        uint64_t number = 0;
        const char* end = name.data() + name.size();
        if (auto [at, failed] = std::from_chars(name.data(), end, number);
            failed == std::errc() && at == end) {
          last = std::max(last, number);
        }
        return true;
      });
      error != 0) {
    return std::unexpected(error);
  }
  return last;
}

// `text` fit for a one-line message: control characters become '?'.
std::string printable(std::string_view text) {
  std::string out(text.substr(0, 80));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

// Lets the daemon keep a descriptor for each file holding data.
void raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    spdlog::info("data directory: up to {} open files", limit.rlim_cur);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// HostFileData

HostFileData::~HostFileData() {
  if (fd_ < 0) return;
  ::close(fd_);
  // A host file with data outlives its FileData: a saved volume refers to it
  // (key()), or the daemon stops without saving and DIR is refused until emptied.
  // A file removed from the volume was emptied first (release()).
  if (host_end_ > 0) return;
  if (unlinkat(store_.files_fd_, name().c_str(), 0) != 0) {
    spdlog::warn("data directory {}: cannot remove files/{}: {}", store_.directory_, name(),
                 std::strerror(errno));
  }
}

int HostFileData::open_host_file() {
  fd_ = openat(store_.files_fd_, name().c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  return fd_ < 0 ? errno : 0;
}

void HostFileData::fail(const char* call) const {
  const int error = errno;
  throw std::system_error(error, std::generic_category(),
                          fmt::format("data directory {}: files/{}: {}", store_.directory_,
                                      name(), call));
}

Result<void> HostFileData::reserve(uint64_t offset, std::span<const std::byte> data) {
  int error = 0;
  const char* call = "";
  for_each_run(offset, data, [&](uint64_t at, std::span<const std::byte> piece, bool zeros) {
    if (zeros || error != 0) return;
    if (fd_ < 0 && (error = open_host_file()) != 0) {
      call = "open";
      return;
    }
    if (!store_.can_reserve_.load(std::memory_order_relaxed)) return;
    int done;
    do {
      done = fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(at),
                       static_cast<off_t>(piece.size()));
    } while (done != 0 && errno == EINTR);
    if (done == 0) return;
    if (errno == EOPNOTSUPP) {
      // Writes go on; a full host then fails them with EIO, not ENOSPC.
      if (store_.can_reserve_.exchange(false)) {
        spdlog::warn("data directory {}: the host filesystem cannot fallocate", store_.directory_);
      }
      return;
    }
    error = errno;
    call = "fallocate";
  });
  if (error == 0) return {};
  // What runs were reserved before the failure go back.
  unreserve(offset, data);
  if (error == ENOSPC || error == EDQUOT) return mimicfs::fail(ENOSPC);
  if (error == EFBIG) return mimicfs::fail(EFBIG);  // past the host's largest file
  // Anything else is the host failing, as a device would: EIO.
  spdlog::error("data directory {}: files/{}: {}: {}", store_.directory_, name(), call,
                std::strerror(error));
  return mimicfs::fail(EIO);
}

void HostFileData::unreserve(uint64_t offset, std::span<const std::byte> data) {
  if (fd_ < 0 || !store_.can_reserve_.load(std::memory_order_relaxed)) return;
  // Past the host file's end the reserved blocks hold nothing: punched, they go
  // back. (Inside it they may fill holes, which read as zeros all the same.)
  for_each_run(offset, data, [&](uint64_t at, std::span<const std::byte> piece, bool zeros) {
    const uint64_t end = at + piece.size();
    if (zeros || end <= host_end_) return;
    const uint64_t from = std::max(at, host_end_);
    (void)fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(from),
                    static_cast<off_t>(end - from));
  });
}

void HostFileData::write(uint64_t offset, std::span<const std::byte> data) {
  // Data runs first: a run of zeros that reaches the host file's end would cut
  // it short, and the blocks reserved past it for the data with it.
  for_each_run(offset, data, [&](uint64_t at, std::span<const std::byte> piece, bool zeros) {
    if (zeros) return;
    if (fd_ < 0) {
      if (const int error = open_host_file(); error != 0) {
        errno = error;
        fail("open");
      }
    }
    if (!write_all(fd_, piece.data(), piece.size(), at)) {
      // A short write may have made the host file longer: what it holds past
      // host_end_ must still be known (zero() clears it, read() reads it).
      const int error = errno;
      struct stat st {};
      if (fstat(fd_, &st) == 0) {
        host_end_ = std::max<uint64_t>(host_end_, static_cast<uint64_t>(st.st_size));
      }
      errno = error;
      fail("pwrite");
    }
    host_end_ = std::max<uint64_t>(host_end_, at + piece.size());
  });
  // Zeros: nothing to write past the host file's end; inside it the old bytes go.
  for_each_run(offset, data, [&](uint64_t at, std::span<const std::byte> piece, bool zeros) {
    if (zeros) zero(at, piece.size());
  });
}

void HostFileData::read(uint64_t offset, std::span<std::byte> out) const {
  size_t done = 0;
  if (fd_ >= 0 && offset < host_end_) {
    const size_t wanted = std::min<uint64_t>(out.size(), host_end_ - offset);
    const ssize_t n = read_all(fd_, out.data(), wanted, offset);
    if (n < 0) fail("pread");
    done = static_cast<size_t>(n);
  }
  std::memset(out.data() + done, 0, out.size() - done);
}

void HostFileData::zero(uint64_t offset, uint64_t length) {
  if (fd_ < 0 || offset >= host_end_ || length == 0) return;
  const uint64_t end = length >= host_end_ - offset ? host_end_ : offset + length;
  if (end == host_end_) {
    // The tail: the host file ends here now, and before the page this cuts
    // when nothing else is left in it.
    uint64_t new_end = offset;
    if (offset % kPage != 0) {
      const uint64_t page = offset / kPage * kPage;
      std::array<std::byte, kPage> bytes{};
      const size_t length_in_page = offset - page;
      if (read_all(fd_, bytes.data(), length_in_page, page) < 0) fail("pread");
      if (all_zero(bytes.data(), length_in_page)) new_end = page;
    }
    if (ftruncate(fd_, static_cast<off_t>(new_end)) != 0) fail("ftruncate");
    host_end_ = new_end;
    return;
  }
  punch(offset, end - offset);
  // A page the range cut into is given back when nothing else is left in it.
  if (offset % kPage != 0) punch_page_if_zero(offset);
  if (end % kPage != 0) punch_page_if_zero(end);
}

void HostFileData::punch_page_if_zero(uint64_t offset) {
  const uint64_t page = offset / kPage * kPage;
  const size_t length = std::min<uint64_t>(kPage, host_end_ - page);
  std::array<std::byte, kPage> bytes{};
  if (read_all(fd_, bytes.data(), length, page) < 0) fail("pread");
  // The whole page, past the end too: a block the range only cut into is
  // zeroed, not freed. (A host that cannot punch has zeros there already.)
  if (all_zero(bytes.data(), length) && store_.can_punch_.load(std::memory_order_relaxed)) {
    punch(page, kPage);
  }
}

void HostFileData::punch(uint64_t offset, uint64_t length) {
  if (store_.can_punch_.load(std::memory_order_relaxed)) {
    if (fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(length)) == 0) {
      return;
    }
    if (errno != EOPNOTSUPP) fail("fallocate(PUNCH_HOLE)");
    if (store_.can_punch_.exchange(false)) {
      spdlog::warn("data directory {}: the host filesystem cannot punch holes; zeros are written",
                   store_.directory_);
    }
  }
  static const std::array<std::byte, 64 * 1024> zeros{};
  while (length > 0) {
    const size_t piece = std::min<uint64_t>(length, zeros.size());
    if (!write_all(fd_, zeros.data(), piece, offset)) fail("pwrite");
    offset += piece;
    length -= piece;
  }
}

uint64_t HostFileData::stored_bytes() const {
  if (fd_ < 0) return 0;
  struct stat st {};
  if (fstat(fd_, &st) != 0) fail("fstat");
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

// ---------------------------------------------------------------------------
// HostDataStore

HostDataStore::HostDataStore(std::string directory, int dir_fd, int marker_fd, int files_fd)
    : directory_(std::move(directory)), dir_fd_(dir_fd), marker_fd_(marker_fd), files_fd_(files_fd) {}

HostDataStore::~HostDataStore() {
  ::close(files_fd_);
  ::close(dir_fd_);
  ::close(marker_fd_);  // and the lock with it
}

std::unique_ptr<FileData> HostDataStore::create_file() {
  return std::make_unique<HostFileData>(*this, next_number_.fetch_add(1));
}

void HostDataStore::note_number(uint64_t number) {
  uint64_t next = next_number_.load();
  while (next <= number && !next_number_.compare_exchange_weak(next, number + 1)) {
  }
}

std::expected<std::unique_ptr<FileData>, std::string> HostDataStore::reopen_file(
    const std::string& key) {
  uint64_t number = 0;
  const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), number);
  if (error != std::errc() || end != key.data() + key.size() || number == 0 ||
      key != std::to_string(number)) {
    return std::unexpected(fmt::format("\"{}\" does not name a file of files/", printable(key)));
  }
  if (!reopened_.insert(number).second) {
    return std::unexpected(fmt::format("files/{} is named by two files", key));
  }
  const int fd = openat(files_fd_, key.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::unexpected(fmt::format("files/{}: {}", key, std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::unexpected(fmt::format("files/{} is not a regular file", key));
  }
  note_number(number);
  return std::make_unique<HostFileData>(*this, number, fd, static_cast<uint64_t>(st.st_size));
}

std::expected<std::optional<ImageJson>, std::string> HostDataStore::load_volume() const {
  auto refused = [&](std::string_view why) {
    return std::unexpected(fmt::format("--data-dir {}: {}", directory_, why));
  };
  const int fd = openat(dir_fd_, kVolumeName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<ImageJson>();
    return refused(fmt::format("cannot open {}: {}", kVolumeName, std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return refused(fmt::format("{} is not a regular file", kVolumeName));
  }
  std::vector<std::uint8_t> bytes;
  std::array<std::uint8_t, 1 << 16> buffer;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return refused(fmt::format("cannot read {}: {}", kVolumeName, std::strerror(error)));
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buffer.begin(), buffer.begin() + n);
  }
  ::close(fd);
  ImageJson image;
  try {
    image = ImageJson::from_cbor(bytes, /*strict=*/true, /*allow_exceptions=*/false);
  } catch (const std::exception&) {  // some malformed inputs throw all the same
    image = ImageJson(ImageJson::value_t::discarded);
  }
  if (image.is_discarded() || !image.is_object() || !image.contains("format") ||
      image["format"] != kVolumeFormat || !image.contains("version") ||
      !image["version"].is_number_unsigned()) {
    return refused(fmt::format("{} is not a saved mimicfs volume (corrupt?)", kVolumeName));
  }
  if (image["version"] != kVolumeVersion) {
    return refused(fmt::format("{} is of version {}; this mimicfs reads version {}", kVolumeName,
                               image["version"].get<uint64_t>(), kVolumeVersion));
  }
  return std::optional<ImageJson>(std::move(image));
}

std::expected<void, std::string> HostDataStore::save_volume(const ImageJson& image) const {
  auto failed = [&](std::string_view what) {
    return std::unexpected(fmt::format("data directory {}: cannot save the volume: {}: {}",
                                       directory_, what, std::strerror(errno)));
  };
  ImageJson whole = image;
  whole["format"] = kVolumeFormat;
  whole["version"] = kVolumeVersion;
  const std::vector<std::uint8_t> bytes = ImageJson::to_cbor(whole);
  const int fd = openat(dir_fd_, kVolumeNewName,
                        O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return failed(kVolumeNewName);
  const bool written = write_all(fd, reinterpret_cast<const std::byte*>(bytes.data()),
                                 bytes.size(), 0) &&
                       fsync(fd) == 0;
  const int error = errno;
  ::close(fd);
  errno = error;
  if (!written) return failed(kVolumeNewName);
  // The contents it names first, then the name, then the directory.
  if (syncfs(files_fd_) != 0) return failed("syncfs");
  if (renameat(dir_fd_, kVolumeNewName, dir_fd_, kVolumeName) != 0) return failed("rename");
  if (fsync(dir_fd_) != 0) return failed("fsync");
  return {};
}

std::expected<void, std::string> HostDataStore::begin_serving() const {
  const int fd = openat(dir_fd_, kMountedName, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                        0644);
  if (fd < 0 || fsync(dir_fd_) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    return std::unexpected(fmt::format("--data-dir {}: cannot make {}: {}", directory_,
                                       kMountedName, std::strerror(error)));
  }
  ::close(fd);
  return {};
}

void HostDataStore::note_serving(std::string_view state) const {
  const int fd = openat(dir_fd_, kMountedName, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  const std::string line = printable(state) + "\n";
  (void)write_all(fd, reinterpret_cast<const std::byte*>(line.data()), line.size(), 0);
  ::close(fd);
}

void HostDataStore::end_serving() const {
  if (unlinkat(dir_fd_, kMountedName, 0) != 0 || fsync(dir_fd_) != 0) {
    spdlog::error("data directory {}: cannot remove {}: {}", directory_, kMountedName,
                  std::strerror(errno));
  }
}

std::expected<std::unique_ptr<HostDataStore>, std::string> HostDataStore::open(
    const std::string& dir, bool check_only) {
  auto refused = [&](std::string_view why) {
    return std::unexpected(fmt::format("--data-dir {}: {}", dir, why));
  };
  if (dir.empty()) return refused("an empty name");
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return refused(std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return refused("not a directory");
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return refused(fmt::format("not writable ({})", std::strerror(errno)));
  }
  // Every descriptor but the two kept is closed on the way out.
  struct Closer {
    int& fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  };
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  Closer close_dir{dir_fd};
  if (dir_fd < 0) return refused(std::strerror(errno));
  // Never a FIFO's open or read that waits, nor a link followed out of DIR.
  int marker_fd = openat(dir_fd, kMarkerName.data(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  Closer close_marker{marker_fd};
  if (marker_fd < 0 && errno != ENOENT) {
    return refused(fmt::format("cannot open {}: {}", kMarkerName, std::strerror(errno)));
  }
  if (marker_fd < 0) {
    // A new data directory, only ever in an empty one.
    auto found = first_entry(dir_fd);
    if (!found) return refused(std::strerror(found.error()));
    if (!found->empty()) {
      return refused(fmt::format(
          "not empty and not a mimicfs data directory (found \"{}\"; give an empty directory)",
          printable(*found)));
    }
    marker_fd = openat(dir_fd, kMarkerName.data(),
                       O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (marker_fd < 0 ||
        !write_all(marker_fd, reinterpret_cast<const std::byte*>(kMarkerText.data()),
                   kMarkerText.size(), 0)) {
      const int error = errno;
      if (marker_fd >= 0) unlinkat(dir_fd, kMarkerName.data(), 0);  // no half-written marker
      return refused(fmt::format("cannot write {}: {}", kMarkerName, std::strerror(error)));
    }
  } else {
    struct stat marker_st {};
    if (fstat(marker_fd, &marker_st) != 0 || !S_ISREG(marker_st.st_mode)) {
      return refused(fmt::format("{} is not a regular file", kMarkerName));
    }
    std::array<char, 256> text{};
    const ssize_t n = read_all(marker_fd, reinterpret_cast<std::byte*>(text.data()), text.size(), 0);
    const std::string_view found(text.data(), n < 0 ? 0 : static_cast<size_t>(n));
    if (found != kMarkerText) {
      constexpr std::string_view kPrefix = "mimicfs data directory ";
      if (found.starts_with(kPrefix) && found.ends_with('\n') && found.size() < 64) {
        return refused(fmt::format(
            "a mimicfs data directory of version {}; this mimicfs reads {}",
            printable(found.substr(kPrefix.size(), found.size() - kPrefix.size() - 1)),
            kMarkerText.substr(kPrefix.size(), 1)));
      }
      return refused(fmt::format("{} is not a mimicfs marker (corrupt?)", kMarkerName));
    }
  }
  // A daemon whose volume was just unmounted saves it (`mounted` says
  // "saving"), then lets go: a mount waits for that, and a little for an
  // unmount just begun.
  for (int attempt = 0;; ++attempt) {
    if (flock(marker_fd, LOCK_EX | LOCK_NB) == 0) break;
    if (errno != EWOULDBLOCK) return refused(fmt::format("cannot lock: {}", std::strerror(errno)));
    const bool saving = serving_state(dir_fd) == kSaving;
    if (attempt >= (saving ? kSaveAttempts : kLockAttempts)) {
      return refused(saving ? "its daemon is still saving the volume (waited 10 minutes)"
                            : "in use by another mimicfs mount");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (mkdirat(dir_fd, kFilesName, 0700) != 0 && errno != EEXIST) {
    return refused(fmt::format("cannot make {}/: {}", kFilesName, std::strerror(errno)));
  }
  int files_fd = openat(dir_fd, kFilesName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  Closer close_files{files_fd};
  if (files_fd < 0) {
    return refused(fmt::format("cannot open {}/: {}", kFilesName, std::strerror(errno)));
  }
  // A daemon that served DIR and died without saving: its files changed after
  // volume.meta was written, so neither matches the other any more.
  if (faccessat(dir_fd, kMountedName, F_OK, 0) == 0) {
    const std::string state = serving_state(dir_fd);
    if (state.starts_with(kSaveFailed)) {
      return refused(fmt::format(
          "the mimicfs that served it last could not save the volume ({}), so its files no "
          "longer match its saved volume; empty the directory to start afresh",
          state.substr(kSaveFailed.size())));
    }
    return refused(
        "the mimicfs that served it last did not unmount (killed?), so its files no longer "
        "match its saved volume; empty the directory to start afresh");
  }
  if (faccessat(dir_fd, kVolumeName, F_OK, 0) != 0) {
    auto found = first_entry(files_fd);
    if (!found) return refused(std::strerror(found.error()));
    if (!found->empty()) {
      return refused(fmt::format("{}/ holds \"{}\" but no volume is saved ({} is missing); "
                                 "empty the directory to start afresh",
                                 kFilesName, printable(*found), kVolumeName));
    }
  }
  if (!check_only) raise_descriptor_limit();
  std::unique_ptr<HostDataStore> store(new HostDataStore(dir, dir_fd, marker_fd, files_fd));
  // New host files never take the number of one already there.
  if (auto last = last_number(files_fd); !last) {
    return refused(fmt::format("cannot list {}/: {}", kFilesName, std::strerror(last.error())));
  } else {
    store->note_number(*last);
  }
  dir_fd = -1;  // kept
  marker_fd = -1;
  files_fd = -1;
  return store;
}

}  // namespace mimicfs
