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
#include <exception>
#include <new>

namespace mimicfs::fuse_channel {
namespace {

// The INIT request's id while its reply is pending (0: none), and whether the
// kernel offered FUSE_HANDLE_KILLPRIV_V2 in it.
std::atomic<uint64_t> init_unique{0};
std::atomic<bool> kernel_offers_killpriv_v2{false};
std::atomic<bool> killpriv_v2_granted{false};

// The request the current thread read last, which it is now serving.
thread_local bool current_kills_suidgid = false;

std::function<TmpfileReply(const TmpfileRequest&)> tmpfile_handler;

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

// fuse_attr from a stat, and a timeout in seconds as FUSE splits it: as
// libfuse's own replies make them.
fuse_attr attr_of(const struct stat& st) {
  fuse_attr a{};
  a.ino = st.st_ino;
  a.mode = st.st_mode;
  a.nlink = static_cast<uint32_t>(st.st_nlink);
  a.uid = st.st_uid;
  a.gid = st.st_gid;
  a.rdev = static_cast<uint32_t>(st.st_rdev);
  a.size = static_cast<uint64_t>(st.st_size);
  a.blksize = static_cast<uint32_t>(st.st_blksize);
  a.blocks = static_cast<uint64_t>(st.st_blocks);
  a.atime = static_cast<uint64_t>(st.st_atim.tv_sec);
  a.mtime = static_cast<uint64_t>(st.st_mtim.tv_sec);
  a.ctime = static_cast<uint64_t>(st.st_ctim.tv_sec);
  a.atimensec = static_cast<uint32_t>(st.st_atim.tv_nsec);
  a.mtimensec = static_cast<uint32_t>(st.st_mtim.tv_nsec);
  a.ctimensec = static_cast<uint32_t>(st.st_ctim.tv_nsec);
  return a;
}

void split_timeout(double seconds, uint64_t& whole, uint32_t& nanoseconds) {
  if (!(seconds > 0)) seconds = 0;
  whole = static_cast<uint64_t>(seconds);
  nanoseconds = static_cast<uint32_t>((seconds - static_cast<double>(whole)) * 1e9);
}

// Answers a FUSE_TMPFILE request on `fd` with what the handler says.
void serve_tmpfile_request(int fd, const char* request, ssize_t length) {
  fuse_in_header header;
  std::memcpy(&header, request, sizeof header);
  fuse_out_header out{};
  out.unique = header.unique;
  fuse_entry_out entry{};
  fuse_open_out open{};
  TmpfileReply reply;
  const auto* create = arguments_of<fuse_create_in>(request, length);
  if (create == nullptr) {
    reply.error = EIO;
  } else {
    try {
      reply = tmpfile_handler(TmpfileRequest{header.nodeid, header.uid, header.gid,
                                             static_cast<int>(create->flags), create->mode});
    } catch (const std::bad_alloc&) {
      reply.error = ENOMEM;
    } catch (const std::exception& e) {
      spdlog::error("tmpfile in {}: {}", header.nodeid, e.what());
      reply.error = EIO;
    }
  }
  iovec iov[3] = {{&out, sizeof out}, {&entry, sizeof entry}, {&open, sizeof open}};
  int count = 1;
  if (reply.error != 0) {
    out.error = -reply.error;
  } else {
    entry.nodeid = reply.entry.ino;
    entry.generation = reply.entry.generation;
    split_timeout(reply.entry.entry_timeout, entry.entry_valid, entry.entry_valid_nsec);
    split_timeout(reply.entry.attr_timeout, entry.attr_valid, entry.attr_valid_nsec);
    entry.attr = attr_of(reply.entry.attr);
    open.fh = reply.info.fh;
    if (reply.info.direct_io) open.open_flags |= FOPEN_DIRECT_IO;
    if (reply.info.keep_cache) open.open_flags |= FOPEN_KEEP_CACHE;
    if (reply.info.noflush) open.open_flags |= FOPEN_NOFLUSH;
    count = 3;
  }
  out.len = static_cast<uint32_t>(sizeof out + (count == 3 ? sizeof entry + sizeof open : 0));
  if (::writev(fd, iov, count) < 0 && reply.error == 0 && reply.abandoned) reply.abandoned();
}

ssize_t channel_read(int fd, void* buffer, size_t length, void*) {
  while (true) {
    const ssize_t n = ::read(fd, buffer, length);
    if (n < static_cast<ssize_t>(sizeof(fuse_in_header))) return n;
    const char* request = static_cast<const char*>(buffer);
    uint32_t opcode;
    std::memcpy(&opcode, request + offsetof(fuse_in_header, opcode), sizeof opcode);
    if (opcode == FUSE_TMPFILE && tmpfile_handler) {
      serve_tmpfile_request(fd, request, n);
      continue;  // libfuse never sees it: read the next request for it
    }
    note_request(request, n);
    return n;
  }
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

void serve_tmpfile(std::function<TmpfileReply(const TmpfileRequest&)> handler) {
  tmpfile_handler = std::move(handler);
}

bool kills_privileges() { return killpriv_v2_granted; }

}  // namespace mimicfs::fuse_channel
