// SPDX-License-Identifier: Apache-2.0
// The fixed table. The set-ID and ownership scripts are made from every file
// type x set-ID mode x caller; the rest are written out, one rule each.
#include <map>
#include <set>
#include <stdexcept>

#include "tests/conformance/table.h"

namespace mimicfs::conformance {
namespace {

// The scripts' users: the file's owner is 65534 and its group 65533; 65533
// is another user in that group, 65530 a stranger to both.

struct FileType {
  const char* name;
  const char* make;  // a statement that makes `f`
};

constexpr FileType kTypes[] = {
    {"reg", "creat f 0644"},          {"dir", "mkdir f 0755"},
    {"fifo", "mknod f fifo 0644"},    {"sock", "mknod f sock 0644"},
    {"chr", "mknod f chr 0644"},      {"blk", "mknod f blk 0644"},
};

constexpr const char* kSetIdModes[] = {"6755", "6555", "6745", "4755", "2755", "2745", "1777"};

// Ownership changes (chown(2) by root and by the owner), after which the
// kernel's filesystems clear the set-ID bits (chown_common,
// setattr_should_drop_sgid) or refuse the call (chown_ok, chgrp_ok).
struct Chown {
  const char* name;
  const char* statement;
};
constexpr Chown kChowns[] = {
    {"root-chgrp", "chown f 65534 65532"},
    {"root-chown", "chown f 0 -1"},
    {"root-same", "chown f 65534 65533"},
    {"owner-chgrp", "as 65534:65533:65533,65532 chown f -1 65532"},
    {"owner-same", "as 65534:65533:65533,65532 chown f 65534 65533"},
    {"owner-outside-chgrp", "as 65534:65531:65531,65532 chown f -1 65532"},
    {"owner-not-member", "as 65534:65534 chown f -1 65532"},
    {"owner-gives-away", "as 65534:65533:65533 chown f 65533 -1"},
    {"other", "as 65533:65533:65533,65532 chown f -1 65532"},
};

// Mode changes: the owner not in the file's group loses S_ISGID from its
// chmod (setattr_prepare); others may not chmod at all.
struct Chmod {
  const char* name;
  const char* statement;
};
constexpr Chmod kChmods[] = {
    {"root", "chmod f 7777"},
    {"owner-in-group", "as 65534:65533:65533 chmod f 6755"},
    {"owner-outside", "as 65534:65534 chmod f 6755"},
    {"owner-outside-sticky", "as 65534:65534 chmod f 3777"},
    {"other", "as 65533:65533:65533 chmod f 0777"},
};

// What changes a regular file's data or size, by a caller without
// CAP_FSETID: Linux clears S_ISUID, and S_ISGID when group execute is set or
// the caller is not in the file's group (file_remove_privs,
// setattr_should_drop_suidgid); root keeps both.
struct Modification {
  const char* name;
  const char* statements;  // with `{as}` for the caller
  Needs needs;
};
const Modification kModifications[] = {
    {"write", "{as} open 1 f wronly; {as} write 1 3; close 1", {}},
    {"append", "{as} open 1 f wronly|append; {as} write 1 3; close 1", {}},
    {"pwrite-past-end", "{as} open 1 f wronly; {as} pwrite 1 8192 3; close 1", {}},
    {"truncate", "{as} truncate f 1", {}},
    {"truncate-same-size", "{as} truncate f 0", {}},
    {"ftruncate", "{as} open 1 f wronly; {as} ftruncate 1 100; close 1", {}},
    {"open-trunc", "{as} open 1 f wronly|trunc; close 1", {}},
    {"fallocate", "{as} open 1 f wronly; {as} fallocate 1 0 0 4096; close 1", {false, {"allocate"}}},
    {"fallocate-keep-size", "{as} open 1 f wronly; {as} fallocate 1 keep_size 0 4096; close 1",
     {false, {"keep_size"}}},
    {"punch",
     "{as} open 1 f wronly; {as} fallocate 1 punch_hole|keep_size 0 4096; close 1",
     {false, {"punch_hole"}}},
    {"copy-file-range",
     "creat src 0644; open 2 src wronly; write 2 100; close 2; "
     "{as} open 2 src rdonly; {as} open 1 f wronly; {as} copy 2 1 10; close 1; close 2",
     {}},
    {"read-only", "{as} open 1 f rdonly; {as} read 1 10; close 1", {}},
};

struct Caller {
  const char* name;
  const char* as;  // empty: root
};
constexpr Caller kWriters[] = {
    {"root", ""},
    {"owner-in-group", "as 65534:65533:65533"},
    {"owner-outside", "as 65534:65534"},
    {"other-in-group", "as 65533:65533:65533"},
    {"stranger", "as 65530:65530"},
};

constexpr const char* kFileModes[] = {"6777", "6767", "6747", "4777", "2777", "2767", "0777"};

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  size_t at = 0;
  while ((at = text.find(from, at)) != std::string::npos) {
    text.replace(at, from.size(), to);
    at += to.size();
  }
  return text;
}

void add_ownership_scripts(std::vector<TableScript>& table) {
  for (const FileType& type : kTypes) {
    for (const char* mode : kSetIdModes) {
      const std::string setup =
          std::string(type.make) + "; chown f 65534 65533; chmod f " + mode + "; ";
      for (const Chown& c : kChowns) {
        table.push_back({{std::string("chown/") + type.name + "/" + mode + "/" + c.name,
                          setup + c.statement + "; stat f"},
                         {}});
      }
      for (const Chmod& c : kChmods) {
        table.push_back({{std::string("chmod/") + type.name + "/" + mode + "/" + c.name,
                          setup + c.statement + "; stat f"},
                         {}});
      }
    }
  }
  // A symbolic link: lchown changes the link itself; chown and chmod follow it.
  const std::string link = "creat t 0644; chown t 65534 65533; chmod t 6755; symlink t f; ";
  table.push_back({{"symlink/lchown-root", link + "lchown f 65534 65533; lstat f; stat f"}, {}});
  table.push_back({{"symlink/lchown-owner",
                    link + "lchown f 65534 65533; as 65534:65533:65533,65532 lchown f -1 65532"},
                   {}});
  table.push_back({{"symlink/lchown-other", link + "as 65533:65533 lchown f 65533 65533"}, {}});
  table.push_back({{"symlink/chown-follows", link + "chown f 65534 65532; lstat f; stat t"}, {}});
  table.push_back({{"symlink/chmod-follows", link + "chmod f 0600; lstat f; stat t"}, {}});
}

void add_modification_scripts(std::vector<TableScript>& table) {
  for (const char* mode : kFileModes) {
    for (const Caller& caller : kWriters) {
      for (const Modification& m : kModifications) {
        std::string text = "creat f 0644; open 9 f wronly; write 9 50; close 9; "
                           "chown f 65534 65533; chmod f " + std::string(mode) + "; " +
                           replace_all(m.statements, "{as} ", caller.as[0] ? std::string(caller.as) + " " : "") +
                           "; stat f";
        table.push_back({{std::string("modify/") + mode + "/" + caller.name + "/" + m.name, text},
                         m.needs});
      }
    }
  }
}

// One rule each: name, script.
const std::vector<std::pair<const char*, const char*>> kNamespace = {
    // create, mkdir, mknod
    {"create/exists-excl", "creat a 0644; open 1 a wronly|creat|excl 0644"},
    {"create/excl-dangling-symlink", "symlink nowhere l; open 1 l wronly|creat|excl 0644"},
    {"create/through-dangling-symlink", "symlink target l; open 1 l wronly|creat 0640; close 1; stat target"},
    {"create/in-missing-dir", "creat d/a 0644"},
    {"create/under-a-file", "creat a 0644; creat a/b 0644; mkdir a/d 0755"},
    {"create/name255", "creat @name255 0644; stat @name255"},
    {"create/name256", "creat @name256 0644; mkdir @name256 0755; symlink x @name256"},
    {"create/lookup-name256", "stat @name256; unlink @name256"},
    {"create/umask", "umask 027; creat a 0777; mkdir d 0777; mknod p fifo 0666"},
    {"create/no-write-permission",
     "mkdir d 0755; chown d 65534 65534; as 65533:65533 creat d/a 0644; "
     "as 65534:65534 creat d/b 0644"},
    {"create/no-search-permission",
     "mkdir d 0766; creat d/a 0644; as 65533:65533 stat d/a; as 65533:65533 readdir d"},
    {"create/sgid-directory-inherits",
     "mkdir d 2775; chown d 0 65532; as 65534:65534 creat d/a 0644; as 65534:65534 mkdir d/s 0755; "
     "as 65534:65534 mknod d/p fifo 0644; stat d/a; stat d/s"},
    {"create/sgid-directory-drops-sgid-of-file",
     "mkdir d 2777; chown d 0 65532; as 65534:65534 creat d/a 2755; as 65534:65534 mkdir d/s 2755"},
    {"create/group-of-creator", "mkdir d 0777; as 65534:65531:65532 creat d/a 0644"},
    {"mkdir/exists", "mkdir d 0755; mkdir d 0755; creat f 0644; mkdir f 0755"},
    {"mkdir/nlink", "mkdir d 0755; mkdir d/a 0755; mkdir d/b 0755; stat d; rmdir d/a; stat d"},
    {"mkdir/setid-bits", "mkdir d 7777; stat d"},
    {"mknod/device-by-user", "mkdir d 0777; as 65534:65534 mknod d/c chr 0644; as 65534:65534 mknod d/p fifo 0644"},
    {"mknod/exists", "mknod p fifo 0644; mknod p sock 0644"},
    {"mknod/regular", "mknod r reg 0640; stat r"},
    // symlink, link, readlink
    {"symlink/readlink", "symlink some/where l; readlink l; lstat l"},
    {"symlink/exists", "creat a 0644; symlink x a"},
    {"symlink/readlink-of-file", "creat a 0644; readlink a"},
    {"symlink/loop", "symlink l2 l1; symlink l1 l2; open 1 l1 rdonly; stat l1; lstat l1"},
    {"symlink/self-loop", "symlink l l; open 1 l wronly|creat 0644"},
    {"symlink/nofollow", "creat a 0644; symlink a l; open 1 l rdonly|nofollow; open 2 a rdonly|nofollow"},
    {"symlink/long-target", "symlink @name255/@name255 l; readlink l"},
    {"symlink/dangling-stat", "symlink nowhere l; stat l; lstat l"},
    {"symlink/directory-through",
     "mkdir d 0755; symlink d l; creat l/a 0644; readdir d; open 1 l rdonly|directory; "
     "open 2 l rdonly|directory|nofollow"},
    {"link/basic", "creat a 0644; link a b; stat a; unlink a; stat b"},
    {"link/directory", "mkdir d 0755; link d e"},
    {"link/exists", "creat a 0644; creat b 0644; link a b"},
    {"link/missing", "link nothing b"},
    {"link/symlink-itself", "symlink target l; link l m; lstat m"},
    {"link/by-other-user", "creat a 0600; mkdir d 0777; as 65534:65534 link a d/b"},
    // unlink, rmdir
    {"unlink/directory", "mkdir d 0755; unlink d"},
    {"unlink/missing", "unlink a"},
    {"unlink/open-file", "creat a 0644; open 1 a rdwr; write 1 10; unlink a; pread 1 0 10; fsync 1; close 1"},
    {"rmdir/not-empty", "mkdir d 0755; creat d/a 0644; rmdir d"},
    {"rmdir/file", "creat a 0644; rmdir a"},
    {"rmdir/dot", "mkdir d 0755; rmdir d/.; rmdir d/.."},
    {"rmdir/symlink-to-dir", "mkdir d 0755; symlink d l; rmdir l"},
    {"rmdir/then-nlink", "mkdir d 0755; mkdir e 0755; stat .; rmdir d; stat ."},
    {"sticky/unlink-by-other",
     "mkdir t 1777; as 65534:65534 creat t/a 0666; as 65533:65533 unlink t/a; "
     "as 65533:65533 rename t/a t/b; chown t 65532 65532; as 65532:65532 rename t/a t/c; "
     "as 65534:65534 unlink t/c"},
    {"sticky/rmdir-by-other",
     "mkdir t 1777; as 65534:65534 mkdir t/d 0777; as 65533:65533 rmdir t/d; "
     "as 65534:65534 rmdir t/d"},
    {"sticky/rename-over-other",
     "mkdir t 1777; as 65534:65534 creat t/a 0666; as 65533:65533 creat t/b 0666; "
     "as 65533:65533 rename t/b t/a; as 65534:65534 rename t/a t/b"},
    // rename
    {"rename/file-over-file", "creat a 0644; creat b 0600; rename a b; stat b"},
    {"rename/dir-over-empty-dir", "mkdir a 0755; mkdir b 0700; rename a b; stat b"},
    {"rename/dir-over-nonempty", "mkdir a 0755; mkdir b 0755; creat b/x 0644; rename a b"},
    {"rename/dir-over-file", "mkdir a 0755; creat b 0644; rename a b"},
    {"rename/file-over-dir", "creat a 0644; mkdir b 0755; rename a b"},
    {"rename/into-own-subdir", "mkdir a 0755; mkdir a/b 0755; rename a a/b/c"},
    {"rename/missing", "rename a b"},
    {"rename/same-name", "creat a 0644; rename a a; stat a"},
    {"rename/hard-links-of-one-file", "creat a 0644; link a b; rename a b; stat a; stat b"},
    {"rename/noreplace", "creat a 0644; creat b 0644; rename a b noreplace; rename a c noreplace"},
    {"rename/exchange", "creat a 0644; mkdir b 0700; creat b/x 0644; rename a b exchange; stat a; stat b"},
    {"rename/exchange-missing", "creat a 0644; rename a b exchange"},
    {"rename/across-directories",
     "mkdir d 0755; mkdir e 0755; mkdir d/s 0755; rename d/s e/s; stat d; stat e"},
    {"rename/dot", "mkdir d 0755; rename d/. e; rename d/.. e"},
    {"rename/no-write-permission",
     "mkdir d 0755; creat d/a 0644; mkdir e 0777; as 65534:65534 rename d/a e/a"},
    {"rename/dir-needs-write-to-itself",
     "mkdir p 0777; mkdir q 0777; mkdir p/d 0555; chown p/d 65534 65534; as 65533:65533 rename p/d q/d; "
     "as 65534:65534 rename p/d q/d"},
    {"rename/name256", "creat a 0644; rename a @name256"},
    {"rename/symlink", "symlink t l; rename l m; readlink m"},
    // open flags
    {"open/directory-for-write", "mkdir d 0755; open 1 d wronly; open 2 d rdwr; open 3 d rdonly; close 3"},
    {"open/o-directory-on-file", "creat a 0644; open 1 a rdonly|directory"},
    {"open/trunc", "creat a 0644; open 1 a wronly; write 1 100; close 1; open 1 a rdonly|trunc; "
                   "close 1; open 2 a wronly|trunc; close 2; stat a"},
    {"open/trunc-without-write-permission",
     "creat a 0644; open 1 a wronly; write 1 10; close 1; as 65534:65534 open 2 a rdonly|trunc"},
    {"open/append",
     "creat a 0644; open 1 a wronly|append; write 1 10; pwrite 1 0 5; close 1; open 2 a rdonly; "
     "read 2 100; close 2; stat a"},
    {"open/permissions",
     "creat a 0640; chown a 65534 65533; as 65533:65533 open 1 a rdonly; as 65533:65533 open 2 a wronly; "
     "as 65530:65530 open 3 a rdonly; as 65534:65534 open 4 a rdwr"},
    {"open/excl-without-creat", "creat a 0644; open 1 a rdonly|excl; close 1"},
    {"open/creat-in-readonly-dir",
     "mkdir d 0555; chown d 65534 65534; as 65534:65534 open 1 d/a wronly|creat 0644"},
    {"open/missing", "open 1 a rdonly"},
    {"open/path-through-file", "creat a 0644; open 1 a/b rdonly"},
    {"open/name256", "open 1 @name256 rdonly"},
    {"read/write-basics",
     "creat a 0644; open 1 a rdwr; write 1 100; pwrite 1 10000 5; pread 1 0 200; pread 1 9990 30; "
     "pread 1 20000 10; read 1 10; close 1; stat a"},
    {"read/on-write-only", "creat a 0644; open 1 a wronly; read 1 10; close 1"},
    {"write/on-read-only", "creat a 0644; open 1 a rdonly; write 1 10; close 1"},
    {"read/directory", "mkdir d 0755; open 1 d rdonly; read 1 10; close 1"},
    {"truncate/grow-and-shrink",
     "creat a 0644; truncate a 10000; stat a; open 1 a rdwr; pwrite 1 100 10; ftruncate 1 50; "
     "pread 1 0 100; ftruncate 1 200; pread 1 0 300; close 1; stat a"},
    {"truncate/directory", "mkdir d 0755; truncate d 0"},
    {"truncate/without-write-permission",
     "creat a 0644; chown a 65534 65534; as 65533:65533 truncate a 0; as 65534:65534 truncate a 5"},
    {"truncate/read-only-descriptor", "creat a 0666; open 1 a rdonly; ftruncate 1 10; close 1"},
    {"truncate/through-symlink", "creat a 0644; symlink a l; truncate l 7; stat a"},
    {"truncate/fifo", "mknod p fifo 0666; truncate p 0"},
    // tmpfile
    {"tmpfile/linked", "mkdir d 0755; open 1 d rdwr|tmpfile 0640; write 1 10; linkfd 1 d/a; close 1; stat d/a"},
    {"tmpfile/excl-cannot-link", "open 1 . rdwr|tmpfile|excl 0640; linkfd 1 a; close 1"},
    {"tmpfile/needs-write-mode", "open 1 . rdonly|tmpfile 0640"},
    {"tmpfile/not-a-directory", "creat a 0644; open 1 a rdwr|tmpfile 0640"},
    {"tmpfile/sgid-directory",
     "mkdir d 2777; chown d 0 65532; as 65534:65534 open 1 d rdwr|tmpfile 2755; "
     "as 65534:65534 linkfd 1 d/a; close 1"},
    // times
    {"utimens/explicit", "creat a 0644; utimens a 100 200; times a; utimens a omit 300; times a; "
                         "utimens a 400 omit; times a"},
    {"utimens/now-and-omit", "creat a 0644; utimens a 100 200; utimens a now omit; times a; "
                             "utimens a omit omit; times a"},
    {"utimens/explicit-by-non-owner",
     "creat a 0666; utimens a 100 200; as 65534:65534 utimens a 300 300; times a"},
    {"utimens/now-by-writer",
     "creat a 0666; utimens a 100 200; as 65534:65534 utimens a now now; times a"},
    {"utimens/now-without-write",
     "creat a 0644; utimens a 100 200; as 65534:65534 utimens a now now; "
     "as 65534:65534 utimens a omit omit; times a"},
    {"utimens/owner-explicit", "creat a 0444; chown a 65534 65534; utimens a 100 200; "
                               "as 65534:65534 utimens a 300 400; times a"},
    {"utimens/symlink-nofollow", "creat a 0644; utimens a 100 100; symlink a l; utimens l 200 300 nofollow; "
                                 "times l; times a; utimens l 500 600; times a"},
    {"utimens/futimens", "creat a 0644; open 1 a rdonly; futimens 1 100 200; close 1; times a"},
    {"utimens/directory", "mkdir d 0755; utimens d 100 200; times d"},
    // xattrs
    {"xattr/user-set-get-list-remove",
     "creat a 0644; setxattr a user.one 1; setxattr a user.two 22; getxattr a user.one; listxattr a; "
     "removexattr a user.one; getxattr a user.one; listxattr a"},
    {"xattr/create-replace",
     "creat a 0644; setxattr a user.x 1 replace; setxattr a user.x 1 create; setxattr a user.x 2 create; "
     "setxattr a user.x 3 replace; getxattr a user.x"},
    {"xattr/empty-value", "creat a 0644; setxattr a user.e ''; getxattr a user.e; listxattr a"},
    {"xattr/missing", "creat a 0644; getxattr a user.none; removexattr a user.none"},
    {"xattr/unknown-namespace", "creat a 0644; setxattr a other.x 1; getxattr a other.x; setxattr a user 1"},
    {"xattr/trusted-by-root", "creat a 0644; setxattr a trusted.t 1; getxattr a trusted.t; listxattr a"},
    {"xattr/trusted-by-user",
     "creat a 0666; setxattr a trusted.t 1; as 65534:65534 setxattr a trusted.u 1; "
     "as 65534:65534 getxattr a trusted.t; as 65534:65534 listxattr a"},
    {"xattr/user-needs-write",
     "creat a 0644; setxattr a user.x 1; as 65534:65534 setxattr a user.y 1; "
     "as 65534:65534 getxattr a user.x; chmod a 0600; as 65534:65534 getxattr a user.x"},
    {"xattr/user-on-fifo", "mknod p fifo 0666; setxattr p user.x 1; getxattr p user.x; listxattr p"},
    {"xattr/user-on-symlink", "symlink t l; lsetxattr l user.x 1; lgetxattr l user.x; llistxattr l"},
    {"xattr/trusted-on-symlink", "symlink t l; lsetxattr l trusted.x 1; lgetxattr l trusted.x"},
    {"xattr/follows-symlink", "creat a 0644; symlink a l; setxattr l user.x 1; getxattr a user.x"},
    {"xattr/on-directory", "mkdir d 0755; setxattr d user.x 1; getxattr d user.x; listxattr d"},
    {"xattr/user-sticky-dir",
     "mkdir t 1777; chown t 65534 65534; setxattr t user.x 1; as 65533:65533 setxattr t user.y 1"},
    {"xattr/security-by-owner",
     "creat a 0644; chown a 65534 65534; as 65534:65534 setxattr a security.s 1; getxattr a security.s"},
    {"xattr/long-name", "creat a 0644; setxattr a user.@name255 1; setxattr a user.@name256 1"},
    {"xattr/survives-rename-and-link",
     "creat a 0644; setxattr a user.x v; rename a b; link b c; getxattr c user.x"},
};

// Scripts that need a profile's fallocate modes or O_TMPFILE.
const std::map<std::string, Needs> kNeeds = {
    {"tmpfile/linked", {true, {}}},
    {"tmpfile/excl-cannot-link", {true, {}}},
    {"tmpfile/needs-write-mode", {true, {}}},
    {"tmpfile/not-a-directory", {true, {}}},
    {"tmpfile/sgid-directory", {true, {}}},
};

const std::vector<TableScript> kFallocate = {
    {{"fallocate/allocate-extends",
      "creat a 0644; open 1 a rdwr; fallocate 1 0 0 10000; close 1; stat a"},
     {false, {"allocate"}}},
    {{"fallocate/keep-size",
      "creat a 0644; open 1 a rdwr; write 1 100; fallocate 1 keep_size 0 10000; pread 1 0 200; "
      "close 1; stat a"},
     {false, {"keep_size"}}},
    {{"fallocate/punch",
      "creat a 0644; open 1 a rdwr; write 1 20000; fallocate 1 punch_hole|keep_size 4096 8192; "
      "pread 1 0 20000; close 1; stat a"},
     {false, {"punch_hole"}}},
    {{"fallocate/punch-needs-keep-size",
      "creat a 0644; open 1 a rdwr; write 1 20000; fallocate 1 punch_hole 4096 8192; close 1"},
     {false, {"punch_hole"}}},
    {{"fallocate/zero-range",
      "creat a 0644; open 1 a rdwr; write 1 20000; fallocate 1 zero_range 1000 3000; "
      "fallocate 1 zero_range 19000 5000; pread 1 0 30000; close 1; stat a"},
     {false, {"zero_range"}}},
    {{"fallocate/read-only-descriptor",
      "creat a 0644; open 1 a rdonly; fallocate 1 0 0 4096; close 1"},
     {false, {"allocate"}}},
    {{"fallocate/append-descriptor",
      "creat a 0644; open 1 a wronly|append; fallocate 1 0 0 4096; close 1"},
     {false, {"allocate"}}},
    {{"fallocate/zero-length", "creat a 0644; open 1 a wronly; fallocate 1 0 0 0; close 1"},
     {false, {"allocate"}}},
};

}  // namespace

std::vector<TableScript> fixed_table() {
  std::vector<TableScript> table;
  add_ownership_scripts(table);
  add_modification_scripts(table);
  for (const auto& [name, text] : kNamespace) {
    auto needs = kNeeds.find(name);
    table.push_back({{name, text}, needs == kNeeds.end() ? Needs{} : needs->second});
  }
  table.insert(table.end(), kFallocate.begin(), kFallocate.end());
  std::set<std::string> names;
  for (const TableScript& t : table) {
    if (!names.insert(t.script.name).second) {
      throw std::logic_error("two conformance scripts named " + t.script.name);
    }
  }
  return table;
}

}  // namespace mimicfs::conformance
