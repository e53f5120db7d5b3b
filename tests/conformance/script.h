// SPDX-License-Identifier: Apache-2.0
// A conformance script: a sequence of syscalls, each run as a chosen user,
// written one statement per line (or separated by ';'), and the transcript of
// running it in a directory: every call's result or errno, then the final
// state of every entry (type, mode, owner, size, links, target, xattrs).
//
// The same script run in a directory of a kernel filesystem and in one of a
// mimicfs mount must give the same transcript, but for the differences
// docs/conformance.md lists (Differences, in differences.h).
//
//   statement := ['as' UID ':' GID [':' GROUP{,GROUP}]] OP ARG...
//
// A statement without `as` runs as root (uid 0, gid 0, no supplementary
// groups, every capability). Paths are relative to the script's own fresh
// directory ("." names it: root's, mode 0777); `@name255` and `@name256`
// stand for names of 255 and 256 characters. OP is one of:
//   creat P MODE               open(O_CREAT|O_WRONLY|O_TRUNC|O_NONBLOCK), close
//   open N P FLAGS [MODE]      keeps the descriptor as N (FLAGS: rdonly|wronly|
//                              rdwr|creat|excl|trunc|append|nofollow|directory|
//                              tmpfile|sync|dsync|nonblock|path, joined by '|')
//   close N | fsync N | fdatasync N
//   write N LEN | pwrite N OFF LEN | read N LEN | pread N OFF LEN
//   ftruncate N LEN | truncate P LEN
//   fallocate N MODE OFF LEN   (MODE: 0|keep_size|punch_hole|zero_range, '|')
//   copy N M LEN               copy_file_range from N's offset to M's
//   fchmod N MODE | fchown N UID GID
//   chmod P MODE | chown P UID GID | lchown P UID GID
//   mkdir P MODE | rmdir P | unlink P | mknod P TYPE MODE (fifo|sock|chr|blk|reg)
//   symlink TARGET P | link P Q | linkfd N P | readlink P
//   rename P Q [noreplace|exchange]
//   utimens P ATIME MTIME [nofollow] | futimens N ATIME MTIME  (now|omit|SECONDS)
//   setxattr P NAME VALUE [create|replace] | lsetxattr ... | getxattr P NAME
//   lgetxattr P NAME | listxattr P | llistxattr P | removexattr P NAME
//   stat P | lstat P | times P (lstat's atime and mtime) | readdir P
//   access P MODE (f or any of r, w, x) | umask MODE
#pragma once

#include <string>
#include <vector>

namespace mimicfs::conformance {

struct Script {
  std::string name;  // what it checks, unique in its table
  std::string text;
};

struct Transcript {
  std::vector<std::string> steps;  // one line per statement: "stmt -> result"
  std::vector<std::string> state;  // one line per entry, sorted by path
  std::string error;               // the script itself is wrong (a parse error)
};

// Runs `script` in `dir`, a fresh empty directory. Forks a child that takes
// the users' credentials in turn, so the calling process keeps its own.
Transcript run(const Script& script, const std::string& dir);

}  // namespace mimicfs::conformance
