#include "workloads/seed_workloads.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace mimicfs::workloads {
namespace {

std::unexpected<std::string> failed(const std::string& what) {
  return std::unexpected(what + ": " + std::strerror(errno));
}

}  // namespace

Outcome write_range(int fd, off_t offset, off_t length, off_t chunk, char fill) {
  // A buffer the process has touched: the kernel's FUSE write path re-sends part
  // of a write copied from never-touched zero pages.
  const std::vector<char> data(chunk, fill);
  for (off_t done = 0; done < length; done += chunk) {
    const size_t n = std::min(chunk, length - done);
    if (pwrite(fd, data.data(), n, offset + done) != static_cast<ssize_t>(n)) {
      return failed("pwrite at " + std::to_string(offset + done));
    }
  }
  return {};
}

std::optional<Extension> extension_named(std::string_view name) {
  for (const Extension e : {Extension::kPosixFallocate, Extension::kFallocateOrZeros,
                            Extension::kZeros, Extension::kFtruncate}) {
    if (name_of(e) == name) return e;
  }
  return std::nullopt;
}

std::string_view name_of(Extension extension) {
  switch (extension) {
    case Extension::kPosixFallocate:
      return "posix_fallocate";
    case Extension::kFallocateOrZeros:
      return "fallocate_or_zeros";
    case Extension::kZeros:
      return "zeros";
    case Extension::kFtruncate:
      return "ftruncate";
  }
  return "?";
}

Outcome extend(int fd, off_t size, Extension how) {
  switch (how) {
    case Extension::kPosixFallocate:
      if (const int error = posix_fallocate(fd, 0, size); error != 0) {
        errno = error;
        return failed("posix_fallocate");
      }
      return {};
    case Extension::kFallocateOrZeros:
      if (fallocate(fd, 0, 0, size) == 0) return {};
      if (errno != EOPNOTSUPP) return failed("fallocate");
      return write_range(fd, 0, size, kMiB, '\0');
    case Extension::kZeros:
      return write_range(fd, 0, size, kMiB, '\0');
    case Extension::kFtruncate:
      if (ftruncate(fd, size) != 0) return failed("ftruncate");
      return {};
  }
  return std::unexpected("unknown extension");
}

Outcome grow(int fd, int pages, int per_extension, off_t page) {
  off_t size = 0;
  for (int n = 0; n < pages; ++n) {
    const off_t offset = n * page;
    if (offset >= size) {
      const off_t bytes = static_cast<off_t>(per_extension) * page;  // whole, as InnoDB
      if (auto r = write_range(fd, size, bytes, bytes, '\0'); !r) return r;
      if (fsync(fd) != 0) return failed("fsync");
      size += bytes;
    }
    if (auto r = write_range(fd, offset, page, page, 'r'); !r) return r;
  }
  return {};
}

Outcome concurrent_writers(const std::string& dir, const Writers& w) {
  int start[2];
  if (pipe(start) != 0) return failed("pipe");
  std::vector<pid_t> children;
  for (int i = 0; i < w.count; ++i) {
    const pid_t pid = fork();
    if (pid < 0) return failed("fork");
    if (pid == 0) {
      close(start[1]);
      const std::string path = dir + "/datafile" + std::to_string(i);
      const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_SYNC, 0644);
      if (fd < 0) _exit(10);
      char go;
      if (read(start[0], &go, 1) != 0) _exit(11);  // EOF: every writer is ready
      if (w.reserve_first && fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, w.file_size) != 0) _exit(12);
      if (!write_range(fd, 0, w.file_size, w.write_size, '\0')) _exit(13);
      _exit(close(fd) == 0 ? 0 : 14);
    }
    children.push_back(pid);
  }
  close(start[0]);
  close(start[1]);  // every writer starts now
  std::string failure;
  for (const pid_t pid : children) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failure = "a writer failed (status " + std::to_string(status) + ")";
    }
  }
  if (!failure.empty()) return std::unexpected(failure);
  return {};
}

Outcome punch_page_tails(int fd, off_t size, off_t page, off_t punched) {
  for (off_t offset = page - punched; offset < size; offset += page) {
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, punched) != 0) {
      return failed("punch at " + std::to_string(offset));
    }
  }
  return {};
}

}  // namespace mimicfs::workloads
