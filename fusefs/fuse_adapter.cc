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

namespace mimicfs {
namespace {

FuseAdapter& adapter(fuse_req_t req) { return *static_cast<FuseAdapter*>(fuse_req_userdata(req)); }

// What an open file handle (fi->fh) remembers.
struct Handle {
  int flags = 0;
  std::string contents;                 // control files: what the reader sees
  std::vector<DirectoryEntry> entries;  // directories: the listing taken at opendir
};

Handle* handle(fuse_file_info* fi) { return reinterpret_cast<Handle*>(fi->fh); }

// Runs `body`, which sends its own reply on success and returns 0, or returns an
// errno for this wrapper to send. The one place exceptions stop.
template <typename Body>
void serve(fuse_req_t req, const char* op, Body&& body) {
  int error;
  try {
    error = body();
  } catch (const std::bad_alloc&) {
    spdlog::warn("{}: out of memory", op);
    error = ENOMEM;
  } catch (const std::exception& e) {
    spdlog::error("{}: {}", op, e.what());
    error = EIO;
  } catch (...) {
    spdlog::error("{}: unknown exception", op);
    error = EIO;
  }
  if (error) fuse_reply_err(req, error);
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

fuse_entry_param to_entry(const FuseAdapter& self, const Attributes& a) {
  fuse_entry_param e{};
  e.ino = a.inode;
  e.attr = to_stat(a);
  e.attr_timeout = self.options().attr_timeout;
  e.entry_timeout = self.options().entry_timeout;
  return e;
}

Owner owner_of(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  return Owner{ctx->uid, ctx->gid};
}

void on_init(void* userdata, fuse_conn_info* conn) {
  // Every write must reach the volume with its exact offset and length, as the
  // NFS client's byte-range dirty tracking sends it: no writeback cache.
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  // Locks stay in the kernel (one host); splice buys nothing for an in-memory store.
  conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
  conn->max_write = 1 << 20;
  auto* self = static_cast<FuseAdapter*>(userdata);
  spdlog::info("mounted: profile {}, protocol {}.{}", self->fs().profile().name, conn->proto_major,
               conn->proto_minor);
}

void on_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  serve(req, "lookup", [&] {
    auto& self = adapter(req);
    auto control = self.control().lookup(parent, name);
    if (!control && ControlFiles::owns(parent)) control = fail(ENOENT);
    auto result = control ? std::move(*control) : self.fs().lookup(parent, name);
    if (!result) return result.error().value;
    fuse_entry_param e = to_entry(self, *result);
    fuse_reply_entry(req, &e);
    return 0;
  });
}

void on_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  try {
    if (!ControlFiles::owns(ino)) adapter(req).fs().forget(ino, nlookup);
  } catch (const std::exception& e) {
    spdlog::error("forget: {}", e.what());
  }
  fuse_reply_none(req);
}

void on_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  try {
    for (size_t i = 0; i < count; ++i) {
      if (!ControlFiles::owns(forgets[i].ino)) {
        adapter(req).fs().forget(forgets[i].ino, forgets[i].nlookup);
      }
    }
  } catch (const std::exception& e) {
    spdlog::error("forget: {}", e.what());
  }
  fuse_reply_none(req);
}

void on_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  serve(req, "getattr", [&] {
    auto& self = adapter(req);
    auto result = ControlFiles::owns(ino) ? self.control().getattr(ino) : self.fs().getattr(ino);
    if (!result) return result.error().value;
    struct stat st = to_stat(*result);
    fuse_reply_attr(req, &st, self.options().attr_timeout);
    return 0;
  });
}

void on_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  serve(req, "setattr", [&] {
    auto& self = adapter(req);
    if (ControlFiles::owns(ino)) return EPERM;
    AttributeChanges changes;
    if (to_set & FUSE_SET_ATTR_MODE) changes.mode = attr->st_mode;
    if (to_set & FUSE_SET_ATTR_UID) changes.uid = attr->st_uid;
    if (to_set & FUSE_SET_ATTR_GID) changes.gid = attr->st_gid;
    if (to_set & FUSE_SET_ATTR_SIZE) changes.size = static_cast<uint64_t>(attr->st_size);
    if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
      changes.atime = timespec{0, UTIME_NOW};
    } else if (to_set & FUSE_SET_ATTR_ATIME) {
      changes.atime = attr->st_atim;
    }
    if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
      changes.mtime = timespec{0, UTIME_NOW};
    } else if (to_set & FUSE_SET_ATTR_MTIME) {
      changes.mtime = attr->st_mtim;
    }
    auto result = self.fs().setattr(ino, changes);
    if (!result) return result.error().value;
    struct stat st = to_stat(*result);
    fuse_reply_attr(req, &st, self.options().attr_timeout);
    return 0;
  });
}

void reply_new_entry(fuse_req_t req, const Result<Attributes>& result, int* error) {
  if (!result) {
    *error = result.error().value;
    return;
  }
  fuse_entry_param e = to_entry(adapter(req), *result);
  fuse_reply_entry(req, &e);
  *error = 0;
}

void on_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  serve(req, "mknod", [&] {
    if (ControlFiles::reserved(parent, name)) return EEXIST;
    if (ControlFiles::owns(parent)) return EPERM;
    int error;
    reply_new_entry(req, adapter(req).fs().create(parent, name, mode, rdev, owner_of(req)), &error);
    return error;
  });
}

void on_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  serve(req, "mkdir", [&] {
    if (ControlFiles::reserved(parent, name)) return EEXIST;
    if (ControlFiles::owns(parent)) return EPERM;
    int error;
    reply_new_entry(req, adapter(req).fs().mkdir(parent, name, mode, owner_of(req)), &error);
    return error;
  });
}

void on_symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  serve(req, "symlink", [&] {
    if (ControlFiles::reserved(parent, name)) return EEXIST;
    if (ControlFiles::owns(parent)) return EPERM;
    int error;
    reply_new_entry(req, adapter(req).fs().symlink(parent, name, target, owner_of(req)), &error);
    return error;
  });
}

void on_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) {
  serve(req, "link", [&] {
    if (ControlFiles::reserved(new_parent, new_name)) return EEXIST;
    if (ControlFiles::owns(ino) || ControlFiles::owns(new_parent)) return EPERM;
    int error;
    reply_new_entry(req, adapter(req).fs().link(ino, new_parent, new_name), &error);
    return error;
  });
}

void on_readlink(fuse_req_t req, fuse_ino_t ino) {
  serve(req, "readlink", [&] {
    if (ControlFiles::owns(ino)) return EINVAL;
    auto result = adapter(req).fs().readlink(ino);
    if (!result) return result.error().value;
    fuse_reply_readlink(req, result->c_str());
    return 0;
  });
}

void on_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  serve(req, "unlink", [&] {
    if (ControlFiles::reserved(parent, name)) return EISDIR;
    if (ControlFiles::owns(parent)) return EPERM;
    auto result = adapter(req).fs().unlink(parent, name);
    if (!result) return result.error().value;
    fuse_reply_err(req, 0);
    return 0;
  });
}

void on_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  serve(req, "rmdir", [&] {
    if (ControlFiles::reserved(parent, name) || ControlFiles::owns(parent)) return EPERM;
    auto result = adapter(req).fs().rmdir(parent, name);
    if (!result) return result.error().value;
    fuse_reply_err(req, 0);
    return 0;
  });
}

void on_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
               const char* new_name, unsigned int flags) {
  serve(req, "rename", [&] {
    if (ControlFiles::reserved(parent, name) || ControlFiles::reserved(new_parent, new_name) ||
        ControlFiles::owns(parent) || ControlFiles::owns(new_parent)) {
      return EPERM;
    }
    auto result = adapter(req).fs().rename(parent, name, new_parent, new_name, flags);
    if (!result) return result.error().value;
    fuse_reply_err(req, 0);
    return 0;
  });
}

void on_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  serve(req, "open", [&] {
    auto& self = adapter(req);
    auto h = std::make_unique<Handle>();
    h->flags = fi->flags;
    if (ControlFiles::owns(ino)) {
      auto contents = self.control().open_contents(ino, fi->flags);
      if (!contents) return contents.error().value;
      h->contents = std::move(*contents);
      fi->direct_io = 1;  // size is unknown until read: bypass the page cache
    } else {
      auto result = self.fs().open(ino, fi->flags);
      if (!result) return result.error().value;
    }
    fi->fh = reinterpret_cast<uint64_t>(h.get());
    if (fuse_reply_open(req, fi) == 0) {
      h.release();
    } else if (!ControlFiles::owns(ino)) {
      self.fs().release(ino);  // interrupted: no RELEASE will come for this handle
    }
    return 0;
  });
}

void on_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
               fuse_file_info* fi) {
  serve(req, "create", [&] {
    auto& self = adapter(req);
    if (ControlFiles::reserved(parent, name)) return EEXIST;
    if (ControlFiles::owns(parent)) return EPERM;
    // The new file is open: one handle, released by RELEASE like any other.
    auto result = self.fs().create(parent, name, mode, 0, owner_of(req), /*open_handle=*/true);
    if (!result) return result.error().value;
    auto h = std::make_unique<Handle>();
    h->flags = fi->flags;
    fi->fh = reinterpret_cast<uint64_t>(h.get());
    fuse_entry_param e = to_entry(self, *result);
    if (fuse_reply_create(req, &e, fi) == 0) {
      h.release();
    } else {
      self.fs().release(result->inode);  // interrupted: no RELEASE will come
    }
    return 0;
  });
}

void on_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  std::unique_ptr<Handle> h(handle(fi));
  try {
    if (!ControlFiles::owns(ino)) adapter(req).fs().release(ino);
  } catch (const std::exception& e) {
    spdlog::error("release: {}", e.what());
  }
  fuse_reply_err(req, 0);
}

void on_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info* fi) {
  serve(req, "read", [&] {
    if (ControlFiles::owns(ino)) {
      const std::string& contents = handle(fi)->contents;
      const size_t start = std::min<size_t>(offset, contents.size());
      const size_t length = std::min(size, contents.size() - start);
      fuse_reply_buf(req, contents.data() + start, length);
      return 0;
    }
    thread_local std::vector<std::byte> buffer;
    if (buffer.size() < size) buffer.resize(size);
    auto result = adapter(req).fs().read(ino, offset, std::span(buffer.data(), size), fi->flags);
    if (!result) return result.error().value;
    fuse_reply_buf(req, reinterpret_cast<const char*>(buffer.data()), *result);
    return 0;
  });
}

void on_write(fuse_req_t req, fuse_ino_t ino, const char* data, size_t size, off_t offset,
              fuse_file_info* fi) {
  serve(req, "write", [&] {
    auto& self = adapter(req);
    if (ino == ControlFiles::kCtlInode) {
      auto result = self.control().execute(std::string_view(data, size));
      if (!result) return result.error().value;
      fuse_reply_write(req, size);
      return 0;
    }
    if (ControlFiles::owns(ino)) return EBADF;
    // fi->flags are the descriptor's now (fcntl may have changed O_DIRECT or O_APPEND).
    auto result = self.fs().write(
        ino, offset, std::span(reinterpret_cast<const std::byte*>(data), size), fi->flags);
    if (!result) return result.error().value;
    fuse_reply_write(req, *result);
    return 0;
  });
}

void on_flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  serve(req, "flush", [&] {
    if (!ControlFiles::owns(ino)) {
      const bool writer = (handle(fi)->flags & O_ACCMODE) != O_RDONLY;
      auto result = adapter(req).fs().flush(ino, writer);
      if (!result) return result.error().value;
    }
    fuse_reply_err(req, 0);
    return 0;
  });
}

void on_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*) {
  serve(req, "fsync", [&] {
    if (!ControlFiles::owns(ino)) {
      auto result = adapter(req).fs().fsync(ino, datasync != 0);
      if (!result) return result.error().value;
    }
    fuse_reply_err(req, 0);
    return 0;
  });
}

void on_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  serve(req, "opendir", [&] {
    auto& self = adapter(req);
    auto entries = ControlFiles::owns(ino) ? self.control().read_directory(ino)
                                           : self.fs().read_directory(ino);
    if (!entries) return entries.error().value;
    auto h = std::make_unique<Handle>();
    h->entries = std::move(*entries);
    fi->fh = reinterpret_cast<uint64_t>(h.get());
    if (fuse_reply_open(req, fi) == 0) h.release();
    return 0;
  });
}

void on_readdir(fuse_req_t req, fuse_ino_t, size_t size, off_t offset, fuse_file_info* fi) {
  serve(req, "readdir", [&] {
    const auto& entries = handle(fi)->entries;
    std::vector<char> buffer(size);
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
    fuse_reply_buf(req, buffer.data(), used);
    return 0;
  });
}

void on_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  std::unique_ptr<Handle> h(handle(fi));
  fuse_reply_err(req, 0);
}

void on_fsyncdir(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) { fuse_reply_err(req, 0); }

void on_statfs(fuse_req_t req, fuse_ino_t) {
  serve(req, "statfs", [&] {
    const auto result = adapter(req).fs().statfs();
    if (!result) return result.error().value;
    const FilesystemStats& s = *result;
    struct statvfs st {};
    st.f_bsize = s.block_size;
    st.f_frsize = s.fragment_size;
    st.f_blocks = s.blocks;
    st.f_bfree = s.blocks_free;
    st.f_bavail = s.blocks_available;
    st.f_files = s.files;
    st.f_ffree = s.files_free;
    st.f_favail = s.files_free;
    st.f_namemax = s.name_max;
    fuse_reply_statfs(req, &st);
    return 0;
  });
}

// getxattr and listxattr share the size-probe protocol: size 0 asks for the length.
int reply_xattr_value(fuse_req_t req, const std::string& value, size_t size) {
  if (size == 0) {
    fuse_reply_xattr(req, value.size());
  } else if (value.size() > size) {
    return ERANGE;
  } else {
    fuse_reply_buf(req, value.data(), value.size());
  }
  return 0;
}

void on_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
                 int flags) {
  serve(req, "setxattr", [&] {
    if (ControlFiles::owns(ino)) return ENOTSUP;
    if (std::string_view(name).starts_with(ControlFiles::kXattrPrefix)) return EPERM;
    auto result = adapter(req).fs().setxattr(ino, name, std::string_view(value, size), flags);
    if (!result) return result.error().value;
    fuse_reply_err(req, 0);
    return 0;
  });
}

void on_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  serve(req, "getxattr", [&] {
    auto& self = adapter(req);
    if (ControlFiles::owns(ino)) return ENODATA;
    auto value = self.control().virtual_xattr(ino, name);
    auto result = value ? std::move(*value) : self.fs().getxattr(ino, name);
    if (!result) return result.error().value;
    return reply_xattr_value(req, *result, size);
  });
}

void on_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  serve(req, "listxattr", [&] {
    if (ControlFiles::owns(ino)) return reply_xattr_value(req, "", size);
    auto names = adapter(req).fs().listxattr(ino);
    if (!names) return names.error().value;
    std::string list;
    for (const auto& name : *names) list.append(name).push_back('\0');
    return reply_xattr_value(req, list, size);
  });
}

void on_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  serve(req, "removexattr", [&] {
    if (ControlFiles::owns(ino)) return ENOTSUP;
    if (std::string_view(name).starts_with(ControlFiles::kXattrPrefix)) return EPERM;
    auto result = adapter(req).fs().removexattr(ino, name);
    if (!result) return result.error().value;
    fuse_reply_err(req, 0);
    return 0;
  });
}

void on_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                  fuse_file_info*) {
  serve(req, "fallocate", [&] {
    if (ControlFiles::owns(ino)) return EOPNOTSUPP;
    if (offset < 0 || length <= 0) return EINVAL;
    auto result = adapter(req).fs().fallocate(ino, mode, offset, length);
    if (!result) return result.error().value;
    fuse_reply_err(req, 0);
    return 0;
  });
}

void on_lseek(fuse_req_t req, fuse_ino_t ino, off_t offset, int whence, fuse_file_info*) {
  serve(req, "lseek", [&] {
    if (ControlFiles::owns(ino)) return EINVAL;
    if (offset < 0) return ENXIO;
    auto result = adapter(req).fs().seek(ino, offset, whence);
    if (!result) return result.error().value;
    fuse_reply_lseek(req, static_cast<off_t>(*result));
    return 0;
  });
}

}  // namespace

FuseAdapter::FuseAdapter(Engine& engine, AdapterOptions options)
    : engine_(engine), control_(engine), options_(options) {
  control_.on_crash([this](const CrashReport& report) { invalidate(report); });
}

void FuseAdapter::invalidate(const CrashReport& report) {
  fuse_session* session = session_.load();
  if (!session) return;
  // Called from the ctl write, which holds no lock on these directories or files.
  for (const auto& [parent, name] : report.removed_entries) {
    const int error = fuse_lowlevel_notify_inval_entry(session, parent, name.c_str(), name.size());
    if (error != 0 && error != -ENOENT) {
      spdlog::warn("crash: cannot invalidate entry {} in {}: {}", name, parent, strerror(-error));
    }
  }
  for (const uint64_t inode : report.restored_files) {
    const int error = fuse_lowlevel_notify_inval_inode(session, inode, 0, 0);
    if (error != 0 && error != -ENOENT) {
      spdlog::warn("crash: cannot invalidate inode {}: {}", inode, strerror(-error));
    }
  }
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
    return o;
  }();
  return ops;
}

}  // namespace mimicfs
