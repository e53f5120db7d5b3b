#include "fusefs/fuse_channel.h"

#include <linux/fuse.h>
#include <spdlog/spdlog.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mimicfs::fuse_channel {
namespace {

// The INIT request's id while its reply is pending (0: none), and whether the
// kernel offered FUSE_HANDLE_KILLPRIV_V2 in it.
std::atomic<uint64_t> init_unique{0};
std::atomic<bool> kernel_offers_killpriv_v2{false};
std::atomic<bool> killpriv_v2_granted{false};

// The request the current thread read last, which it is now serving.
thread_local bool current_kills_suidgid = false;

// The fixed part of a request's arguments, when the request is long enough.
template <typename Arguments>
const Arguments* arguments_of(const char* request, ssize_t length) {
  if (length < static_cast<ssize_t>(sizeof(fuse_in_header) + sizeof(Arguments))) return nullptr;
  return reinterpret_cast<const Arguments*>(request + sizeof(fuse_in_header));
}

void note_request(const char* request, ssize_t length) {
  current_kills_suidgid = false;
  if (length < static_cast<ssize_t>(sizeof(fuse_in_header))) return;
  fuse_in_header header;
  std::memcpy(&header, request, sizeof header);
  switch (header.opcode) {
    case FUSE_INIT:
      if (const auto* init = arguments_of<fuse_init_in>(request, length)) {
        kernel_offers_killpriv_v2 = (init->flags & FUSE_HANDLE_KILLPRIV_V2) != 0;
      }
      init_unique = header.unique;
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

ssize_t channel_read(int fd, void* buffer, size_t length, void*) {
  const ssize_t n = ::read(fd, buffer, length);
  if (n > 0) note_request(static_cast<const char*>(buffer), n);
  return n;
}

ssize_t channel_writev(int fd, iovec* iov, int count, void*) {
  const uint64_t pending_init = init_unique.load();
  if (pending_init == 0 || count < 2 || iov[0].iov_len != sizeof(fuse_out_header) ||
      iov[1].iov_len < offsetof(fuse_init_out, flags) + sizeof(uint32_t)) {
    return ::writev(fd, iov, count);
  }
  fuse_out_header header;
  std::memcpy(&header, iov[0].iov_base, sizeof header);
  if (header.unique != pending_init) return ::writev(fd, iov, count);
  init_unique = 0;
  if (header.error != 0 || !kernel_offers_killpriv_v2) return ::writev(fd, iov, count);
  // The INIT reply: its flags say v2 (and no longer v1, whose rule differs:
  // kill on every write, whoever writes). A copy, not libfuse's own struct.
  char reply[sizeof(fuse_init_out)] = {};
  const size_t reply_length = std::min(iov[1].iov_len, sizeof reply);
  std::memcpy(reply, iov[1].iov_base, reply_length);
  uint32_t flags;
  std::memcpy(&flags, reply + offsetof(fuse_init_out, flags), sizeof flags);
  flags = (flags | FUSE_HANDLE_KILLPRIV_V2) & ~static_cast<uint32_t>(FUSE_HANDLE_KILLPRIV);
  std::memcpy(reply + offsetof(fuse_init_out, flags), &flags, sizeof flags);
  iovec patched[2] = {iov[0], {reply, reply_length}};
  const ssize_t n = ::writev(fd, patched, 2);
  if (n >= 0) killpriv_v2_granted = true;
  return n;
}

}  // namespace

bool attach(fuse_session* session) {
  fuse_custom_io io{};
  io.read = channel_read;
  io.writev = channel_writev;
  if (const int error = fuse_session_custom_io(session, &io, fuse_session_fd(session));
      error != 0) {
    spdlog::error("cannot route /dev/fuse through the channel: {}", std::strerror(-error));
    return false;
  }
  return true;
}

bool request_kills_suidgid() { return current_kills_suidgid; }

bool kills_privileges() { return killpriv_v2_granted; }

}  // namespace mimicfs::fuse_channel
