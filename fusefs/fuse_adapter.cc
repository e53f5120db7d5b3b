// SPDX-License-Identifier: Apache-2.0
#include "fusefs/fuse_adapter.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "engine/fs/caller.h"
#include "fusefs/fuse_reply.h"
#include "fusefs/lock_requests.h"
#include "fusefs/request_credentials.h"

namespace mimicfs {
namespace {

FuseAdapter& adapter(fuse_req_t req) { return *static_cast<FuseAdapter*>(fuse_req_userdata(req)); }

Handle* handle(fuse_file_info* fi) { return reinterpret_cast<Handle*>(fi->fh); }

// A control file's descriptor never is: the control files are no part of the
// volume a power cut ends.
bool from_before_crash(fuse_req_t req, uint64_t inode, fuse_file_info* fi) {
  return !ControlLayer::answers(inode) && opened_before_crash(fi, adapter(req).fs().crashes());
}

// A handle from before the last power cut: its operation gets EIO, once the
// volume is back when it is frozen (`crash freeze`: the program learns nothing
// of the cut meanwhile). A close's flush uses from_before_crash: it never waits.
bool stale(fuse_req_t req, uint64_t inode, fuse_file_info* fi) {
  if (!from_before_crash(req, inode, fi)) return false;
  adapter(req).engine().wait_while_frozen();
  return true;
}

// A request the frozen volume would hold is kept without a thread and answered
// at the restart (FrozenRequests); the callback then returns LaterReply. One
// about `inode` (or its entry `name`) that the control layer answers is not:
// stats.json and ctl stay reachable, to restart the volume.
bool kept(fuse_req_t req, uint64_t inode, std::string_view name = {}) {
  return !ControlLayer::answers(inode, name) && adapter(req).keep_while_frozen(req);
}

// The open file a request goes through, as the engine's layers know it.
uint64_t handle_id(const fuse_file_info* fi) { return fi != nullptr ? fi->fh : 0; }

// What a request whose callback threw is answered.
enum class OnFailure {
  kError,  // the errno: ENOMEM for bad_alloc, EIO for anything else
  kOk,     // release: the handle is gone whatever happened
  kNone,   // forget: the kernel expects no answer
};

// Runs `body`, which returns the Reply, and sends it: the one place exceptions
// stop and the one place a reply is sent. The engine's work runs for the
// calling thread (caller.h; 0 for a request of the kernel's own).
template <typename Body>
void serve(fuse_req_t req, const char* op, uint64_t inode, Body&& body,
           OnFailure on_failure = OnFailure::kError) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  const RequestCredentials credentials(ctx->uid, ctx->gid, ctx->pid);
  const CallerScope caller(static_cast<uint32_t>(ctx->pid), &credentials);
  int error = 0;
  Reply reply;
  try {
    reply = body();
  } catch (const std::bad_alloc&) {
    spdlog::warn("{} {}: out of memory", op, inode);
    error = ENOMEM;
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", op, inode, e.what());
    error = EIO;
  } catch (...) {
    spdlog::error("{} {}: unknown exception", op, inode);
    error = EIO;
  }
  if (error != 0) {
    switch (on_failure) {
      case OnFailure::kError:
        reply = ErrorReply{error};
        break;
      case OnFailure::kOk:
        reply = ErrorReply{0};
        break;
      case OnFailure::kNone:
        reply = NoReply{};
        break;
    }
  }
  send(req, op, inode, std::move(reply));
}

struct stat to_stat(const Attributes& a) {
  struct stat st {};
  st.st_ino = a.inode;
  st.st_mode = a.mode;
  st.st_nlink = a.nlink;
  st.st_uid = a.uid;
  st.st_gid = a.gid;
  st.st_rdev = a.rdev;
  st.st_size = static_cast<off_t>(a.size);
  st.st_blocks = static_cast<blkcnt_t>(a.blocks);
  st.st_blksize = a.block_size;
  st.st_atim = a.atime;
  st.st_mtim = a.mtime;
  st.st_ctim = a.ctime;
  return st;
}

// How long the kernel may keep `inode`'s attributes: never for the control
// files, whose contents (and so size) are made at each open.
double attr_timeout(const FuseAdapter& self, uint64_t inode) {
  return ControlLayer::answers(inode) ? 0.0 : self.options().attr_timeout;
}

fuse_entry_param to_entry(const FuseAdapter& self, const Attributes& a) {
  fuse_entry_param e{};
  e.ino = a.inode;
  e.attr = to_stat(a);
  e.attr_timeout = attr_timeout(self, a.inode);
  e.entry_timeout = self.options().entry_timeout;
  return e;
}

Owner owner_of(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  return Owner{ctx->uid, ctx->gid};
}

// The reply for an operation that returns nothing but success or an errno.
template <typename T>
Reply status(const Result<T>& result) {
  return ErrorReply{result ? 0 : result.error().value};
}

Reply entry(fuse_req_t req, const Result<Attributes>& result) {
  if (!result) return ErrorReply{result.error().value};
  return EntryReply{to_entry(adapter(req), *result)};
}

Reply attr(fuse_req_t req, const Result<Attributes>& result) {
  if (!result) return ErrorReply{result.error().value};
  return AttrReply{to_stat(*result), attr_timeout(adapter(req), result->inode)};
}

// getxattr and listxattr share the size-probe protocol: size 0 asks for the length.
Reply xattr_value(std::string value, size_t size) {
  if (size == 0) return XattrSizeReply{value.size()};
  if (value.size() > size) return ErrorReply{ERANGE};
  return DataReply{std::move(value)};
}

void on_init(void* userdata, fuse_conn_info* conn) {
  // Every write must reach the volume with its exact offset and length, as the
  // NFS client's byte-range dirty tracking sends it: no writeback cache.
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  // Locks stay in the kernel (per mount), but those an NFS client sends to
  // its server (lock_requests.h).
  auto* self = static_cast<FuseAdapter*>(userdata);
  conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
  conn->want |= lock_capabilities(*self, conn->capable);
  // Cached pages stay until the daemon says otherwise. Every change of a file's
  // data goes through the kernel (which updates or drops its pages) but a power
  // cut's, which the adapter invalidates. With auto_inval_data the kernel drops
  // a file's pages whenever a GETATTR shows a new mtime, which each write makes:
  // after every write, and a page a frozen writer holds locked would block it.
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  // Set-ID bits: cleared by the volume where the kernel says so with
  // FUSE_HANDLE_KILLPRIV_V2 (FuseChannel asks for it), else by the kernel's
  // own SETATTR. Never v1, under which nobody would (the kernel leaves it to
  // the filesystem and says nothing of when).
  conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
  if (conn->capable & FUSE_CAP_EXPLICIT_INVAL_DATA) conn->want |= FUSE_CAP_EXPLICIT_INVAL_DATA;
  conn->max_write = 1 << 20;
  spdlog::info("mounted: profile {}, protocol {}.{}", self->fs().profile().name, conn->proto_major,
               conn->proto_minor);
}

void on_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  serve(req, "lookup", parent, [&]() -> Reply {
    auto& self = adapter(req);
    if (kept(req, parent, name)) return LaterReply{};
    Work work;
    auto found = self.fs().lookup(parent, name, work);
    if (!found) return ErrorReply{found.error().value};
    if (work.drop_cached_pages) self.kernel().drop_pages(found->inode);
    EntryReply reply{to_entry(self, *found)};
    if (work.attributes_expire) reply.entry.attr_timeout = 0;
    return reply;
  });
}

void on_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  serve(
      req, "forget", ino,
      [&]() -> Reply {
        adapter(req).fs().forget(ino, nlookup);
        return NoReply{};
      },
      OnFailure::kNone);
}

void on_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  serve(
      req, "forget_multi", count,
      [&]() -> Reply {
        for (size_t i = 0; i < count; ++i) {
          adapter(req).fs().forget(forgets[i].ino, forgets[i].nlookup);
        }
        return NoReply{};
      },
      OnFailure::kNone);
}

void on_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  serve(req, "getattr", ino, [&]() -> Reply {
    auto& self = adapter(req);
    Work work;
    auto attributes = self.fs().getattr(ino, work);
    if (!attributes) return ErrorReply{attributes.error().value};
    if (work.drop_cached_pages) self.kernel().drop_pages(ino);
    return AttrReply{to_stat(*attributes),
                     work.attributes_expire ? 0.0 : attr_timeout(self, ino)};
  });
}

// What a SETATTR asks of the set-ID bits (fuse_do_setattr): the kernel's
// FATTR_KILL_SUIDGID comes with any chown of a non-directory and with a
// truncate by a caller without CAP_FSETID; a SETATTR that sets nothing is
// what is left of the kernel's own __remove_privs (file_remove_privs before a
// write, fallocate or copy_file_range; a chown(-1, -1)) once fuse_setattr has
// taken the kill flags and the mode out of it.
SetIdClearing set_id_clearing(int to_set) {
  constexpr int kAnyField = FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID |
                            FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
                            FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW |
                            FUSE_SET_ATTR_CTIME;
  if ((to_set & kAnyField) == 0) return SetIdClearing::kPrivilegeRemoval;
  if (!FuseChannel::request_kills_suidgid()) return SetIdClearing::kNone;
  return (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) ? SetIdClearing::kOwnerChange
                                                            : SetIdClearing::kModification;
}

void on_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attributes, int to_set,
                fuse_file_info* fi) {
  serve(req, "setattr", ino, [&]() -> Reply {
    if (kept(req, ino)) return LaterReply{};
    if (stale(req, ino, fi)) return ErrorReply{EIO};  // ftruncate through an old descriptor
    AttributeChanges changes;
    if (to_set & FUSE_SET_ATTR_MODE) changes.mode = attributes->st_mode;
    if (to_set & FUSE_SET_ATTR_UID) changes.uid = attributes->st_uid;
    if (to_set & FUSE_SET_ATTR_GID) changes.gid = attributes->st_gid;
    if (to_set & FUSE_SET_ATTR_SIZE) {
      changes.size = static_cast<uint64_t>(attributes->st_size);
      changes.by_descriptor = fi != nullptr;  // ftruncate: FATTR_FH
    }
    if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
      changes.atime = timespec{0, UTIME_NOW};
    } else if (to_set & FUSE_SET_ATTR_ATIME) {
      changes.atime = attributes->st_atim;
    }
    if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
      changes.mtime = timespec{0, UTIME_NOW};
    } else if (to_set & FUSE_SET_ATTR_MTIME) {
      changes.mtime = attributes->st_mtim;
    }
    changes.kill_suidgid = set_id_clearing(to_set);
    return attr(req, adapter(req).fs().setattr(ino, changes));
  });
}

void on_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  serve(req, "mknod", parent, [&]() -> Reply {
    if (kept(req, parent, name)) return LaterReply{};
    return entry(req, adapter(req).fs().create(parent, name, mode, rdev, owner_of(req)));
  });
}

void on_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  serve(req, "mkdir", parent, [&]() -> Reply {
    if (kept(req, parent, name)) return LaterReply{};
    return entry(req, adapter(req).fs().mkdir(parent, name, mode, owner_of(req)));
  });
}

void on_symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  serve(req, "symlink", parent, [&]() -> Reply {
    if (kept(req, parent, name)) return LaterReply{};
    return entry(req, adapter(req).fs().symlink(parent, name, target, owner_of(req)));
  });
}

void on_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) {
  serve(req, "link", ino, [&]() -> Reply {
    if (!ControlLayer::answers(ino) && kept(req, new_parent, new_name)) return LaterReply{};
    return entry(req, adapter(req).fs().link(ino, new_parent, new_name));
  });
}

void on_readlink(fuse_req_t req, fuse_ino_t ino) {
  serve(req, "readlink", ino, [&]() -> Reply {
    if (kept(req, ino)) return LaterReply{};
    auto result = adapter(req).fs().readlink(ino);
    if (!result) return ErrorReply{result.error().value};
    return ReadlinkReply{std::move(*result)};
  });
}

void on_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  serve(req, "unlink", parent, [&]() -> Reply {
    if (kept(req, parent, name)) return LaterReply{};
    return status(adapter(req).fs().unlink(parent, name));
  });
}

void on_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  serve(req, "rmdir", parent, [&]() -> Reply {
    if (kept(req, parent, name)) return LaterReply{};
    return status(adapter(req).fs().rmdir(parent, name));
  });
}

void on_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
               const char* new_name, unsigned int flags) {
  serve(req, "rename", parent, [&]() -> Reply {
    if (!ControlLayer::answers(new_parent, new_name) && kept(req, parent, name)) {
      return LaterReply{};
    }
    return status(adapter(req).fs().rename(parent, name, new_parent, new_name, flags));
  });
}

void on_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  serve(req, "open", ino, [&]() -> Reply {
    auto& self = adapter(req);
    OpenReply reply{*fi, std::make_unique<Handle>(), nullptr, std::nullopt};
    reply.handle->flags = fi->flags;
    reply.handle->boot = self.fs().crashes();  // before the open: a crash after it makes it stale
    if (kept(req, ino)) return LaterReply{};
    const int flags = fi->flags | (FuseChannel::request_kills_suidgid() ? kKillSuidgid : 0);
    Work work;
    const auto opened =
        self.fs().run(ops::Open{ino, flags, reinterpret_cast<uint64_t>(reply.handle.get())}, work);
    self.kernel().invalidate_attributes(work.changed_attributes);  // O_TRUNC cleared S_ISUID
    if (!opened) return ErrorReply{opened.error().value};
    // As for explicit_inval_data above: the pages cached from an earlier open
    // are still the file's, unless a crash rule's invalidation may not have
    // reached the kernel yet, or another NFS client changed the file since
    // (close-to-open; the kernel drops them as it opens).
    if (ControlLayer::answers(ino)) {
      reply.info.direct_io = 1;  // its size is unknown until read: bypass the page cache
    } else {
      reply.info.keep_cache = self.kernel().pending() || work.drop_cached_pages ? 0 : 1;
    }
    reply.interrupted = [&self, ino](uint64_t id) {
      Work undo;
      (void)self.fs().run(ops::Release{ino, id}, undo);
    };
    return reply;
  });
}

// Also O_TMPFILE, which FuseChannel passes on as a CREATE named "/": a file
// with no name, that linkat may name.
void on_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
               fuse_file_info* fi) {
  serve(req, "create", parent, [&]() -> Reply {
    auto& self = adapter(req);
    const bool unnamed = FuseChannel::request_is_tmpfile();
    if (kept(req, parent, unnamed ? "" : name)) return LaterReply{};
    // Allocated first: once the file exists and is open, nothing may fail before the reply.
    OpenReply reply{*fi, std::make_unique<Handle>(), nullptr, std::nullopt};
    reply.handle->flags = fi->flags;
    reply.handle->boot = self.fs().crashes();
    // The new file is open: one handle, released by RELEASE like any other.
    auto created = unnamed
                       ? self.fs().tmpfile(parent, mode, owner_of(req))
                       : self.fs().create(parent, name, mode, 0, owner_of(req), /*open_handle=*/true);
    if (!created) return ErrorReply{created.error().value};
    reply.created = to_entry(self, *created);
    // Two words, so std::function holds them without allocating: nothing may
    // fail now. Unanswered, the kernel has neither the handle nor the
    // reference the create counted (named or not): no FORGET will come.
    FuseAdapter* const owner = &self;
    reply.interrupted = [owner, inode = created->inode](uint64_t) {
      owner->fs().release(inode);
      owner->fs().forget(inode, 1);
    };
    return reply;
  });
}

void on_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  std::unique_ptr<Handle> h(handle(fi));
  serve(
      req, "release", ino,
      [&]() -> Reply {
        auto& self = adapter(req);
        release_file_locks(self, ino, fi);
        Work work;
        (void)self.fs().run(ops::Release{ino, handle_id(fi)}, work);
        self.kernel().invalidate_attributes(work.changed_attributes);
        return ErrorReply{0};
      },
      OnFailure::kOk);
}

void on_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info* fi) {
  serve(req, "read", ino, [&]() -> Reply {
    if (kept(req, ino)) return LaterReply{};
    if (stale(req, ino, fi)) return ErrorReply{EIO};
    if (lock_lost(adapter(req), ino, fi)) return ErrorReply{EIO};
    // The reply points into the thread's buffer until sent.
    const std::span<std::byte> buffer = read_reply_buffer(size);
    Work work;
    auto result =
        adapter(req).fs().run(ops::Read{ino, static_cast<uint64_t>(offset), buffer, fi->flags,
                                        handle_id(fi)},
                              work);
    if (!result) return ErrorReply{result.error().value};
    return DataView{std::span(reinterpret_cast<const char*>(buffer.data()), *result)};
  });
}

void on_write(fuse_req_t req, fuse_ino_t ino, const char* data, size_t size, off_t offset,
              fuse_file_info* fi) {
  serve(req, "write", ino, [&]() -> Reply {
    auto& self = adapter(req);
    if (kept(req, ino)) return LaterReply{};
    if (stale(req, ino, fi)) return ErrorReply{EIO};
    // fi->flags are the descriptor's now (fcntl may have changed O_DIRECT or O_APPEND).
    const int flags = fi->flags | (FuseChannel::request_kills_suidgid() ? kKillSuidgid : 0) |
                      (lock_lost(self, ino, fi) ? kLockLost : 0);
    Work work;
    const auto bytes = std::span(reinterpret_cast<const std::byte*>(data), size);
    auto result = self.fs().run(
        ops::Write{ino, static_cast<uint64_t>(offset), bytes, flags, handle_id(fi)}, work);
    if (!work.changed_attributes.empty()) {
      self.kernel().invalidate_attributes(work.changed_attributes);
    }
    // This request holds the pages it writes: they go after its reply.
    if (work.drop_cached_pages) self.kernel().drop_pages_after_reply(ino);
    if (!result) return ErrorReply{result.error().value};
    return WriteReply{*result};
  });
}

// One request for the whole copy, where without it the kernel would read and
// write each chunk through the page cache. Never ENOSYS: it turns
// copy_file_range off for the whole mount.
void on_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, fuse_file_info* fi_in,
                        fuse_ino_t ino_out, off_t off_out, fuse_file_info* fi_out, size_t len,
                        int flags) {
  serve(req, "copy_file_range", ino_out, [&]() -> Reply {
    if (flags != 0 || off_in < 0 || off_out < 0) return ErrorReply{EINVAL};
    // With a control file on either side, the control layer refuses it.
    if (!ControlLayer::answers(ino_in) && !ControlLayer::answers(ino_out)) {
      if (kept(req, ino_out)) return LaterReply{};
      if (stale(req, ino_in, fi_in) || stale(req, ino_out, fi_out)) return ErrorReply{EIO};
      // NFSv4.2's COPY carries both files' stateids (nfs4_set_rw_stateid).
      if (lock_lost(adapter(req), ino_in, fi_in) || lock_lost(adapter(req), ino_out, fi_out)) {
        return ErrorReply{EIO};
      }
    }
    // The reply's count is 32 bits (fuse_write_out.size), and libfuse 3.14 does not clamp.
    const size_t length = std::min<size_t>(len, 0xFFFFF000);
    // libfuse passes only the handles: the destination's sync flags are its open's.
    const int sync = fi_out->fh != 0 ? handle(fi_out)->flags & (O_SYNC | O_DSYNC) : 0;
    auto result = adapter(req).fs().copy_range(ino_in, off_in, ino_out, off_out, length, sync);
    if (!result) return ErrorReply{result.error().value};
    return WriteReply{*result};
  });
}

void on_flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  serve(req, "flush", ino, [&]() -> Reply {
    auto& self = adapter(req);
    release_owner_locks(self, ino, fi);
    if (from_before_crash(req, ino, fi)) return ErrorReply{EIO};
    const bool writer = (handle(fi)->flags & O_ACCMODE) != O_RDONLY;
    Work work;
    const auto flushed = self.fs().flush(ino, writer, work);
    self.kernel().invalidate_attributes(work.changed_attributes);  // before close(2) returns
    return status(flushed);
  });
}

// fsync and fdatasync of a file or a directory.
Reply sync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  if (kept(req, ino)) return LaterReply{};
  if (stale(req, ino, fi)) return ErrorReply{EIO};
  auto& self = adapter(req);
  Work work;
  const auto synced = self.fs().fsync(ino, datasync != 0, work);
  // Delayed allocation, preallocation.
  self.kernel().invalidate_attributes(work.changed_attributes);
  return status(synced);
}

void on_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  serve(req, datasync ? "fdatasync" : "fsync", ino,
        [&]() -> Reply { return sync(req, ino, datasync, fi); });
}

void on_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  serve(req, "opendir", ino, [&]() -> Reply {
    auto& self = adapter(req);
    if (kept(req, ino)) return LaterReply{};
    const uint64_t boot = self.fs().crashes();
    auto entries = self.fs().read_directory(ino);
    if (!entries) return ErrorReply{entries.error().value};
    OpenReply reply{*fi, std::make_unique<Handle>(), nullptr, std::nullopt};
    reply.handle->boot = boot;
    reply.handle->entries = std::move(*entries);
    return reply;
  });
}

void on_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info* fi) {
  serve(req, "readdir", ino, [&]() -> Reply {
    if (kept(req, ino)) return LaterReply{};
    if (stale(req, ino, fi)) return ErrorReply{EIO};
    const auto& entries = handle(fi)->entries;
    std::string buffer(size, '\0');
    size_t used = 0;
    for (size_t i = offset; i < entries.size(); ++i) {
      struct stat st {};
      st.st_ino = entries[i].inode;
      st.st_mode = entries[i].type;
      const size_t need = fuse_add_direntry(req, buffer.data() + used, size - used,
                                            entries[i].name.c_str(), &st, i + 1);
      if (need > size - used) break;
      used += need;
    }
    buffer.resize(used);
    return DataReply{std::move(buffer)};
  });
}

void on_releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  std::unique_ptr<Handle> h(handle(fi));
  serve(
      req, "releasedir", ino, [] { return Reply{ErrorReply{0}}; }, OnFailure::kOk);
}

void on_getlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock) {
  serve(req, "getlk", ino, [&] { return test_lock(adapter(req), ino, fi, *lock); });
}

void on_setlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock, int sleep) {
  serve(req, sleep ? "setlkw" : "setlk", ino,
        [&] { return set_lock(adapter(req), req, ino, fi, *lock, sleep != 0); });
}

void on_flock(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, int operation) {
  serve(req, "flock", ino, [&] { return flock_lock(adapter(req), req, ino, fi, operation); });
}

void on_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  serve(req, "fsyncdir", ino, [&]() -> Reply { return sync(req, ino, datasync, fi); });
}

void on_statfs(fuse_req_t req, fuse_ino_t ino) {
  serve(req, "statfs", ino, [&]() -> Reply {
    const auto result = adapter(req).fs().statfs();
    if (!result) return ErrorReply{result.error().value};
    StatfsReply reply;
    reply.stats.f_bsize = result->block_size;
    reply.stats.f_frsize = result->fragment_size;
    reply.stats.f_blocks = result->blocks;
    reply.stats.f_bfree = result->blocks_free;
    reply.stats.f_bavail = result->blocks_available;
    reply.stats.f_files = result->files;
    reply.stats.f_ffree = result->files_free;
    reply.stats.f_favail = result->files_free;
    reply.stats.f_namemax = result->name_max;
    return reply;
  });
}

void on_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
                 int flags) {
  serve(req, "setxattr", ino, [&]() -> Reply {
    if (!ControlLayer::answers_xattr(name) && kept(req, ino)) return LaterReply{};
    return status(adapter(req).fs().setxattr(ino, name, std::string_view(value, size), flags));
  });
}

void on_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  serve(req, "getxattr", ino, [&]() -> Reply {
    if (!ControlLayer::answers_xattr(name) && kept(req, ino)) return LaterReply{};
    auto result = adapter(req).fs().getxattr(ino, name);
    if (!result) return ErrorReply{result.error().value};
    return xattr_value(std::move(*result), size);
  });
}

void on_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  serve(req, "listxattr", ino, [&]() -> Reply {
    if (kept(req, ino)) return LaterReply{};
    auto names = adapter(req).fs().listxattr(ino);
    if (!names) return ErrorReply{names.error().value};
    std::string list;
    for (const auto& name : *names) list.append(name).push_back('\0');
    return xattr_value(std::move(list), size);
  });
}

void on_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  serve(req, "removexattr", ino, [&]() -> Reply {
    if (!ControlLayer::answers_xattr(name) && kept(req, ino)) return LaterReply{};
    return status(adapter(req).fs().removexattr(ino, name));
  });
}

void on_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                  fuse_file_info* fi) {
  serve(req, "fallocate", ino, [&]() -> Reply {
    // vfs_fallocate sends none of these; the control layer answers first.
    if (!ControlLayer::answers(ino) && (offset < 0 || length <= 0)) return ErrorReply{EINVAL};
    if (kept(req, ino)) return LaterReply{};
    if (stale(req, ino, fi)) return ErrorReply{EIO};
    return status(adapter(req).fs().fallocate(ino, mode, offset, length));
  });
}

void on_lseek(fuse_req_t req, fuse_ino_t ino, off_t offset, int whence, fuse_file_info* fi) {
  serve(req, "lseek", ino, [&]() -> Reply {
    if (offset < 0 && !ControlLayer::answers(ino)) return ErrorReply{ENXIO};
    if (kept(req, ino)) return LaterReply{};
    if (stale(req, ino, fi)) return ErrorReply{EIO};
    auto result = adapter(req).fs().seek(ino, offset, whence);
    if (!result) return ErrorReply{result.error().value};
    return LseekReply{static_cast<off_t>(*result)};
  });
}

}  // namespace

FuseAdapter::FuseAdapter(Engine& engine, FileSystem& fs, AdapterOptions options)
    : engine_(engine),
      view_(fs),
      control_(engine, fs),
      control_layer_(fs, control_),
      options_(options),
      kernel_(engine),
      frozen_(engine) {
  crash_observer_ = engine_.on_crash([this](const CrashReport& report, bool later) {
    if (later) {
      kernel_.invalidate_later(report);
    } else {
      kernel_.invalidate(report);  // the ctl write holds no lock on these files
    }
  });
  control_.set_crash_observer(crash_observer_);
  // Another NFS client's change: this kernel's attributes of the file must
  // not outlive this client's attribute cache.
  engine_.on_changes_elsewhere(view_,
                              [this](uint64_t inode) { kernel_.invalidate_attributes({inode}); });
  control_.after_restart([this] { restarted(); });
}

FuseAdapter::~FuseAdapter() {
  engine_.remove_crash_observer(crash_observer_);
  detach();
}

void FuseAdapter::restarted() {
  frozen_.wake();  // its kept requests are answered now, not at its next look
  // What a restart's caller reads next must not come from pages of the crashed world.
  kernel_.wait(std::chrono::seconds(10));
}

void FuseAdapter::detach() {
  // The kept requests first: they may hold the pages and directories the
  // invalidation worker's notifications wait for.
  frozen_.stop();
  // Then: another client's request thread may be telling this session (it
  // waits for a call under way), and the session goes after this.
  engine_.on_changes_elsewhere(view_, {});
  kernel_.stop();
}

const fuse_lowlevel_ops& FuseAdapter::operations() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o{};
    o.init = on_init;
    o.lookup = on_lookup;
    o.forget = on_forget;
    o.forget_multi = on_forget_multi;
    o.getattr = on_getattr;
    o.setattr = on_setattr;
    o.readlink = on_readlink;
    o.mknod = on_mknod;
    o.mkdir = on_mkdir;
    o.unlink = on_unlink;
    o.rmdir = on_rmdir;
    o.symlink = on_symlink;
    o.rename = on_rename;
    o.link = on_link;
    o.open = on_open;
    o.read = on_read;
    o.write = on_write;
    o.copy_file_range = on_copy_file_range;
    o.flush = on_flush;
    o.release = on_release;
    o.fsync = on_fsync;
    o.opendir = on_opendir;
    o.readdir = on_readdir;
    o.releasedir = on_releasedir;
    o.fsyncdir = on_fsyncdir;
    o.statfs = on_statfs;
    o.setxattr = on_setxattr;
    o.getxattr = on_getxattr;
    o.listxattr = on_listxattr;
    o.removexattr = on_removexattr;
    o.create = on_create;
    o.fallocate = on_fallocate;
    o.lseek = on_lseek;
    o.getlk = on_getlk;
    o.setlk = on_setlk;
    o.flock = on_flock;
    return o;
  }();
  return ops;
}

}  // namespace mimicfs
