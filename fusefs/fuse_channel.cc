// SPDX-License-Identifier: Apache-2.0
#include "fusefs/fuse_channel.h"

#include <linux/fuse.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fusefs/fuse_ring.h"

namespace mimicfs {
namespace {

// The request the current thread read last, which it is now serving.
thread_local bool current_kills_suidgid = false;
thread_local bool current_is_tmpfile = false;
// Whether this thread has read from /dev/fuse (FuseChannel::readers).
thread_local bool reads_dev_fuse = false;

// The fixed part of a request's arguments, when the request is long enough.
template <typename Arguments>
const Arguments* arguments_of(const char* request, ssize_t length) {
  if (length < static_cast<ssize_t>(sizeof(fuse_in_header) + sizeof(Arguments))) return nullptr;
  return reinterpret_cast<const Arguments*>(request + sizeof(fuse_in_header));
}

// The payload each ring entry needs: the kernel's max_payload_sz for the INIT
// reply `reply` (the largest of FUSE_MIN_READ_BUFFER, max_write and
// max_pages pages, 32 pages unless the reply says FUSE_MAX_PAGES).
size_t ring_payload_bytes(const char* reply, size_t length, uint32_t flags) {
  uint32_t max_write = 0;
  if (length >= offsetof(fuse_init_out, max_write) + sizeof max_write) {
    std::memcpy(&max_write, reply + offsetof(fuse_init_out, max_write), sizeof max_write);
  }
  uint16_t max_pages = 32;
  if ((flags & FUSE_MAX_PAGES) != 0 &&
      length >= offsetof(fuse_init_out, max_pages) + sizeof max_pages) {
    std::memcpy(&max_pages, reply + offsetof(fuse_init_out, max_pages), sizeof max_pages);
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return std::max({size_t{8192}, size_t{max_write}, size_t{max_pages} * page});
}

}  // namespace

void FuseChannel::note_request(const char* request, ssize_t length) {
  current_kills_suidgid = false;
  current_is_tmpfile = false;
  if (length < static_cast<ssize_t>(sizeof(fuse_in_header))) return;
  fuse_in_header header;
  std::memcpy(&header, request, sizeof header);
  switch (header.opcode) {
    case FUSE_INIT:
      // Kernels before 5.17 send the 16-byte fuse_init_in (no flags2): read
      // only as far as the flags.
      if (length >= static_cast<ssize_t>(sizeof(fuse_in_header) + offsetof(fuse_init_in, flags) +
                                         sizeof(uint32_t))) {
        uint32_t flags;
        std::memcpy(&flags, request + sizeof(fuse_in_header) + offsetof(fuse_init_in, flags),
                    sizeof flags);
        kernel_offers_killpriv_v2_ = (flags & FUSE_HANDLE_KILLPRIV_V2) != 0;
        // flags2, the upper 32 bits, when the kernel says it sent them.
        uint32_t flags2 = 0;
        if ((flags & FUSE_INIT_EXT) != 0 &&
            length >= static_cast<ssize_t>(sizeof(fuse_in_header) + offsetof(fuse_init_in, flags2) +
                                           sizeof(uint32_t))) {
          std::memcpy(&flags2, request + sizeof(fuse_in_header) + offsetof(fuse_init_in, flags2),
                      sizeof flags2);
        }
        kernel_offers_io_uring_ = (flags2 & (FuseRing::kInitFlag >> 32)) != 0;
      }
      init_unique_ = header.unique;
      break;
    case FUSE_WRITE:
      if (const auto* write = arguments_of<fuse_write_in>(request, length)) {
        current_kills_suidgid = (write->write_flags & FUSE_WRITE_KILL_SUIDGID) != 0;
      }
      break;
    case FUSE_SETATTR:
      if (const auto* setattr = arguments_of<fuse_setattr_in>(request, length)) {
        current_kills_suidgid = (setattr->valid & FATTR_KILL_SUIDGID) != 0;
      }
      break;
    case FUSE_OPEN:
      if (const auto* open = arguments_of<fuse_open_in>(request, length)) {
        current_kills_suidgid = (open->open_flags & FUSE_OPEN_KILL_SUIDGID) != 0;
      }
      break;
    default:
      break;
  }
}

ssize_t FuseChannel::read(int fd, void* buffer, size_t length) {
  if (!reads_dev_fuse) {
    reads_dev_fuse = true;
    readers_.fetch_add(1);
    pthread_setname_np(pthread_self(), "mimicfs-worker");
  }
  const ssize_t n = ::read(fd, buffer, length);
  if (n >= static_cast<ssize_t>(sizeof(fuse_in_header))) {
    prepare_request(static_cast<char*>(buffer), static_cast<size_t>(n));
  }
  return n;
}

ssize_t FuseChannel::writev(int fd, iovec* iov, int count) {
  // The reply to a request a ring thread serves goes back through its entry.
  if (FuseRing::take_reply(iov, count)) {
    size_t length = 0;
    for (int i = 0; i < count; ++i) length += iov[i].iov_len;
    return static_cast<ssize_t>(length);
  }
  const uint64_t pending_init = init_unique_.load();
  if (pending_init == 0 || count < 2 || iov[0].iov_len != sizeof(fuse_out_header) ||
      iov[1].iov_len < offsetof(fuse_init_out, flags) + sizeof(uint32_t)) {
    return ::writev(fd, iov, count);
  }
  fuse_out_header header;
  std::memcpy(&header, iov[0].iov_base, sizeof header);
  if (header.unique != pending_init) return ::writev(fd, iov, count);
  init_unique_ = 0;
  if (header.error != 0) return ::writev(fd, iov, count);
  // The INIT reply, patched in a copy (not libfuse's own struct).
  char reply[sizeof(fuse_init_out)] = {};
  const size_t reply_length = std::min(iov[1].iov_len, sizeof reply);
  std::memcpy(reply, iov[1].iov_base, reply_length);
  uint32_t flags;
  std::memcpy(&flags, reply + offsetof(fuse_init_out, flags), sizeof flags);
  if (kernel_offers_killpriv_v2_) {
    // v2, and no longer v1, whose rule differs: kill on every write, whoever writes.
    flags = (flags | FUSE_HANDLE_KILLPRIV_V2) & ~static_cast<uint32_t>(FUSE_HANDLE_KILLPRIV);
    std::memcpy(reply + offsetof(fuse_init_out, flags), &flags, sizeof flags);
  } else {
    spdlog::info(
        "the kernel offers no FUSE_HANDLE_KILLPRIV_V2: it asks for security.capability "
        "before every write");
  }
  // FUSE over io_uring, once every queue's first thread is ready for it.
  bool io_uring = false;
  if (ring_ != nullptr && kernel_offers_io_uring_ && (flags & FUSE_INIT_EXT) != 0 &&
      reply_length >= offsetof(fuse_init_out, flags2) + sizeof(uint32_t)) {
    io_uring = ring_->prepare(ring_payload_bytes(reply, reply_length, flags), ring_asked_for_);
    if (io_uring) {
      uint32_t flags2;
      std::memcpy(&flags2, reply + offsetof(fuse_init_out, flags2), sizeof flags2);
      flags2 |= static_cast<uint32_t>(FuseRing::kInitFlag >> 32);
      std::memcpy(reply + offsetof(fuse_init_out, flags2), &flags2, sizeof flags2);
    }
  } else if (ring_ != nullptr && !kernel_offers_io_uring_) {
    spdlog::log(ring_asked_for_ ? spdlog::level::warn : spdlog::level::info,
                "the kernel offers no FUSE over io_uring (fuse.enable_uring is off, or a kernel "
                "before 6.14): serving /dev/fuse");
  }
  iovec patched[2] = {iov[0], {reply, reply_length}};
  const ssize_t n = ::writev(fd, patched, 2);
  if (n >= 0 && kernel_offers_killpriv_v2_) {
    spdlog::info("FUSE_HANDLE_KILLPRIV_V2: no security.capability probe before each write");
  }
  // The kernel took the reply in as it was written: the entries may register.
  if (io_uring) {
    if (n >= 0) {
      ring_->start();
    } else {
      ring_->stop();
    }
  }
  return n;
}

void FuseChannel::prepare_request(char* request, size_t length) {
  note_request(request, static_cast<ssize_t>(length));
  uint32_t opcode;
  std::memcpy(&opcode, request + offsetof(fuse_in_header, opcode), sizeof opcode);
  if (opcode == FUSE_TMPFILE && tmpfile_served_) {
    // FUSE_TMPFILE's arguments (fuse_create_in, then the dentry's name "/")
    // and reply (an entry, then an open) are FUSE_CREATE's: libfuse serves it
    // as one (so it counts the worker busy, knows the request for an
    // INTERRUPT, and sends the reply), and the create callback asks
    // request_is_tmpfile().
    const uint32_t create = FUSE_CREATE;
    std::memcpy(request + offsetof(fuse_in_header, opcode), &create, sizeof create);
    current_is_tmpfile = true;
  }
}

void FuseChannel::offer_ring(FuseRing* ring, bool warn_unless_offered) {
  ring_ = ring;
  ring_asked_for_ = warn_unless_offered;
}

bool FuseChannel::request_kills_suidgid() { return current_kills_suidgid; }

bool FuseChannel::request_is_tmpfile() { return current_is_tmpfile; }

}  // namespace mimicfs
