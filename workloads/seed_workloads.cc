// SPDX-License-Identifier: Apache-2.0
#include "workloads/seed_workloads.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
  // `ready`: each writer sends a byte once its file is open, and `start` is
  // closed only when all have, so every file exists before any is written and
  // the writers begin together (every writer waits for start's EOF). `errors`:
  // a failing writer says what failed there (one short write: atomic).
  int start[2], ready[2], errors[2];
  if (pipe(start) != 0) return failed("pipe");
  if (pipe(ready) != 0) {
    const auto outcome = failed("pipe");
    close(start[0]);
    close(start[1]);
    return outcome;
  }
  if (pipe(errors) != 0) {
    const auto outcome = failed("pipe");
    for (const int fd : {start[0], start[1], ready[0], ready[1]}) close(fd);
    return outcome;
  }
  std::vector<pid_t> children;
  auto stop = [&](const Outcome& outcome) {
    for (const pid_t pid : children) kill(pid, SIGKILL);
    for (const int fd : {start[0], start[1], ready[0], ready[1], errors[0], errors[1]}) {
      if (fd >= 0) close(fd);
    }
    for (const pid_t pid : children) {
      while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    return outcome;
  };
  for (int i = 0; i < w.count; ++i) {
    const pid_t pid = fork();
    if (pid < 0) return stop(failed("fork"));
    if (pid == 0) {
      close(start[1]);
      close(ready[0]);
      close(errors[0]);
      const std::string path = dir + "/datafile" + std::to_string(i);
      auto fail_child = [&](const std::string& what) {
        const std::string message = path + ": " + what + ": " + std::strerror(errno) + "\n";
        (void)!write(errors[1], message.data(), message.size());
        _exit(1);
      };
      const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_SYNC, 0644);
      if (fd < 0) fail_child("open");
      if (write(ready[1], "r", 1) != 1) fail_child("saying it is ready");
      close(ready[1]);
      char go;
      if (read(start[0], &go, 1) != 0) fail_child("waiting to start");
      if (w.reserve_first && fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, w.file_size) != 0) {
        fail_child("fallocate");
      }
      if (auto written = write_range(fd, 0, w.file_size, w.write_size, '\0'); !written) {
        const std::string message = path + ": " + written.error() + "\n";
        (void)!write(errors[1], message.data(), message.size());
        _exit(1);
      }
      if (close(fd) != 0) fail_child("close");
      _exit(0);
    }
    children.push_back(pid);
  }
  close(start[0]);
  start[0] = -1;
  close(ready[1]);
  ready[1] = -1;
  // Every writer's byte, or EOF when one failed before sending it (it has said why).
  for (int opened = 0; opened < w.count;) {
    char byte;
    const ssize_t n = read(ready[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    ++opened;
  }
  close(ready[0]);
  ready[0] = -1;
  close(start[1]);  // every writer starts now
  start[1] = -1;
  close(errors[1]);
  bool all_succeeded = true;
  for (const pid_t pid : children) {
    int status = 0;
    pid_t waited;
    while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (waited < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) all_succeeded = false;
  }
  std::string messages;
  char buffer[4096];
  for (ssize_t n; (n = read(errors[0], buffer, sizeof buffer)) > 0;) messages.append(buffer, n);
  close(errors[0]);
  if (all_succeeded) return {};
  if (messages.empty()) return std::unexpected("a writer died");
  return std::unexpected(messages.substr(0, messages.find('\n')));  // the first that failed
}

Outcome punch_page_tails(int fd, off_t size, off_t page, off_t punched) {
  for (off_t offset = page - punched; offset < size; offset += page) {
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, punched) != 0) {
      return failed("punch at " + std::to_string(offset));
    }
  }
  return {};
}

Outcome fallocate_pages(int fd, off_t size, off_t page) {
  for (off_t offset = 0; offset < size; offset += page) {
    if (fallocate(fd, 0, offset, std::min(page, size - offset)) != 0) {
      return failed("fallocate at " + std::to_string(offset));
    }
  }
  return {};
}

Outcome overwrite_pages_synced(int fd, int pages, off_t page) {
  for (int n = 0; n < pages; ++n) {
    if (auto r = write_range(fd, n * page, page, page, 'o'); !r) return r;
    if (fdatasync(fd) != 0) return failed("fdatasync after page " + std::to_string(n));
  }
  return {};
}

}  // namespace mimicfs::workloads
