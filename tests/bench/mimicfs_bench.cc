// SPDX-License-Identifier: Apache-2.0
// mimicfs_bench: I/O workloads run side by side on several directories.
//
//   mimicfs_bench [--repetitions N] [--json] [--zeros-gib G] [--only W[,W...]]
//                 [--ratio SUBJECT/REFERENCE ...] LABEL=DIR [LABEL=DIR ...]
//
// The first LABEL is the reference (normally a tmpfs): every other label gets a
// "% of FIRST" column, the ratio of medians. Each --ratio adds a column to a
// second table: SUBJECT's median divided by REFERENCE's (both labels). Machines are noisy, so each workload
// runs N times per directory and only medians are reported; the directories take
// turns within each repetition so that a burst of load elsewhere hits all of them.
// All figures are "higher is better".
//
// Exit status: 0 when every workload ran, 1 when one failed on some directory (its
// cell says FAILED and the error is printed), 2 on bad arguments.

#include <fcntl.h>
#include <fmt/core.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kBlock = 4096;

constexpr std::size_t kSeqFileSize = 256 * kMiB;
constexpr std::size_t kSeqChunk = kMiB;
constexpr std::size_t kRandFileSize = 256 * kMiB;
constexpr int kRandWrites = 16384;
constexpr std::uint64_t kRandSeed = 0x6d696d6963667321;  // "mimicfs!"
constexpr int kStrideWrites = 16384;                     // 64 MiB at a 4 KiB stride
constexpr int kSmallFiles = 2000;
constexpr int kDefaultRepetitions = 5;

// ---------------------------------------------------------------------------
// Errors

struct UsageError {
  std::string message;
};

// A failed system call inside a workload; the message names the call and file.
std::system_error sys_error(std::string_view what, const std::string& path) {
  int err = errno;  // before fmt::format can touch it
  return std::system_error(err, std::generic_category(), fmt::format("{} {}", what, path));
}

// ---------------------------------------------------------------------------
// Files the run may leave behind. Workloads run one at a time, so at most one
// scratch file and one scratch directory exist at once. A SIGINT/SIGTERM handler
// removes them; it can only use async-signal-safe calls, so their paths are kept
// as fixed C strings, published by a flag set after the copy.

constexpr std::size_t kMaxPath = 4096;
std::array<char, kMaxPath> g_scratch_file{};
volatile sig_atomic_t g_scratch_file_live = 0;
std::array<char, kMaxPath> g_scratch_dir{};  // create_unlink's, entries f0 .. f{kSmallFiles-1}
volatile sig_atomic_t g_scratch_dir_live = 0;

void on_signal(int signo) {
  if (g_scratch_file_live) unlink(g_scratch_file.data());
  if (g_scratch_dir_live) {
    // Builds "DIR/fN" by hand: snprintf is not async-signal-safe.
    char name[kMaxPath + 16];
    std::size_t dir_length = strlen(g_scratch_dir.data());
    memcpy(name, g_scratch_dir.data(), dir_length);
    for (int i = 0; i < kSmallFiles; ++i) {
      std::size_t n = dir_length;
      name[n++] = '/';
      name[n++] = 'f';
      char digits[12];
      int d = 0;
      for (int v = i; d == 0 || v > 0; v /= 10) digits[d++] = static_cast<char>('0' + v % 10);
      while (d > 0) name[n++] = digits[--d];
      name[n] = '\0';
      unlink(name);
    }
    rmdir(g_scratch_dir.data());
  }
  signal(signo, SIG_DFL);
  raise(signo);
}

// The one scratch file of a workload run: visible to the signal handler while
// alive, unlinked (if it exists) when it goes out of scope.
class ScratchFile {
 public:
  explicit ScratchFile(std::string path) : path_(std::move(path)) {
    if (path_.size() >= kMaxPath) throw std::runtime_error("path too long: " + path_);
    std::memcpy(g_scratch_file.data(), path_.c_str(), path_.size() + 1);
    g_scratch_file_live = 1;
  }
  ~ScratchFile() {
    unlink(path_.c_str());
    g_scratch_file_live = 0;
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// An open file descriptor, closed on scope exit.
class Fd {
 public:
  Fd(const std::string& path, int flags, mode_t mode = 0644)
      : fd_(open(path.c_str(), flags | O_CLOEXEC, mode)) {
    if (fd_ < 0) throw sys_error("open", path);
  }
  // Takes ownership of an open descriptor.
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }

 private:
  int fd_;
};

// Memory aligned for O_DIRECT.
struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<std::byte[], FreeDeleter>;

AlignedBuffer allocate_aligned(std::size_t size) {
  void* p = std::aligned_alloc(kBlock, size);
  if (p == nullptr) throw std::bad_alloc();
  return AlignedBuffer(static_cast<std::byte*>(p));
}

void pwrite_all(int fd, const std::byte* data, std::size_t size, off_t offset,
                const std::string& path) {
  while (size > 0) {
    ssize_t n = pwrite(fd, data, size, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw sys_error("pwrite", path);
    }
    if (n == 0) {
      errno = EIO;
      throw sys_error("pwrite (wrote 0 bytes)", path);
    }
    data += n;
    size -= static_cast<std::size_t>(n);
    offset += n;
  }
}

// Reads exactly size bytes; a short file is an error here.
void pread_all(int fd, std::byte* data, std::size_t size, off_t offset, const std::string& path) {
  while (size > 0) {
    ssize_t n = pread(fd, data, size, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw sys_error("pread", path);
    }
    if (n == 0) {
      errno = EIO;
      throw sys_error("pread (unexpected end of file)", path);
    }
    data += n;
    size -= static_cast<std::size_t>(n);
    offset += n;
  }
}

void fsync_or_throw(int fd, const std::string& path) {
  if (fsync(fd) != 0) throw sys_error("fsync", path);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---------------------------------------------------------------------------
// Workloads

struct Target {
  std::string label;
  std::string dir;
  std::string read_mode;  // how seq_read_1m kept the page cache out, set on first run
};

// One measured figure of one workload run.
struct Sample {
  std::string metric;
  double value;
};

// The bytes seq_write_1m writes: pseudo-random, never zero (a zero-aware store must
// not get to skip them), made once. Twice the chunk size so each 1 MiB write can
// start at a different 4 KiB-aligned offset and carry different bytes.
const std::vector<std::byte>& random_pool() {
  static const std::vector<std::byte> pool = [] {
    std::vector<std::byte> bytes(2 * kSeqChunk);
    std::mt19937_64 rng(kRandSeed);
    for (std::size_t i = 0; i < bytes.size(); i += 8) {
      std::uint64_t word = rng();
      for (std::size_t j = 0; j < 8; ++j) {
        auto b = static_cast<unsigned char>(word >> (8 * j));
        bytes[i + j] = std::byte{b == 0 ? static_cast<unsigned char>(0xa5) : b};
      }
    }
    return bytes;
  }();
  return pool;
}

const std::byte* pool_chunk(std::size_t index) {
  std::size_t offset = (index * 37 * kBlock) % kSeqChunk;
  return random_pool().data() + offset;
}

std::string scratch_path(const Target& target, std::string_view name) {
  return fmt::format("{}/.mimicfs_bench-{}-{}", target.dir, getpid(), name);
}

// Opens path for a cold sequential read. O_DIRECT bypasses the page cache where
// the filesystem accepts it (a probe read checks, since some accept the open and
// refuse the I/O); otherwise the cache is dropped with posix_fadvise. On tmpfs the
// page cache is the storage, so neither can make its reads cold.
std::unique_ptr<Fd> open_for_cold_read(Target& target, const std::string& path,
                                       std::byte* probe_buffer) {
  int fd = open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  std::string refused;
  if (fd >= 0) {
    ssize_t n = pread(fd, probe_buffer, kSeqChunk, 0);
    if (n >= 0) {
      target.read_mode = "O_DIRECT";
      return std::make_unique<Fd>(fd);
    }
    refused = fmt::format("O_DIRECT read refused: {}", std::strerror(errno));
    close(fd);
  } else {
    refused = fmt::format("O_DIRECT open refused: {}", std::strerror(errno));
  }
  auto file = std::make_unique<Fd>(path, O_RDONLY);
  int err = posix_fadvise(file->get(), 0, 0, POSIX_FADV_DONTNEED);
  if (err != 0) {
    errno = err;
    throw sys_error("posix_fadvise(DONTNEED)", path);
  }
  target.read_mode = fmt::format("posix_fadvise(DONTNEED) ({})", refused);
  return file;
}

// seq_write_1m, seq_rewrite_1m, seq_read_1m, seq_read_buffered_1m and
// seq_truncate_write_1m: each
// after the first needs the written file, so they run as one.
std::vector<Sample> run_sequential(Target& target) {
  ScratchFile file(scratch_path(target, "seq"));
  constexpr std::size_t kChunks = kSeqFileSize / kSeqChunk;
  // The rewrite's chunks differ from the first write's.
  auto rewritten = [](std::size_t i) { return pool_chunk(i + 1); };
  double write_seconds;
  double rewrite_seconds;
  {
    Fd fd(file.path(), O_CREAT | O_TRUNC | O_WRONLY);
    auto start = Clock::now();
    for (std::size_t i = 0; i < kChunks; ++i) {
      pwrite_all(fd.get(), pool_chunk(i), kSeqChunk, static_cast<off_t>(i * kSeqChunk),
                 file.path());
    }
    fsync_or_throw(fd.get(), file.path());
    write_seconds = seconds_since(start);
    // Overwriting synced data in place, as a database's checkpoint does.
    start = Clock::now();
    for (std::size_t i = 0; i < kChunks; ++i) {
      pwrite_all(fd.get(), rewritten(i), kSeqChunk, static_cast<off_t>(i * kSeqChunk),
                 file.path());
    }
    fsync_or_throw(fd.get(), file.path());
    rewrite_seconds = seconds_since(start);
  }

  AlignedBuffer buffer = allocate_aligned(kSeqChunk);
  std::unique_ptr<Fd> fd = open_for_cold_read(target, file.path(), buffer.get());
  auto start = Clock::now();
  for (std::size_t i = 0; i < kChunks; ++i) {
    pread_all(fd->get(), buffer.get(), kSeqChunk, static_cast<off_t>(i * kSeqChunk), file.path());
  }
  double read_seconds = seconds_since(start);
  // The last chunk must be what was rewritten: a cheap check that reads returned data.
  if (std::memcmp(buffer.get(), rewritten(kChunks - 1), kSeqChunk) != 0) {
    throw std::runtime_error(fmt::format("read back different bytes from {}", file.path()));
  }
  fd.reset();

  // Through the page cache, emptied first, as a database's scan reads: the
  // kernel's readahead decides how big the requests the filesystem sees are.
  double buffered_read_seconds;
  {
    Fd buffered(file.path(), O_RDONLY);
    if (int err = posix_fadvise(buffered.get(), 0, 0, POSIX_FADV_DONTNEED); err != 0) {
      errno = err;
      throw sys_error("posix_fadvise(DONTNEED)", file.path());
    }
    start = Clock::now();
    for (std::size_t i = 0; i < kChunks; ++i) {
      pread_all(buffered.get(), buffer.get(), kSeqChunk, static_cast<off_t>(i * kSeqChunk),
                file.path());
    }
    buffered_read_seconds = seconds_since(start);
    if (std::memcmp(buffer.get(), rewritten(kChunks - 1), kSeqChunk) != 0) {
      throw std::runtime_error(fmt::format("read back different bytes from {}", file.path()));
    }
  }

  // The synced file written anew through O_TRUNC, as a copy over it or a
  // journal truncated to zero and refilled does: what a crash before the fsync
  // would bring back is all of the old contents.
  start = Clock::now();
  {
    Fd truncated(file.path(), O_TRUNC | O_WRONLY);
    for (std::size_t i = 0; i < kChunks; ++i) {
      pwrite_all(truncated.get(), pool_chunk(i), kSeqChunk, static_cast<off_t>(i * kSeqChunk),
                 file.path());
    }
    fsync_or_throw(truncated.get(), file.path());
  }
  const double truncate_rewrite_seconds = seconds_since(start);

  constexpr double kMiBs = static_cast<double>(kSeqFileSize) / kMiB;
  return {{"seq_write_1m", kMiBs / write_seconds},
          {"seq_rewrite_1m", kMiBs / rewrite_seconds},
          {"seq_read_1m", kMiBs / read_seconds},
          {"seq_read_buffered_1m", kMiBs / buffered_read_seconds},
          {"seq_truncate_write_1m", kMiBs / truncate_rewrite_seconds}};
}

// Writes are timed through a final fsync (here and below) so that a write-back
// cache cannot hide the work.
std::vector<Sample> run_random_write(Target& target) {
  ScratchFile file(scratch_path(target, "rand"));
  Fd fd(file.path(), O_CREAT | O_TRUNC | O_WRONLY);
  if (ftruncate(fd.get(), static_cast<off_t>(kRandFileSize)) != 0) {
    throw sys_error("ftruncate", file.path());
  }
  // Offsets are drawn before the clock starts; the same seed every run and target.
  std::mt19937_64 rng(kRandSeed);
  std::uniform_int_distribution<std::uint64_t> block(0, kRandFileSize / kBlock - 1);
  std::vector<off_t> offsets(kRandWrites);
  for (off_t& offset : offsets) offset = static_cast<off_t>(block(rng) * kBlock);

  auto start = Clock::now();
  for (int i = 0; i < kRandWrites; ++i) {
    pwrite_all(fd.get(), pool_chunk(static_cast<std::size_t>(i)), kBlock, offsets[i], file.path());
  }
  fsync_or_throw(fd.get(), file.path());
  double seconds = seconds_since(start);
  return {{"rand_write_4k", kRandWrites / seconds}};
}

// glibc's posix_fallocate fallback (for filesystems without fallocate) writes one
// zero byte at the end of every block, extending the file each time.
std::vector<Sample> run_stride_write(Target& target) {
  ScratchFile file(scratch_path(target, "stride"));
  Fd fd(file.path(), O_CREAT | O_TRUNC | O_WRONLY);
  const std::byte zero{0};
  auto start = Clock::now();
  for (int i = 0; i < kStrideWrites; ++i) {
    off_t offset = static_cast<off_t>((static_cast<std::size_t>(i) + 1) * kBlock - 1);
    pwrite_all(fd.get(), &zero, 1, offset, file.path());
  }
  fsync_or_throw(fd.get(), file.path());
  double seconds = seconds_since(start);
  return {{"stride_write_1b", kStrideWrites / seconds}};
}

// Creates every file, then unlinks every file, so the directory holds
// kSmallFiles entries at its fullest. Runs in its own subdirectory.
std::vector<Sample> run_create_unlink(Target& target) {
  std::string dir = scratch_path(target, "small");
  if (dir.size() + 16 >= kMaxPath) throw std::runtime_error("path too long: " + dir);
  if (mkdir(dir.c_str(), 0755) != 0) throw sys_error("mkdir", dir);
  std::memcpy(g_scratch_dir.data(), dir.c_str(), dir.size() + 1);
  g_scratch_dir_live = 1;

  std::vector<std::string> names;
  names.reserve(kSmallFiles);
  for (int i = 0; i < kSmallFiles; ++i) names.push_back(fmt::format("{}/f{}", dir, i));
  // On any error, remove what exists; unlink of a missing name is harmless.
  struct Cleanup {
    const std::string& dir;
    const std::vector<std::string>& names;
    ~Cleanup() {
      for (const std::string& name : names) unlink(name.c_str());
      rmdir(dir.c_str());
      g_scratch_dir_live = 0;
    }
  } cleanup{dir, names};

  auto start = Clock::now();
  for (int i = 0; i < kSmallFiles; ++i) {
    Fd fd(names[i], O_CREAT | O_EXCL | O_WRONLY);
    pwrite_all(fd.get(), pool_chunk(static_cast<std::size_t>(i)), kBlock, 0, names[i]);
  }
  for (const std::string& name : names) {
    if (unlink(name.c_str()) != 0) throw sys_error("unlink", name);
  }
  double seconds = seconds_since(start);
  return {{"create_unlink", kSmallFiles / seconds}};
}

// Streams zeros from one 1 MiB buffer, so the benchmark's own memory stays flat
// however large G is: this workload exists to watch the daemon's memory.
std::vector<Sample> run_zeros(Target& target, std::size_t mib) {
  static const std::vector<std::byte> zeros(kSeqChunk);
  ScratchFile file(scratch_path(target, "zeros"));
  Fd fd(file.path(), O_CREAT | O_TRUNC | O_WRONLY);
  auto start = Clock::now();
  for (std::size_t i = 0; i < mib; ++i) {
    pwrite_all(fd.get(), zeros.data(), kSeqChunk, static_cast<off_t>(i * kSeqChunk), file.path());
  }
  fsync_or_throw(fd.get(), file.path());
  double seconds = seconds_since(start);
  return {{"zeros", static_cast<double>(mib) / 1024.0 / seconds}};
}

// ---------------------------------------------------------------------------
// Configuration

struct Workload {
  std::string name;                  // as given to --only
  std::vector<std::string> metrics;  // rows it produces, in order
  std::function<std::vector<Sample>(Target&)> run;
};

struct Metric {
  std::string name;
  std::string unit;
  std::string description;
};

const std::vector<Metric>& all_metrics() {
  static const std::vector<Metric> metrics = {
      {"seq_write_1m", "MiB/s", "256 MiB in 1 MiB pwrite()s, then fsync"},
      {"seq_rewrite_1m", "MiB/s", "the synced file rewritten in place in 1 MiB pwrite()s, fsync"},
      {"seq_read_1m", "MiB/s", "the same file in 1 MiB pread()s, page cache kept out"},
      {"seq_read_buffered_1m", "MiB/s",
       "the same file in 1 MiB pread()s through the page cache, emptied first"},
      {"seq_truncate_write_1m", "MiB/s",
       "the same file opened with O_TRUNC and written again in 1 MiB pwrite()s, fsync"},
      {"rand_write_4k", "IOPS",
       "16384 x 4 KiB pwrite() at random aligned offsets in 256 MiB, fsync"},
      {"stride_write_1b", "writes/s", "1-byte pwrite() at a 4 KiB stride over 64 MiB, fsync"},
      {"create_unlink", "files/s", "2000 x (create, write 4 KiB, close), then unlink all"},
      {"zeros", "GiB/s", "zeros in 1 MiB pwrite()s to one file, fsync"},
  };
  return metrics;
}

const Metric& find_metric(const std::string& name) {
  for (const Metric& m : all_metrics()) {
    if (m.name == name) return m;
  }
  std::abort();  // a workload names a metric that is not in the list above
}

struct Options {
  int repetitions = kDefaultRepetitions;
  bool json = false;
  double zeros_gib = 0;
  std::vector<std::string> only;
  std::vector<Target> targets;
  // --ratio: pairs of target indexes, subject first.
  std::vector<std::pair<std::size_t, std::size_t>> ratios;
};

constexpr std::string_view kUsage =
    "usage: mimicfs_bench [--repetitions N] [--json] [--zeros-gib G] [--only W[,W...]]\n"
    "                     [--ratio SUBJECT/REFERENCE ...] LABEL=DIR [LABEL=DIR ...]\n"
    "\n"
    "Runs each workload N times (default 5) in every DIR and prints medians; the first\n"
    "LABEL is the reference for the '% of' columns. --ratio adds SUBJECT's median over\n"
    "REFERENCE's to a table of ratios. Workloads: seq (seq_write_1m, seq_rewrite_1m,\n"
    "seq_read_1m, seq_read_buffered_1m and seq_truncate_write_1m), rand_write_4k,\n"
    "stride_write_1b, create_unlink, zeros (only with --zeros-gib G > 0: G GiB of\n"
    "zeros streamed to one file). --only picks some of them.\n";

std::vector<Workload> make_workloads(const Options& options) {
  std::vector<Workload> workloads = {
      {"seq",
       {"seq_write_1m", "seq_rewrite_1m", "seq_read_1m", "seq_read_buffered_1m",
        "seq_truncate_write_1m"},
       run_sequential},
      {"rand_write_4k", {"rand_write_4k"}, run_random_write},
      {"stride_write_1b", {"stride_write_1b"}, run_stride_write},
      {"create_unlink", {"create_unlink"}, run_create_unlink},
  };
  if (options.zeros_gib > 0) {
    auto mib = static_cast<std::size_t>(std::max(1.0, options.zeros_gib * 1024.0 + 0.5));
    workloads.push_back(
        {"zeros", {"zeros"}, [mib](Target& target) { return run_zeros(target, mib); }});
  }
  if (!options.only.empty()) {
    std::erase_if(workloads, [&](const Workload& w) {
      return std::ranges::find(options.only, w.name) == options.only.end();
    });
  }
  return workloads;
}

double parse_number(std::string_view flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0 || !(value >= 0)) {
    throw UsageError{fmt::format("{} needs a non-negative number, got '{}'", flag, text)};
  }
  return value;
}

Options parse_arguments(int argc, char** argv) {
  Options options;
  std::vector<std::string> ratio_names;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    std::optional<std::string> inline_value;
    if (arg.starts_with("--")) {
      if (auto eq = arg.find('='); eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg.resize(eq);
      }
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) throw UsageError{fmt::format("{} needs a value", arg)};
      return args[++i];
    };

    if (arg == "-h" || arg == "--help") {
      fmt::print("{}", kUsage);
      std::exit(0);
    } else if (arg == "--json") {
      if (inline_value) throw UsageError{"--json takes no value"};
      options.json = true;
    } else if (arg == "--repetitions") {
      double n = parse_number(arg, value());
      if (n < 1 || n > 1000 || n != static_cast<int>(n)) {
        throw UsageError{"--repetitions needs a whole number from 1 to 1000"};
      }
      options.repetitions = static_cast<int>(n);
    } else if (arg == "--ratio") {
      ratio_names.push_back(value());
    } else if (arg == "--zeros-gib") {
      options.zeros_gib = parse_number(arg, value());
    } else if (arg == "--only") {
      std::string list = value();
      for (std::size_t start = 0; start <= list.size();) {
        std::size_t comma = std::min(list.find(',', start), list.size());
        options.only.push_back(list.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (arg.starts_with("-")) {
      throw UsageError{fmt::format("unknown option '{}'", arg)};
    } else {
      auto eq = arg.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
        throw UsageError{fmt::format("expected LABEL=DIR, got '{}'", arg)};
      }
      Target target{arg.substr(0, eq), arg.substr(eq + 1), ""};
      struct stat st;
      if (stat(target.dir.c_str(), &st) != 0) {
        throw UsageError{fmt::format("{}: {}: {}", target.label, target.dir, std::strerror(errno))};
      }
      if (!S_ISDIR(st.st_mode)) {
        throw UsageError{fmt::format("{}: {}: not a directory", target.label, target.dir)};
      }
      for (const Target& other : options.targets) {
        if (other.label == target.label) {
          throw UsageError{fmt::format("label '{}' given twice", target.label)};
        }
      }
      options.targets.push_back(std::move(target));
    }
  }
  if (options.targets.empty()) throw UsageError{"no LABEL=DIR given"};
  auto index_of = [&](const std::string& label) -> std::size_t {
    for (std::size_t t = 0; t < options.targets.size(); ++t) {
      if (options.targets[t].label == label) return t;
    }
    throw UsageError{fmt::format("--ratio: no LABEL '{}'", label)};
  };
  for (const std::string& ratio : ratio_names) {
    const auto slash = ratio.find('/');
    if (slash == std::string::npos) {
      throw UsageError{fmt::format("--ratio needs SUBJECT/REFERENCE, got '{}'", ratio)};
    }
    options.ratios.emplace_back(index_of(ratio.substr(0, slash)), index_of(ratio.substr(slash + 1)));
  }

  // Validate --only against the workloads that exist (zeros only with --zeros-gib).
  for (const std::string& name : options.only) {
    bool known = name == "seq" || name == "rand_write_4k" || name == "stride_write_1b" ||
                 name == "create_unlink" || name == "zeros";
    if (!known) throw UsageError{fmt::format("--only: unknown workload '{}'", name)};
    if (name == "zeros" && options.zeros_gib <= 0) {
      throw UsageError{"--only zeros needs --zeros-gib G with G > 0"};
    }
  }
  return options;
}

// ---------------------------------------------------------------------------
// Results

struct Cell {
  std::vector<double> samples;
  std::optional<std::string> error;  // set when a run failed; no median then
};

double median_of(std::vector<double> values) {
  std::ranges::sort(values);
  std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Three significant digits or more, no exponent: 12.3, 456.7, 8912.
std::string format_figure(double v) {
  if (v >= 1000) return fmt::format("{:.0f}", v);
  if (v >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

// SUBJECT's median over REFERENCE's, when both ran.
std::optional<double> ratio_of(const Cell& subject, const Cell& reference) {
  if (subject.error || reference.error || subject.samples.empty() || reference.samples.empty()) {
    return std::nullopt;
  }
  const double denominator = median_of(reference.samples);
  if (denominator <= 0) return std::nullopt;
  return median_of(subject.samples) / denominator;
}

struct Report {
  std::vector<std::string> metrics;  // rows
  // cells[row][target]
  std::vector<std::vector<Cell>> cells;
};

void print_table(const Options& options, const Report& report) {
  const std::vector<Target>& targets = options.targets;
  fmt::print("mimicfs_bench: median of {} repetition{} per figure, higher is better\n",
             options.repetitions, options.repetitions == 1 ? "" : "s");
  std::size_t label_width = 0;
  for (const Target& t : targets) label_width = std::max(label_width, t.label.size());
  for (const Target& t : targets) {
    fmt::print("  {:<{}} = {}\n", t.label, label_width, t.dir);
    if (!t.read_mode.empty()) {
      fmt::print("  {:<{}}   seq_read_1m: {}\n", "", label_width, t.read_mode);
    }
  }
  fmt::print("\n");

  // Columns: workload, then per target its figure, and for all but the first "% of".
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"workload"};
  for (std::size_t t = 0; t < targets.size(); ++t) {
    header.push_back(targets[t].label);
    if (t > 0) header.push_back(fmt::format("% of {}", targets[0].label));
  }
  rows.push_back(header);
  for (std::size_t r = 0; r < report.metrics.size(); ++r) {
    const Metric& metric = find_metric(report.metrics[r]);
    std::vector<std::string> row = {metric.name};
    std::optional<double> reference;
    for (std::size_t t = 0; t < targets.size(); ++t) {
      const Cell& cell = report.cells[r][t];
      std::optional<double> median;
      if (!cell.error && !cell.samples.empty()) median = median_of(cell.samples);
      row.push_back(median ? fmt::format("{} {}", format_figure(*median), metric.unit) : "FAILED");
      if (t == 0) {
        reference = median;
      } else {
        row.push_back(median && reference && *reference > 0
                          ? fmt::format("{:.1f}%", 100 * *median / *reference)
                          : "-");
      }
    }
    rows.push_back(row);
  }

  std::vector<std::size_t> widths(header.size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line = fmt::format("{:<{}}", row[0], widths[0]);
    for (std::size_t c = 1; c < row.size(); ++c) {
      line += fmt::format("  {:>{}}", row[c], widths[c]);
    }
    fmt::print("{}\n", line);
  }

  if (!options.ratios.empty()) {
    std::vector<std::vector<std::string>> ratio_rows;
    std::vector<std::string> ratio_header = {"ratio of medians"};
    for (const auto& [subject, reference] : options.ratios) {
      ratio_header.push_back(fmt::format("{} / {}", targets[subject].label, targets[reference].label));
    }
    ratio_rows.push_back(ratio_header);
    for (std::size_t r = 0; r < report.metrics.size(); ++r) {
      std::vector<std::string> row = {report.metrics[r]};
      for (const auto& [subject, reference] : options.ratios) {
        const auto ratio = ratio_of(report.cells[r][subject], report.cells[r][reference]);
        row.push_back(ratio ? fmt::format("{:.2f}x", *ratio) : "-");
      }
      ratio_rows.push_back(row);
    }
    std::vector<std::size_t> ratio_widths(ratio_header.size(), 0);
    for (const auto& row : ratio_rows) {
      for (std::size_t c = 0; c < row.size(); ++c) {
        ratio_widths[c] = std::max(ratio_widths[c], row[c].size());
      }
    }
    fmt::print("\n");
    for (const auto& row : ratio_rows) {
      std::string line = fmt::format("{:<{}}", row[0], ratio_widths[0]);
      for (std::size_t c = 1; c < row.size(); ++c) {
        line += fmt::format("  {:>{}}", row[c], ratio_widths[c]);
      }
      fmt::print("{}\n", line);
    }
  }

  bool any_error = false;
  for (std::size_t r = 0; r < report.metrics.size(); ++r) {
    for (std::size_t t = 0; t < targets.size(); ++t) {
      if (const auto& error = report.cells[r][t].error) {
        if (!any_error) fmt::print("\nfailures:\n");
        any_error = true;
        fmt::print("  {} on {}: {}\n", report.metrics[r], targets[t].label, *error);
      }
    }
  }
  fmt::print("\nworkloads:\n");
  std::size_t name_width = 0;
  for (const std::string& name : report.metrics) name_width = std::max(name_width, name.size());
  for (const std::string& name : report.metrics) {
    const Metric& metric = find_metric(name);
    fmt::print("  {:<{}} {}\n", metric.name, name_width, metric.description);
  }
}

void print_json(const Options& options, const Report& report) {
  const std::vector<Target>& targets = options.targets;
  nlohmann::ordered_json out;
  out["repetitions"] = options.repetitions;
  out["reference"] = targets[0].label;
  out["targets"] = nlohmann::ordered_json::array();
  for (const Target& t : targets) {
    nlohmann::ordered_json target = {{"label", t.label}, {"dir", t.dir}};
    if (!t.read_mode.empty()) target["seq_read_mode"] = t.read_mode;
    out["targets"].push_back(target);
  }
  out["workloads"] = nlohmann::ordered_json::array();
  for (std::size_t r = 0; r < report.metrics.size(); ++r) {
    const Metric& metric = find_metric(report.metrics[r]);
    nlohmann::ordered_json row = {{"name", metric.name},
                                  {"unit", metric.unit},
                                  {"description", metric.description},
                                  {"results", nlohmann::ordered_json::object()}};
    std::optional<double> reference;
    for (std::size_t t = 0; t < targets.size(); ++t) {
      const Cell& cell = report.cells[r][t];
      nlohmann::ordered_json result;
      if (cell.error) {
        result["error"] = *cell.error;
      } else {
        double median = median_of(cell.samples);
        result["median"] = median;
        result["min"] = std::ranges::min(cell.samples);
        result["max"] = std::ranges::max(cell.samples);
        result["samples"] = cell.samples;
        if (t == 0) reference = median;
        if (t > 0 && reference && *reference > 0) {
          result["percent_of_reference"] = 100 * median / *reference;
        }
      }
      row["results"][targets[t].label] = result;
    }
    for (const auto& [subject, reference] : options.ratios) {
      if (auto ratio = ratio_of(report.cells[r][subject], report.cells[r][reference])) {
        row["ratios"][fmt::format("{}/{}", targets[subject].label, targets[reference].label)] =
            *ratio;
      }
    }
    out["workloads"].push_back(row);
  }
  fmt::print("{}\n", out.dump(2));
}

Report run_all(Options& options) {
  std::vector<Workload> workloads = make_workloads(options);
  Report report;
  for (const Workload& w : workloads) {
    for (const std::string& m : w.metrics) {
      report.metrics.push_back(m);
      report.cells.emplace_back(options.targets.size());
    }
  }

  std::size_t first_row = 0;
  for (const Workload& workload : workloads) {
    for (int rep = 1; rep <= options.repetitions; ++rep) {
      std::string progress = fmt::format("{} {}/{}:", workload.name, rep, options.repetitions);
      // Each repetition starts with the next directory, so that none always runs
      // first (or right after another one's writes are still being reclaimed).
      const std::size_t n = options.targets.size();
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t t = (k + static_cast<std::size_t>(rep - 1)) % n;
        Target& target = options.targets[t];
        // A directory that failed once is not retried: its cell stays FAILED.
        if (report.cells[first_row][t].error) continue;
        try {
          std::vector<Sample> samples = workload.run(target);
          progress += fmt::format(" {}", target.label);
          if (samples.size() != workload.metrics.size()) std::abort();
          for (std::size_t m = 0; m < samples.size(); ++m) {
            if (samples[m].metric != workload.metrics[m]) std::abort();
            report.cells[first_row + m][t].samples.push_back(samples[m].value);
            progress += fmt::format(" {}", format_figure(samples[m].value));
          }
        } catch (const std::exception& e) {
          for (std::size_t m = 0; m < workload.metrics.size(); ++m) {
            report.cells[first_row + m][t].error = e.what();
          }
          progress += fmt::format(" {} FAILED", target.label);
        }
      }
      // Progress goes to stderr so that stdout stays a clean table or JSON.
      fmt::print(stderr, "{}\n", progress);
    }
    first_row += workload.metrics.size();
  }
  return report;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parse_arguments(argc, argv);
  } catch (const UsageError& e) {
    fmt::print(stderr, "mimicfs_bench: {} (see --help)\n", e.message);
    return 2;
  }

  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);

  Report report = run_all(options);
  if (options.json) {
    print_json(options, report);
  } else {
    print_table(options, report);
  }
  for (const auto& row : report.cells) {
    for (const Cell& cell : row) {
      if (cell.error) return 1;
    }
  }
  return 0;
}
