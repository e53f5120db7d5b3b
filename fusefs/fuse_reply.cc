// SPDX-License-Identifier: Apache-2.0
#include "fusefs/fuse_reply.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <vector>

#include "engine/fs/result.h"

namespace mimicfs {
namespace {

thread_local std::vector<std::byte> read_reply;
thread_local std::span<std::byte> read_reply_area;

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;  // clang 16 deduces no aggregate's arguments

// The reply's outcome for the log: "ok", an errno name, or what was sent.
std::string outcome(const Reply& reply) {
  return std::visit(
      Overloaded{
          [](const ErrorReply& r) { return r.error ? errno_name(r.error) : std::string("ok"); },
          [](const NoReply&) { return std::string("no reply"); },
          [](const LaterReply&) { return std::string("kept until the restart"); },
          [](const EntryReply& r) { return fmt::format("inode {}", r.entry.ino); },
          [](const AttrReply& r) { return fmt::format("size {}", r.attr.st_size); },
          [](const OpenReply&) { return std::string("open"); },
          [](const DataReply& r) { return fmt::format("{} bytes", r.data.size()); },
          [](const DataView& r) { return fmt::format("{} bytes", r.data.size()); },
          [](const WriteReply& r) { return fmt::format("{} bytes", r.count); },
          [](const StatfsReply&) { return std::string("ok"); },
          [](const XattrSizeReply& r) { return fmt::format("size {}", r.size); },
          [](const LseekReply& r) { return fmt::format("offset {}", r.offset); },
          [](const ReadlinkReply& r) { return r.target; },
          [](const LockReply& r) {
            return r.lock.l_type == F_UNLCK ? std::string("unlocked")
                                            : fmt::format("held by pid {}", r.lock.l_pid);
          },
      },
      reply);
}

}  // namespace

void send(fuse_req_t req, const char* op, uint64_t inode, Reply reply) {
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("{} {} -> {}", op, inode, outcome(reply));
  }
  std::visit(Overloaded{
                 [&](const ErrorReply& r) { fuse_reply_err(req, r.error); },
                 [&](const NoReply&) { fuse_reply_none(req); },
                 [&](const LaterReply&) {},
                 [&](const EntryReply& r) { fuse_reply_entry(req, &r.entry); },
                 [&](const AttrReply& r) { fuse_reply_attr(req, &r.attr, r.timeout); },
                 [&](OpenReply& r) {
                   r.info.fh = reinterpret_cast<uint64_t>(r.handle.get());
                   const int sent = r.created ? fuse_reply_create(req, &*r.created, &r.info)
                                              : fuse_reply_open(req, &r.info);
                   if (sent == 0) {
                     r.handle.release();  // the kernel's until RELEASE
                   } else if (r.interrupted) {
                     // No RELEASE will come for this handle. This runs after the
                     // reply, outside serve()'s try: nothing may escape to libfuse.
                     try {
                       r.interrupted(r.info.fh);
                     } catch (const std::exception& e) {
                       spdlog::error("{} {}: undoing an interrupted open: {}", op, inode, e.what());
                     } catch (...) {
                       spdlog::error("{} {}: undoing an interrupted open failed", op, inode);
                     }
                   }
                 },
                 [&](const DataReply& r) { fuse_reply_buf(req, r.data.data(), r.data.size()); },
                 [&](const DataView& r) { fuse_reply_buf(req, r.data.data(), r.data.size()); },
                 [&](const WriteReply& r) { fuse_reply_write(req, r.count); },
                 [&](const StatfsReply& r) { fuse_reply_statfs(req, &r.stats); },
                 [&](const XattrSizeReply& r) { fuse_reply_xattr(req, r.size); },
                 [&](const LseekReply& r) { fuse_reply_lseek(req, r.offset); },
                 [&](const ReadlinkReply& r) { fuse_reply_readlink(req, r.target.c_str()); },
                 [&](const LockReply& r) { fuse_reply_lock(req, &r.lock); },
             },
             reply);
}

std::span<std::byte> read_reply_buffer(size_t size) {
  if (!read_reply_area.empty() && size <= read_reply_area.size()) {
    return read_reply_area.first(size);
  }
  if (read_reply.size() < size) read_reply.resize(size);
  return {read_reply.data(), size};
}

void read_replies_into(std::span<std::byte> area) { read_reply_area = area; }

}  // namespace mimicfs
