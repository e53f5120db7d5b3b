// SPDX-License-Identifier: Apache-2.0
// The engine's operations, each declared once: a request struct (its
// arguments, the type of its reply, and how the operation is counted), and its
// place in Operation, the variant every FileSystem dispatches on. The rest is
// derived: OperationReply, and the forwarding of every layer. Each operation's
// contract is at its typed call in file_system.h.
//
// A request's references and spans point into its caller's arguments: it
// lives for one call, as a syscall's arguments do.
//
// Adding an operation: its struct (with a call(), or layers never see it) and
// its place in Operation here, its Op and name when it is counted apart, its
// typed call in file_system.h, Volume's serve() for it, and the adapter's
// callback. The layers' switches on Op (FaultLayer::faultable, the NFS
// client's) leave a new Op alone until told otherwise.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "engine/fs/result.h"
#include "engine/fs/values.h"

namespace mimicfs {

// The operations as they are counted, charged and faulted. Some requests are
// counted under one of two: a setattr that sets the size is a truncate, a
// fallocate that punches a punch, an fsync with datasync an fdatasync.
enum class Op : uint8_t {
  kLookup,
  kGetattr,
  kSetattr,
  kTruncate,
  kCreate,
  kMkdir,
  kSymlink,
  kReadlink,
  kLink,
  kUnlink,
  kRmdir,
  kRename,
  kOpen,
  kRelease,
  kReaddir,
  kRead,
  kWrite,
  kFlush,
  kFsync,
  kFdatasync,  // fdatasync(2), and fsyncdir's datasync: counted apart from fsync
  kFallocate,
  kPunch,
  kLseek,
  kStatfs,
  kSetxattr,
  kGetxattr,
  kListxattr,
  kRemovexattr,
  kCopyFileRange,
  kTmpfile,
  kCount  // not an operation: the number of them
};

// The name stats.json, `mimicfs stats` and fault rules use.
std::string_view op_name(Op op);

// One operation as a layer sees it.
struct Call {
  Op op;
  uint64_t inode = 0;     // the file, or the directory holding `name`
  std::string_view name;  // the entry a namespace operation is about, else empty
};

namespace ops {

struct Lookup {
  using Reply = Attributes;
  uint64_t parent;
  const std::string& name;
  Call call() const { return {Op::kLookup, parent, name}; }
};

// Not an operation of the program's but the kernel dropping its cache: no
// call(), so layers forward it unseen.
struct Forget {
  using Reply = void;
  uint64_t inode;
  uint64_t references;
};

struct Getattr {
  using Reply = Attributes;
  uint64_t inode;
  Call call() const { return {Op::kGetattr, inode, {}}; }
};

struct Setattr {
  using Reply = Attributes;
  uint64_t inode;
  const AttributeChanges& changes;
  Call call() const { return {changes.size ? Op::kTruncate : Op::kSetattr, inode, {}}; }
};

struct Create {
  using Reply = Attributes;
  uint64_t parent;
  const std::string& name;
  uint32_t mode;
  uint64_t rdev;
  Owner owner;
  bool open_handle;
  Call call() const { return {Op::kCreate, parent, name}; }
};

struct Tmpfile {
  using Reply = Attributes;
  uint64_t parent;
  uint32_t mode;
  Owner owner;
  Call call() const { return {Op::kTmpfile, parent, {}}; }
};

struct Mkdir {
  using Reply = Attributes;
  uint64_t parent;
  const std::string& name;
  uint32_t mode;
  Owner owner;
  Call call() const { return {Op::kMkdir, parent, name}; }
};

struct Symlink {
  using Reply = Attributes;
  uint64_t parent;
  const std::string& name;
  const std::string& target;
  Owner owner;
  Call call() const { return {Op::kSymlink, parent, name}; }
};

struct Readlink {
  using Reply = std::string;
  uint64_t inode;
  Call call() const { return {Op::kReadlink, inode, {}}; }
};

// Seen by layers as the new name's: the entry it makes.
struct Link {
  using Reply = Attributes;
  uint64_t inode;
  uint64_t new_parent;
  const std::string& new_name;
  Call call() const { return {Op::kLink, new_parent, new_name}; }
};

struct Unlink {
  using Reply = void;
  uint64_t parent;
  const std::string& name;
  Call call() const { return {Op::kUnlink, parent, name}; }
};

struct Rmdir {
  using Reply = void;
  uint64_t parent;
  const std::string& name;
  Call call() const { return {Op::kRmdir, parent, name}; }
};

struct Rename {
  using Reply = void;
  uint64_t parent;
  const std::string& name;
  uint64_t new_parent;
  const std::string& new_name;
  unsigned flags;
  Call call() const { return {Op::kRename, parent, name}; }
};

struct ReadDirectory {
  using Reply = std::vector<DirectoryEntry>;
  uint64_t inode;
  Call call() const { return {Op::kReaddir, inode, {}}; }
};

// `handle`, in open, read, write and release: the open file the call goes
// through, as its caller (the adapter) names it; 0 for none. Only layers that
// keep something per open file read it (ControlLayer); the core does not.
struct Open {
  using Reply = void;
  uint64_t inode;
  int flags;
  uint64_t handle = 0;
  Call call() const { return {Op::kOpen, inode, {}}; }
};

struct Flush {
  using Reply = void;
  uint64_t inode;
  bool writer;
  Call call() const { return {Op::kFlush, inode, {}}; }
};

// Cannot fail: the handle is gone whatever a layer says.
struct Release {
  using Reply = void;
  uint64_t inode;
  uint64_t handle = 0;
  Call call() const { return {Op::kRelease, inode, {}}; }
};

struct Read {
  using Reply = size_t;
  uint64_t inode;
  uint64_t offset;
  std::span<std::byte> out;
  int flags;
  uint64_t handle = 0;
  Call call() const { return {Op::kRead, inode, {}}; }
};

struct Write {
  using Reply = size_t;
  uint64_t inode;
  uint64_t offset;
  std::span<const std::byte> data;
  int flags;
  uint64_t handle = 0;
  Call call() const { return {Op::kWrite, inode, {}}; }
};

// Faults and path rules see the destination, the file the copy changes.
struct CopyRange {
  using Reply = size_t;
  uint64_t in;
  uint64_t in_offset;
  uint64_t out;
  uint64_t out_offset;
  uint64_t length;
  int flags;
  Call call() const { return {Op::kCopyFileRange, out, {}}; }
};

struct Fallocate {
  using Reply = void;
  uint64_t inode;
  int mode;
  uint64_t offset;
  uint64_t length;
  Call call() const;  // a punch when the mode says so
};

struct Fsync {
  using Reply = void;
  uint64_t inode;
  bool datasync;
  Call call() const { return {datasync ? Op::kFdatasync : Op::kFsync, inode, {}}; }
};

struct Seek {
  using Reply = uint64_t;
  uint64_t inode;
  uint64_t offset;
  int whence;
  Call call() const { return {Op::kLseek, inode, {}}; }
};

struct Statfs {
  using Reply = FilesystemStats;
  Call call() const { return {Op::kStatfs, kRootInode, {}}; }
};

struct Setxattr {
  using Reply = void;
  uint64_t inode;
  const std::string& name;
  std::string_view value;
  int flags;
  Call call() const { return {Op::kSetxattr, inode, {}}; }
};

struct Getxattr {
  using Reply = std::string;
  uint64_t inode;
  const std::string& name;
  Call call() const { return {Op::kGetxattr, inode, {}}; }
};

struct Listxattr {
  using Reply = std::vector<std::string>;
  uint64_t inode;
  Call call() const { return {Op::kListxattr, inode, {}}; }
};

struct Removexattr {
  using Reply = void;
  uint64_t inode;
  const std::string& name;
  Call call() const { return {Op::kRemovexattr, inode, {}}; }
};

}  // namespace ops

// Every operation: the one list.
using Operation =
    std::variant<ops::Lookup, ops::Forget, ops::Getattr, ops::Setattr, ops::Create, ops::Tmpfile,
                 ops::Mkdir, ops::Symlink, ops::Readlink, ops::Link, ops::Unlink, ops::Rmdir,
                 ops::Rename, ops::ReadDirectory, ops::Open, ops::Flush, ops::Release, ops::Read,
                 ops::Write, ops::CopyRange, ops::Fallocate, ops::Fsync, ops::Seek, ops::Statfs,
                 ops::Setxattr, ops::Getxattr, ops::Listxattr, ops::Removexattr>;

// What request R returns.
template <typename R>
using ReplyOf = Result<typename R::Reply>;

namespace detail {
// std::variant of the distinct types among Ts, in their first order.
template <typename Variant, typename... Ts>
struct DistinctVariant {
  using type = Variant;
};
template <typename... Seen, typename T, typename... Ts>
struct DistinctVariant<std::variant<Seen...>, T, Ts...>
    : std::conditional_t<(std::is_same_v<T, Seen> || ...),
                         DistinctVariant<std::variant<Seen...>, Ts...>,
                         DistinctVariant<std::variant<Seen..., T>, Ts...>> {};

template <typename Operations>
struct Replies;
template <typename... Requests>
struct Replies<std::variant<Requests...>>
    : DistinctVariant<std::variant<>, ReplyOf<Requests>...> {};
}  // namespace detail

// Any operation's reply: one alternative per distinct reply type.
using OperationReply = detail::Replies<Operation>::type;

// `serve(request)` for the operation's request, its reply as an OperationReply:
// how a dispatch() reaches the overload for each request type.
template <typename Serve>
OperationReply serve_operation(const Operation& operation, Serve&& serve) {
  return std::visit(
      [&]<typename R>(const R& request) {
        // Placed, not converted: each reply type names its alternative.
        return OperationReply(std::in_place_type<ReplyOf<R>>, serve(request));
      },
      operation);
}

// Whether layers see R (it has a call()): every operation but forget.
template <typename R>
concept Seen = requires(const R& request) {
  { request.call() } -> std::same_as<Call>;
};

namespace detail {
template <typename Operations>
inline constexpr int kUnseen = 0;
template <typename... Requests>
inline constexpr int kUnseen<std::variant<Requests...>> = (int{!Seen<Requests>} + ...);
}  // namespace detail
// A request whose call() is missing or mistyped would pass every layer unseen.
static_assert(!Seen<ops::Forget> && detail::kUnseen<Operation> == 1,
              "every operation but forget has a const call() returning Call");

}  // namespace mimicfs
