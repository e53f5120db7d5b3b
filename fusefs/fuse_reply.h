// SPDX-License-Identifier: Apache-2.0
// Reply: what the adapter answers to one FUSE request. Each callback computes
// one Reply and serve() sends it with send(): exactly one fuse_reply_* per
// request by construction, and the per-operation debug log line in one place.
//
// Every reply that carries data owns it (or, for DataView, points at memory the
// callback's thread keeps until send() returns): nothing a reply sends can be
// freed by another request meanwhile.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "engine/fs/file_system.h"

namespace mimicfs {

// What an open file handle (fi->fh) remembers; the kernel holds it from the
// open's reply to RELEASE (or RELEASEDIR).
struct Handle {
  int flags = 0;
  uint64_t boot = 0;                    // FileSystem::crashes() when it was opened
  std::vector<DirectoryEntry> entries;  // directories: the listing taken at opendir
};

// Whether the open file `fi` (none: no) was opened before the power cut that
// made `crashes` (FileSystem::crashes()): it belongs to a world that ended and,
// as after a reboot, nothing done through it reaches the volume (EIO).
inline bool opened_before_crash(const fuse_file_info* fi, uint64_t crashes) {
  return fi != nullptr && fi->fh != 0 && reinterpret_cast<const Handle*>(fi->fh)->boot != crashes;
}

// fuse_reply_err: 0 for success without data, else a positive errno.
struct ErrorReply {
  int error = 0;
};
// The kernel expects no answer (forget).
struct NoReply {};
// Kept, and answered later by FrozenRequests (a frozen volume's request).
struct LaterReply {};
struct EntryReply {
  fuse_entry_param entry{};
};
struct AttrReply {
  struct stat attr {};
  double timeout = 0;
};
// open, opendir and create: the handle is the kernel's once the reply is sent;
// if the request was interrupted, `interrupted` undoes the open instead.
struct OpenReply {
  fuse_file_info info{};
  std::unique_ptr<Handle> handle;
  std::function<void(uint64_t handle)> interrupted;
  std::optional<fuse_entry_param> created;  // create: the new entry
};
struct DataReply {
  std::string data;  // owned: the bytes sent
};
struct DataView {
  std::span<const char> data;  // valid until send() returns (the thread's buffer)
};

// `size` bytes of the calling thread's buffer for a read reply's data (a
// DataView's), valid until its next call. A FUSE over io_uring thread builds
// them in its entry's payload, where the reply goes anyway, for those that
// fit (read_replies_into). The buffer is the thread's for its life: libfuse's
// workers stay until the loop ends, so the memory it holds is bounded by
// their number (FuseSession::kMaxThreads).
std::span<std::byte> read_reply_buffer(size_t size);
// Makes `area` the calling thread's buffer for the read replies that fit from
// now on; an empty span goes back to the thread's own.
void read_replies_into(std::span<std::byte> area);
struct WriteReply {
  size_t count = 0;
};
struct StatfsReply {
  struct statvfs stats {};
};
struct XattrSizeReply {
  size_t size = 0;
};
struct LseekReply {
  off_t offset = 0;
};
struct ReadlinkReply {
  std::string target;
};
// F_GETLK: the lock in the way, or l_type F_UNLCK.
struct LockReply {
  struct flock lock {};
};

using Reply =
    std::variant<ErrorReply, NoReply, LaterReply, EntryReply, AttrReply, OpenReply, DataReply, DataView,
                 WriteReply, StatfsReply, XattrSizeReply, LseekReply, ReadlinkReply, LockReply>;

// Sends `reply` to `req`; logs the operation at debug level as "op ino -> outcome".
void send(fuse_req_t req, const char* op, uint64_t inode, Reply reply);

}  // namespace mimicfs
