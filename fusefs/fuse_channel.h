// SPDX-License-Identifier: Apache-2.0
// FuseChannel: one session's requests and replies between the kernel and
// libfuse, seen through libfuse 3.14's custom I/O (fuse_session_custom_io,
// FuseSession routes them here), to add what the
// protocol offers and libfuse 3.14 can neither ask for nor pass on:
//   - FUSE_HANDLE_KILLPRIV_V2 in the INIT reply, when the kernel offers it. A
//     FUSE superblock is not SB_NOSEC otherwise, and the kernel asks the
//     daemon for security.capability before every write: a GETXATTR round
//     trip per write, half the requests of a small-write workload. With it the
//     kernel asks once per inode (until the attributes are next refreshed),
//     and the filesystem clears S_ISUID and S_ISGID where the kernel says.
//   - O_TMPFILE (FUSE_TMPFILE), which libfuse 3.14 does not know: it would
//     answer ENOSYS, and the kernel then refuses O_TMPFILE for the whole mount
//     (MariaDB and MySQL try it first for their temporary files). The channel
//     hands it to libfuse as the CREATE it resembles, marked for the callback.
//   - where the kernel says: the "kill suid/sgid" flags of WRITE
//     (FUSE_WRITE_KILL_SUIDGID), SETATTR (FATTR_KILL_SUIDGID: a truncate by a
//     caller without CAP_FSETID, any chown) and OPEN with O_TRUNC
//     (FUSE_OPEN_KILL_SUIDGID), which libfuse 3.14 drops. They are kept for
//     the thread that serves the request: libfuse's /dev/fuse workers and
//     the ring's threads read a request and process it on one thread.
//   - FUSE over io_uring (FuseRing, fuse_ring.h), offered in the INIT reply
//     when the kernel offers it; the replies to the requests the ring's
//     threads serve go back through the ring, everything else through
//     /dev/fuse.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace mimicfs {

class FuseRing;

// Everything it keeps belongs to its session; what it notes of the request a
// thread is serving is the thread's (one request at a time).
class FuseChannel {
 public:
  // With `ring`, the INIT reply offers FUSE over io_uring when the kernel does
  // and the ring could prepare; `warn_unless_offered` logs a warning where
  // the kernel does not (the ring was asked for), where otherwise that is
  // logged as information. Call before the session's loop.
  void offer_ring(FuseRing* ring, bool warn_unless_offered);
  // O_TMPFILE: from now on FUSE_TMPFILE reaches libfuse as a FUSE_CREATE (the
  // same arguments and reply), on which request_is_tmpfile() is true. Call
  // before the loop.
  void serve_tmpfile() { tmpfile_served_ = true; }

  // fuse_custom_io's read and writev of the session's /dev/fuse descriptor:
  // the results and errno are read(2)'s and writev(2)'s.
  ssize_t read(int fd, void* buffer, size_t length);
  ssize_t writev(int fd, iovec* iov, int count);

  // What the channel does to each request before libfuse sees it, whichever
  // transport brought it (`request` holds all of its `length` bytes, laid out
  // as /dev/fuse delivers them): notes the flags below for the calling thread
  // and turns FUSE_TMPFILE into FUSE_CREATE.
  void prepare_request(char* request, size_t length);

  // True when the request this thread is serving asks the filesystem to clear
  // S_ISUID and S_ISGID (the caller lacks CAP_FSETID, or it is a chown).
  static bool request_kills_suidgid();
  // True when the request this thread is serving is an O_TMPFILE open, passed
  // to the create callback (with the name "/").
  static bool request_is_tmpfile();

  // The threads that have read requests from /dev/fuse (libfuse's workers,
  // which stay until the loop ends).
  size_t readers() const { return readers_.load(); }

 private:
  void note_request(const char* request, ssize_t length);

  // The INIT request's id while its reply is pending (0: none), and whether
  // the kernel offered FUSE_HANDLE_KILLPRIV_V2 and FUSE_OVER_IO_URING in it.
  std::atomic<uint64_t> init_unique_{0};
  std::atomic<bool> kernel_offers_killpriv_v2_{false};
  std::atomic<bool> kernel_offers_io_uring_{false};
  // The io_uring transport to offer, if any, and whether it was asked for.
  FuseRing* ring_ = nullptr;
  bool ring_asked_for_ = false;
  std::atomic<bool> tmpfile_served_{false};
  std::atomic<size_t> readers_{0};
};

}  // namespace mimicfs
