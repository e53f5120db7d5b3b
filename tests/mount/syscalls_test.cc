// SPDX-License-Identifier: Apache-2.0
// Every call a database server makes, as real syscalls through the kernel and a
// mounted mimicfs: open flags, positioned I/O, syncs, truncation, fallocate modes,
// SEEK_DATA/SEEK_HOLE, the namespace, xattrs, statfs, locks, the hidden control
// directory and running out of space.
#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <grp.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/support/mounted_volume.h"

namespace {

using mimicfs::testing::make_temp_dir;
using mimicfs::testing::MountedVolume;
using mimicfs::testing::ProfileFile;

constexpr off_t kKiB = 1024;
constexpr off_t kMiB = 1024 * kKiB;

// Closes the descriptor when the test leaves its scope, even on a failed ASSERT.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  // Closes now; returns close(2)'s result.
  int close() {
    const int r = ::close(fd_);
    fd_ = -1;
    return r;
  }

 private:
  int fd_;
};

std::string errno_text() { return std::strerror(errno); }

std::string pattern(size_t length, char seed) {
  std::string s(length, '\0');
  for (size_t i = 0; i < length; ++i) s[i] = static_cast<char>('A' + (seed + i * 7) % 26);
  return s;
}

// pwrite all of `data`, or fail the test.
void write_at(int fd, const std::string& data, off_t offset) {
  ASSERT_EQ(pwrite(fd, data.data(), data.size(), offset), static_cast<ssize_t>(data.size()))
      << errno_text();
}

std::string read_at(int fd, size_t length, off_t offset) {
  std::string out(length, '\0');
  const ssize_t n = pread(fd, out.data(), length, offset);
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

struct stat fstat_of(int fd) {
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0) << errno_text();
  return st;
}

uint64_t op_count(const nlohmann::json& stats, const std::string& op) {
  if (!stats["ops"].contains(op)) return 0;
  return stats["ops"][op]["count"].get<uint64_t>();
}

uint64_t op_errors(const nlohmann::json& stats, const std::string& op, const std::string& error) {
  if (!stats["ops"].contains(op) || !stats["ops"][op]["errors"].contains(error)) return 0;
  return stats["ops"][op]["errors"][error].get<uint64_t>();
}

std::string getxattr_string(const std::string& path, const std::string& name) {
  char buffer[256];
  const ssize_t n = getxattr(path.c_str(), name.c_str(), buffer, sizeof buffer);
  return n < 0 ? std::string() : std::string(buffer, n);
}

std::set<std::string> list_directory(const std::string& path) {
  std::set<std::string> names;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(path.c_str()), closedir);
  EXPECT_TRUE(dir) << path << ": " << errno_text();
  if (!dir) return names;
  while (const dirent* entry = readdir(dir.get())) names.insert(entry->d_name);
  return names;
}

int rename2(const std::string& from, const std::string& to, unsigned flags) {
  return static_cast<int>(
      syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags));
}

// --- open flags ---------------------------------------------------------------

TEST(OpenFlags, ODirectAlignedPwriteReadsBack) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ideal");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("redo.log").c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  constexpr size_t kLength = 16 * kKiB;
  std::unique_ptr<char, decltype(&std::free)> out(static_cast<char*>(aligned_alloc(4096, kLength)),
                                                  &std::free);
  std::unique_ptr<char, decltype(&std::free)> in(static_cast<char*>(aligned_alloc(4096, kLength)),
                                                 &std::free);
  const std::string data = pattern(kLength, 3);
  std::memcpy(out.get(), data.data(), kLength);
  ASSERT_EQ(pwrite(fd.get(), out.get(), kLength, 8 * kKiB), static_cast<ssize_t>(kLength))
      << errno_text();
  std::memset(in.get(), 0, kLength);
  ASSERT_EQ(pread(fd.get(), in.get(), kLength, 8 * kKiB), static_cast<ssize_t>(kLength))
      << errno_text();
  EXPECT_EQ(std::memcmp(in.get(), data.data(), kLength), 0);
  EXPECT_EQ(fstat_of(fd.get()).st_size, 24 * kKiB);
}

// Without the writeback cache the kernel turns every O_SYNC / O_DSYNC write into
// a FUSE FSYNC after the WRITE (generic_write_sync), so the daemon sees each one:
// an O_DSYNC write's with FUSE_FSYNC_FDATASYNC (vfs_fsync_range's datasync).
TEST(OpenFlags, OSyncAndODsyncWritesEachReachTheDaemonAsFsyncOrFdatasync) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd sync_fd(open(vol.file("sync").c_str(), O_CREAT | O_RDWR | O_SYNC, 0644));
  Fd dsync_fd(open(vol.file("dsync").c_str(), O_CREAT | O_RDWR | O_DSYNC, 0644));
  ASSERT_TRUE(sync_fd.ok() && dsync_fd.ok()) << errno_text();
  vol.reset_counters();
  write_at(sync_fd.get(), "first", 0);
  write_at(sync_fd.get(), "second", 5);
  write_at(dsync_fd.get(), "third", 0);
  EXPECT_EQ(read_at(sync_fd.get(), 11, 0), "firstsecond");
  EXPECT_EQ(read_at(dsync_fd.get(), 5, 0), "third");
  const nlohmann::json stats = vol.stats();
  EXPECT_EQ(op_count(stats, "fsync"), 2u);
  EXPECT_EQ(op_count(stats, "fdatasync"), 1u);
}

TEST(OpenFlags, TwoAppendingWritersEachLandAtEndOfFile) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("binlog");
  Fd plain(open(path.c_str(), O_CREAT | O_WRONLY, 0644));
  ASSERT_TRUE(plain.ok()) << errno_text();
  write_at(plain.get(), "head:", 0);
  Fd first(open(path.c_str(), O_WRONLY | O_APPEND));
  Fd second(open(path.c_str(), O_WRONLY | O_APPEND));
  ASSERT_TRUE(first.ok() && second.ok()) << errno_text();
  ASSERT_EQ(write(first.get(), "aaa", 3), 3) << errno_text();
  ASSERT_EQ(write(second.get(), "bbbb", 4), 4) << errno_text();
  // pwrite on an O_APPEND descriptor ignores the offset on Linux.
  ASSERT_EQ(pwrite(first.get(), "cc", 2, 0), 2) << errno_text();
  ASSERT_EQ(write(second.get(), "d", 1), 1) << errno_text();
  Fd reader(open(path.c_str(), O_RDONLY));
  EXPECT_EQ(read_at(reader.get(), 100, 0), "head:aaabbbbccd");
  EXPECT_EQ(fstat_of(reader.get()).st_size, 15);
}

TEST(OpenFlags, OTruncEmptiesAnExistingFile) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ideal");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("ib_logfile0");
  {
    Fd fd(open(path.c_str(), O_CREAT | O_WRONLY, 0644));
    ASSERT_TRUE(fd.ok()) << errno_text();
    write_at(fd.get(), std::string(64 * kKiB, 'x'), 0);
  }
  Fd fd(open(path.c_str(), O_RDWR | O_TRUNC));
  ASSERT_TRUE(fd.ok()) << errno_text();
  EXPECT_EQ(fstat_of(fd.get()).st_size, 0);
  EXPECT_EQ(fstat_of(fd.get()).st_blocks, 0);
  EXPECT_EQ(read_at(fd.get(), 10, 0), "");
  EXPECT_EQ(vol.file_stats("ib_logfile0")["size"], 0);
  EXPECT_EQ(vol.file_stats("ib_logfile0")["allocated_bytes"], 0);
}

TEST(OpenFlags, OCreatOExclOnExistingFileFailsWithEexist) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd created(open(vol.file("t1.ibd").c_str(), O_CREAT | O_EXCL | O_RDWR, 0640));
  ASSERT_TRUE(created.ok()) << errno_text();
  EXPECT_EQ(open(vol.file("t1.ibd").c_str(), O_CREAT | O_EXCL | O_RDWR, 0640), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(fstat_of(created.get()).st_mode & 07777, 0640u);
}

// --- positioned I/O -------------------------------------------------------------

TEST(PreadPwrite, RoundTripAtOddOffsets) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("odd").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  const std::string a = pattern(1001, 1), b = pattern(7, 2), c = pattern(70001, 3);
  write_at(fd.get(), a, 13);
  write_at(fd.get(), b, 511);   // straddles the 512 B unit boundary
  write_at(fd.get(), c, 4093);  // straddles a page boundary
  std::string expected(4093 + c.size(), '\0');
  expected.replace(13, a.size(), a);
  expected.replace(511, b.size(), b);
  expected.replace(4093, c.size(), c);
  EXPECT_EQ(fstat_of(fd.get()).st_size, static_cast<off_t>(expected.size()));
  EXPECT_EQ(read_at(fd.get(), expected.size() + 100, 0), expected);
  EXPECT_EQ(read_at(fd.get(), 3, 512), expected.substr(512, 3));
  EXPECT_EQ(read_at(fd.get(), 10, static_cast<off_t>(expected.size()) - 4),
            expected.substr(expected.size() - 4));
  EXPECT_EQ(read_at(fd.get(), 10, static_cast<off_t>(expected.size()) + 5), "");
}

TEST(PreadPwrite, HolesReadAsZeros) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("sparse").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  write_at(fd.get(), "start", 0);
  write_at(fd.get(), "end", kMiB);
  EXPECT_EQ(read_at(fd.get(), kMiB - 5, 5), std::string(kMiB - 5, '\0'));
  EXPECT_EQ(read_at(fd.get(), 3, kMiB), "end");
  // Only the two 512 B units written are allocated.
  EXPECT_EQ(fstat_of(fd.get()).st_blocks, 2);
  EXPECT_EQ(vol.file_stats("sparse")["holes"], 1);
}

// --- fsync ----------------------------------------------------------------------

TEST(Sync, FsyncAndFdatasyncSucceedAndAreCounted) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("ibdata1").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  write_at(fd.get(), "page", 0);
  vol.reset_counters();
  EXPECT_EQ(fsync(fd.get()), 0) << errno_text();
  EXPECT_EQ(fdatasync(fd.get()), 0) << errno_text();
  EXPECT_EQ(fsync(fd.get()), 0) << errno_text();
  const nlohmann::json stats = vol.stats();
  EXPECT_EQ(op_count(stats, "fsync"), 2u);
  EXPECT_EQ(op_count(stats, "fdatasync"), 1u);
  EXPECT_TRUE(stats["ops"]["fsync"]["errors"].empty());
}

// Databases fsync the directory after creating or renaming a file in it.
TEST(Sync, FsyncOfADirectorySucceeds) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ASSERT_EQ(mkdir(vol.file("db").c_str(), 0755), 0) << errno_text();
  { Fd fd(open(vol.file("db/t.ibd").c_str(), O_CREAT | O_WRONLY, 0644)); }
  Fd dir(open(vol.file("db").c_str(), O_RDONLY | O_DIRECTORY));
  ASSERT_TRUE(dir.ok()) << errno_text();
  EXPECT_EQ(fsync(dir.get()), 0) << errno_text();
  EXPECT_EQ(fdatasync(dir.get()), 0) << errno_text();
  Fd root(open(vol.path().c_str(), O_RDONLY | O_DIRECTORY));
  EXPECT_EQ(fsync(root.get()), 0) << errno_text();
}

// --- the kernel's attribute cache ------------------------------------------------

// The kernel keeps attributes for the mount's attr_timeout; what changes them
// behind its back must reach it before the call that changed them returns. On
// xfs a sync allocates the delayed blocks with speculative preallocation past
// EOF, and the last close trims it: st_blocks moves at both.
TEST(AttributeCache, StBlocksIsCurrentAfterASyncACloseAndCtlSync) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("xfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("t.ibd");
  Fd fd(open(path.c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  write_at(fd.get(), pattern(256 * kKiB, 1), 0);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0) << errno_text();
  EXPECT_EQ(st.st_blocks, 512) << "delayed blocks count, before any allocation";
  ASSERT_EQ(fsync(fd.get()), 0) << errno_text();
  ASSERT_EQ(stat(path.c_str(), &st), 0) << errno_text();
  EXPECT_EQ(st.st_blocks, 1024) << "the sync's speculative preallocation";
  ASSERT_EQ(fd.close(), 0) << errno_text();
  ASSERT_EQ(stat(path.c_str(), &st), 0) << errno_text();
  EXPECT_EQ(st.st_blocks, 512) << "preallocation trimmed at the last close";

  // `ctl sync` allocates another file's delayed blocks, preallocation included.
  const std::string other = vol.file("u.ibd");
  Fd writer(open(other.c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(writer.ok()) << errno_text();
  write_at(writer.get(), pattern(256 * kKiB, 2), 0);
  ASSERT_EQ(fstat(writer.get(), &st), 0) << errno_text();
  ASSERT_EQ(st.st_blocks, 512);
  ASSERT_EQ(vol.ctl("sync"), 0);
  ASSERT_EQ(fstat(writer.get(), &st), 0) << errno_text();
  EXPECT_EQ(st.st_blocks, 1024) << "ctl sync's allocation";
}

// With attributes cached, stat(2) of an unchanged file costs no round trip.
TEST(AttributeCache, RepeatedStatsOfAnUnchangedFileAreServedByTheKernel) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ideal");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("t.ibd");
  {
    Fd fd(open(path.c_str(), O_CREAT | O_RDWR, 0644));
    ASSERT_TRUE(fd.ok()) << errno_text();
    write_at(fd.get(), pattern(8 * kKiB, 3), 0);
  }
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0) << errno_text();
  vol.reset_counters();
  for (int i = 0; i < 50; ++i) ASSERT_EQ(stat(path.c_str(), &st), 0) << errno_text();
  EXPECT_EQ(st.st_size, 8 * kKiB);
  // At most one expiry of the one-second timeout during the loop.
  EXPECT_LE(op_count(vol.stats(), "getattr"), 2u);
}

// --- set-user-ID and set-group-ID bits --------------------------------------------

// Runs `action` in a child as the unprivileged user 65534 (no CAP_FSETID)
// with gid `gid` and supplementary `groups`; its exit status (0: every call
// in it succeeded).
int as_user(gid_t gid, std::vector<gid_t> groups, const std::function<bool()>& action) {
  const pid_t child = fork();
  if (child == 0) {
    if (setgroups(groups.size(), groups.data()) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(65534, 65534, 65534) != 0) {
      _exit(2);
    }
    _exit(action() ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// As user 65534 in group 65534 alone.
int as_nobody(const std::function<bool()>& action) { return as_user(65534, {}, action); }

// The mode alone (statx STATX_MODE): the kernel answers from its cache unless
// the mode itself was invalidated, where stat(2) would refresh after any write.
mode_t mode_of(const std::string& path) {
  struct statx stx {};
  EXPECT_EQ(statx(AT_FDCWD, path.c_str(), 0, STATX_MODE, &stx), 0) << path << ": " << errno_text();
  return stx.stx_mode & 07777;
}

// As Linux's VFS clears them, which the filesystem does on the kernel's word
// (FUSE_HANDLE_KILLPRIV_V2): a write, a truncate and an open with O_TRUNC by a
// caller without CAP_FSETID clear S_ISUID, and S_ISGID when group execute is
// set; a chown clears both, even by root; root's own writes keep them. The
// mode is read back at once, within the attribute timeout, from the kernel's
// cache unless the daemon invalidated it.
TEST(SetIdBits, ClearedAsLinuxClearsThem) {
  MIMICFS_REQUIRE_MOUNTABLE();
  if (geteuid() != 0) GTEST_SKIP() << "needs root to write as another user";
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("tool");
  { Fd fd(open(path.c_str(), O_CREAT | O_WRONLY, 0644)); }
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0) << errno_text();
  auto reset = [&](mode_t mode) {
    ASSERT_EQ(chmod(path.c_str(), mode), 0) << errno_text();
    ASSERT_EQ(mode_of(path), mode);
  };
  auto append = [&] {
    const int fd = open(path.c_str(), O_WRONLY | O_APPEND);
    const bool ok = fd >= 0 && write(fd, "x", 1) == 1;
    if (fd >= 0) close(fd);
    return ok;
  };

  reset(06775);
  ASSERT_EQ(as_nobody(append), 0);
  EXPECT_EQ(mode_of(path), 0775u) << "a write clears both (group execute set)";

  reset(06765);
  ASSERT_EQ(as_nobody(append), 0);
  EXPECT_EQ(mode_of(path), 02765u) << "without group execute S_ISGID stays";

  reset(06775);
  ASSERT_EQ(as_nobody([&] { return truncate(path.c_str(), 1) == 0; }), 0);
  EXPECT_EQ(mode_of(path), 0775u) << "a truncate";

  reset(06775);
  ASSERT_EQ(as_nobody([&] {
              const int fd = open(path.c_str(), O_WRONLY | O_TRUNC);
              if (fd >= 0) close(fd);
              return fd >= 0;
            }),
            0);
  EXPECT_EQ(mode_of(path), 0775u) << "an open with O_TRUNC";

  reset(06775);
  ASSERT_TRUE(append());
  EXPECT_EQ(mode_of(path), 06775u) << "root's write keeps them (CAP_FSETID)";

  ASSERT_EQ(chown(path.c_str(), 65534, 0), 0) << errno_text();
  EXPECT_EQ(mode_of(path), 0775u) << "a chown, by root too";
}

// A chown or chgrp clears S_ISUID, and S_ISGID with group execute, on every
// type but a directory, whoever makes it (chown_common): a fifo, a socket and
// the device nodes as a regular file. The kernel sends FATTR_KILL_SUIDGID
// with any chown of a non-directory; the daemon once cleared regular files
// only.
TEST(SetIdBits, ChownByTheOwnerClearsThemOnEveryFileType) {
  MIMICFS_REQUIRE_MOUNTABLE();
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make devices and act as another user";
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::vector<std::pair<const char*, mode_t>> types = {
      {"regular", S_IFREG}, {"fifo", S_IFIFO}, {"socket", S_IFSOCK},
      {"char", S_IFCHR},    {"block", S_IFBLK}, {"dir", S_IFDIR}};
  for (const auto& [name, type] : types) {
    const std::string path = vol.file(name);
    ASSERT_EQ(type == S_IFDIR ? mkdir(path.c_str(), 0755)
                              : mknod(path.c_str(), type | 0644, makedev(1, 3)),
              0)
        << name << ": " << errno_text();
    ASSERT_EQ(chown(path.c_str(), 65534, 65533), 0) << errno_text();
    ASSERT_EQ(chmod(path.c_str(), 06555), 0) << errno_text();
    ASSERT_EQ(as_user(65533, {65533, 65532}, [&] { return chown(path.c_str(), -1, 65532) == 0; }),
              0)
        << name;
    EXPECT_EQ(mode_of(path), type == S_IFDIR ? 06555u : 0555u) << name;
  }
}

// Linux 6.2+ (setattr_should_drop_sgid): S_ISGID without group execute goes
// too when the caller is not in the file's group and lacks CAP_FSETID; the
// daemon reads the caller's groups from /proc.
TEST(SetIdBits, SgidWithoutGroupExecuteGoesWhenTheCallerIsNotInTheGroup) {
  MIMICFS_REQUIRE_MOUNTABLE();
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("f");
  { Fd fd(open(path.c_str(), O_CREAT | O_WRONLY, 0644)); }
  ASSERT_EQ(chown(path.c_str(), 65534, 65533), 0) << errno_text();
  auto append = [&] {
    const int fd = open(path.c_str(), O_WRONLY | O_APPEND);
    const bool ok = fd >= 0 && write(fd, "x", 1) == 1;
    if (fd >= 0) close(fd);
    return ok;
  };
  ASSERT_EQ(chmod(path.c_str(), 02767), 0) << errno_text();
  ASSERT_EQ(as_user(65533, {65533}, append), 0);
  EXPECT_EQ(mode_of(path), 02767u) << "a member of the group keeps it";
  ASSERT_EQ(as_user(65531, {65531}, append), 0);
  EXPECT_EQ(mode_of(path), 0767u) << "a writer outside the group does not";
  ASSERT_EQ(chmod(path.c_str(), 02767), 0) << errno_text();
  ASSERT_EQ(as_user(65531, {65531, 65532},
                    [&] { return chown(path.c_str(), -1, 65532) == 0; }),
            0);
  EXPECT_EQ(mode_of(path), 0767u) << "a chgrp by the owner outside the old group";
}

// fallocate and copy_file_range clear them as a write does (file_modified):
// the kernel asks the daemon with a SETATTR that sets nothing, what is left of
// its own __remove_privs.
TEST(SetIdBits, FallocateAndCopyFileRangeClearThem) {
  MIMICFS_REQUIRE_MOUNTABLE();
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("f"), source = vol.file("source");
  {
    Fd fd(open(source.c_str(), O_CREAT | O_WRONLY, 0644));
    write_at(fd.get(), "0123456789", 0);
    Fd target(open(path.c_str(), O_CREAT | O_WRONLY, 0644));
  }
  ASSERT_EQ(chown(path.c_str(), 65534, 65533), 0) << errno_text();
  ASSERT_EQ(chmod(path.c_str(), 06775), 0) << errno_text();
  ASSERT_EQ(as_user(65533, {65533}, [&] {
              const int fd = open(path.c_str(), O_WRONLY);
              const bool ok = fd >= 0 && fallocate(fd, 0, 0, 4096) == 0;
              if (fd >= 0) close(fd);
              return ok;
            }),
            0);
  EXPECT_EQ(mode_of(path), 0775u) << "fallocate";
  ASSERT_EQ(chmod(path.c_str(), 06775), 0) << errno_text();
  ASSERT_EQ(as_user(65533, {65533}, [&] {
              const int in = open(source.c_str(), O_RDONLY);
              const int out = open(path.c_str(), O_WRONLY);
              const bool ok = in >= 0 && out >= 0 &&
                              copy_file_range(in, nullptr, out, nullptr, 10, 0) == 10;
              close(in);
              close(out);
              return ok;
            }),
            0);
  EXPECT_EQ(mode_of(path), 0775u) << "copy_file_range";
  ASSERT_EQ(chmod(path.c_str(), 06775), 0) << errno_text();
  Fd fd(open(path.c_str(), O_WRONLY));
  ASSERT_EQ(fallocate(fd.get(), 0, 0, 8192), 0) << errno_text();
  EXPECT_EQ(mode_of(path), 06775u) << "root's fallocate keeps them (CAP_FSETID)";
}

// The kernel asks for security.capability before a write only while it has not
// seen that the file has none: not once per write.
TEST(SetIdBits, WritesDoNotEachAskForSecurityCapability) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("log").c_str(), O_CREAT | O_WRONLY, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  vol.reset_counters();
  for (int i = 0; i < 200; ++i) write_at(fd.get(), "record", i * 4096);
  const nlohmann::json stats = vol.stats();
  EXPECT_EQ(op_count(stats, "write"), 200u);
  EXPECT_LE(op_count(stats, "getxattr"), 2u);
}

// --- O_TMPFILE -----------------------------------------------------------------------

// linkat(AT_FDCWD, "/proc/self/fd/N", ..., AT_SYMLINK_FOLLOW): how a program
// names an O_TMPFILE file without CAP_DAC_READ_SEARCH.
int link_descriptor(int fd, const std::string& path) {
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  return linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW);
}

// As on ext4, xfs and btrfs: a file with no name until linkat gives it one.
TEST(Tmpfile, AnUnnamedFileIsWrittenThenLinkedIntoTheDirectory) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ASSERT_EQ(mkdir(vol.file("db").c_str(), 0755), 0) << errno_text();
  Fd fd(open(vol.file("db").c_str(), O_TMPFILE | O_RDWR, 0640));
  ASSERT_TRUE(fd.ok()) << errno_text();
  write_at(fd.get(), "table rebuilt aside", 0);
  struct stat st = fstat_of(fd.get());
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(list_directory(vol.file("db")), (std::set<std::string>{".", ".."}));
  ASSERT_EQ(fsync(fd.get()), 0) << errno_text();
  ASSERT_EQ(link_descriptor(fd.get(), vol.file("db/t1.ibd")), 0) << errno_text();
  EXPECT_EQ(fstat_of(fd.get()).st_nlink, 1u);
  ASSERT_EQ(fd.close(), 0);
  std::ifstream named(vol.file("db/t1.ibd"));
  std::string contents((std::istreambuf_iterator<char>(named)), {});
  EXPECT_EQ(contents, "table rebuilt aside");
  const nlohmann::json stats = vol.stats();
  EXPECT_EQ(op_count(stats, "tmpfile"), 1u);
  EXPECT_EQ(stats["files"]["/db/t1.ibd"]["size"], 19);
}

// With O_EXCL it can never be named, and closed it is gone, blocks and all.
TEST(Tmpfile, AnExclusiveOneIsNeverNamedAndGoesAtClose) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("xfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.path().c_str(), O_TMPFILE | O_EXCL | O_WRONLY, 0600));
  ASSERT_TRUE(fd.ok()) << errno_text();
  write_at(fd.get(), pattern(1 * kMiB, 4), 0);
  ASSERT_EQ(fsync(fd.get()), 0) << errno_text();
  EXPECT_GT(vol.stats()["device"]["allocated_bytes"].get<uint64_t>(), 0u);
  errno = 0;
  EXPECT_EQ(link_descriptor(fd.get(), vol.file("nope")), -1);
  EXPECT_EQ(errno, ENOENT) << errno_text();
  ASSERT_EQ(fd.close(), 0);
  ASSERT_TRUE(vol.wait_for_releases());  // the release that frees it follows close(2)
  ASSERT_EQ(vol.ctl("settle"), 0);         // xfs's background reclaim, done now
  const uint64_t metadata = vol.stats()["device"]["metadata_bytes"].get<uint64_t>();
  EXPECT_EQ(vol.stats()["device"]["allocated_bytes"].get<uint64_t>(), metadata);
}

// The Linux NFS client has no ->tmpfile; the control directory holds no files.
// Either answer is per call: a later O_TMPFILE on another directory still works.
TEST(Tmpfile, RefusedOnNfsAndInTheControlDirectory) {
  MIMICFS_REQUIRE_MOUNTABLE();
  {
    MountedVolume vol("nfs");
    ASSERT_TRUE(vol.mounted()) << vol.error();
    errno = 0;
    EXPECT_EQ(open(vol.path().c_str(), O_TMPFILE | O_RDWR, 0600), -1);
    EXPECT_EQ(errno, EOPNOTSUPP) << errno_text();
  }
  MountedVolume vol("btrfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  errno = 0;
  EXPECT_EQ(open(vol.file(".mimicfs").c_str(), O_TMPFILE | O_RDWR, 0600), -1);
  EXPECT_EQ(errno, EOPNOTSUPP) << errno_text();
  Fd fd(open(vol.path().c_str(), O_TMPFILE | O_RDWR, 0600));
  EXPECT_TRUE(fd.ok()) << errno_text();
}

// --- shared mappings ---------------------------------------------------------------

// SQLite's -shm file and LMDB write through MAP_SHARED mappings; msync must push
// the pages to the daemon.
TEST(Mmap, SharedMappingWritesReachTheVolumeOnMsync) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ideal");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("db-shm");
  Fd fd(open(path.c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  ASSERT_EQ(ftruncate(fd.get(), 32 * kKiB), 0) << errno_text();
  void* map = mmap(nullptr, 32 * kKiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(map, MAP_FAILED) << errno_text();
  char* bytes = static_cast<char*>(map);
  std::memcpy(bytes + 100, "mapped", 6);
  std::memcpy(bytes + 20 * kKiB, "page five", 9);
  EXPECT_EQ(msync(map, 32 * kKiB, MS_SYNC), 0) << errno_text();
  EXPECT_EQ(munmap(map, 32 * kKiB), 0);
  // O_DIRECT reads bypass the page cache: this is what the daemon holds.
  Fd direct(open(path.c_str(), O_RDONLY | O_DIRECT));
  ASSERT_TRUE(direct.ok()) << errno_text();
  std::unique_ptr<char, decltype(&std::free)> in(static_cast<char*>(aligned_alloc(4096, 32 * kKiB)),
                                                 &std::free);
  ASSERT_EQ(pread(direct.get(), in.get(), 32 * kKiB, 0), 32 * kKiB) << errno_text();
  EXPECT_EQ(std::string(in.get() + 100, 6), "mapped");
  EXPECT_EQ(std::string(in.get() + 20 * kKiB, 9), "page five");
  EXPECT_EQ(std::string(in.get(), 100), std::string(100, '\0'));
  EXPECT_EQ(fstat_of(fd.get()).st_size, 32 * kKiB);
}

// --- ftruncate ------------------------------------------------------------------

TEST(Truncate, ShrinkFreesBlocksAndGrowReadsZeros) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("t").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  const std::string data = pattern(256 * kKiB, 5);
  write_at(fd.get(), data, 0);
  const struct stat full = fstat_of(fd.get());
  EXPECT_EQ(full.st_blocks, 256 * kKiB / 512);

  ASSERT_EQ(ftruncate(fd.get(), 1000), 0) << errno_text();
  const struct stat shrunk = fstat_of(fd.get());
  EXPECT_EQ(shrunk.st_size, 1000);
  EXPECT_EQ(shrunk.st_blocks, 2);  // the two 512 B units holding bytes 0..999
  EXPECT_EQ(vol.file_stats("t")["allocated_bytes"], 1024);

  ASSERT_EQ(ftruncate(fd.get(), 64 * kKiB), 0) << errno_text();
  EXPECT_EQ(fstat_of(fd.get()).st_size, 64 * kKiB);
  EXPECT_EQ(fstat_of(fd.get()).st_blocks, 2);  // growing allocates nothing
  EXPECT_EQ(read_at(fd.get(), 1000, 0), data.substr(0, 1000));
  // The bytes cut off must not come back when the file grows again.
  EXPECT_EQ(read_at(fd.get(), 64 * kKiB - 1000, 1000), std::string(64 * kKiB - 1000, '\0'));
}

TEST(Truncate, TruncateByPathSetsSizeWithoutAllocating) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ideal");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("t");
  { Fd fd(open(path.c_str(), O_CREAT | O_WRONLY, 0644)); }
  ASSERT_EQ(truncate(path.c_str(), 12345), 0) << errno_text();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 12345);
  EXPECT_EQ(st.st_blocks, 0);
}

// --- fallocate ------------------------------------------------------------------

// NFS < 4.2 has no ALLOCATE: every mode is refused with EOPNOTSUPP, and every call
// must reach the daemon (a reply of ENOSYS would make the kernel refuse fallocate
// for the whole mount without asking again).
TEST(Fallocate, EveryModeOnNfsFailsWithEopnotsuppEveryTime) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("ibdata1").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  write_at(fd.get(), std::string(8 * kKiB, 'x'), 0);
  vol.reset_counters();
  const int modes[] = {0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                       FALLOC_FL_ZERO_RANGE};
  constexpr int kRounds = 3;
  for (int round = 0; round < kRounds; ++round) {
    for (int mode : modes) {
      errno = 0;
      EXPECT_EQ(fallocate(fd.get(), mode, 0, 64 * kKiB), -1) << "mode " << mode;
      EXPECT_EQ(errno, EOPNOTSUPP) << "mode " << mode << ": " << errno_text();
    }
  }
  // PUNCH_HOLE is counted as its own operation, "punch".
  const nlohmann::json stats = vol.stats();
  EXPECT_EQ(op_count(stats, "fallocate"), kRounds * (std::size(modes) - 1));
  EXPECT_EQ(op_errors(stats, "fallocate", "EOPNOTSUPP"), kRounds * (std::size(modes) - 1));
  EXPECT_EQ(op_count(stats, "punch"), kRounds);
  EXPECT_EQ(op_errors(stats, "punch", "EOPNOTSUPP"), kRounds);
  // Nothing changed.
  EXPECT_EQ(fstat_of(fd.get()).st_size, 8 * kKiB);
  EXPECT_EQ(read_at(fd.get(), 8 * kKiB, 0), std::string(8 * kKiB, 'x'));
}

// glibc falls back to writing a byte per 4 KiB only after EOPNOTSUPP (seed 000).
TEST(Fallocate, PosixFallocateOnNfsFallsBackToWritingAndSucceeds) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("t.ibd").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  ASSERT_EQ(posix_fallocate(fd.get(), 0, 64 * kKiB), 0);
  EXPECT_EQ(fstat_of(fd.get()).st_size, 64 * kKiB);
  const nlohmann::json file = vol.file_stats("t.ibd");
  EXPECT_EQ(file["allocated_bytes"], 16 * 512);  // one 512 B unit per 4 KiB step
  EXPECT_EQ(file["extents"], 16);
}

TEST(Fallocate, ModeZeroOnIdealExtendsSizeWithUnwrittenBlocksThatReadAsZeros) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ideal");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("t.ibd").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  write_at(fd.get(), "header", 0);
  ASSERT_EQ(fallocate(fd.get(), 0, 0, kMiB), 0) << errno_text();
  const struct stat st = fstat_of(fd.get());
  EXPECT_EQ(st.st_size, kMiB);
  EXPECT_EQ(st.st_blocks, kMiB / 512);
  const nlohmann::json file = vol.file_stats("t.ibd");
  EXPECT_GT(file["unwritten_extents"].get<uint64_t>(), 0u);
  EXPECT_EQ(file["allocated_bytes"], kMiB);
  EXPECT_EQ(read_at(fd.get(), 6, 0), "header");
  EXPECT_EQ(read_at(fd.get(), kMiB - 6, 6), std::string(kMiB - 6, '\0'));
}

TEST(Fallocate, KeepSizeOnIdealAllocatesPastEofWithoutChangingSize) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ideal");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("t.ibd").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  write_at(fd.get(), std::string(4 * kKiB, 'd'), 0);
  ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_KEEP_SIZE, 0, 256 * kKiB), 0) << errno_text();
  const struct stat st = fstat_of(fd.get());
  EXPECT_EQ(st.st_size, 4 * kKiB);
  EXPECT_EQ(st.st_blocks, 256 * kKiB / 512);
  EXPECT_EQ(read_at(fd.get(), 8 * kKiB, 0), std::string(4 * kKiB, 'd'));
}

TEST(Fallocate, PunchHoleOnIdealFreesBlocksAndReadsZeros) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ideal");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("t.ibd").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  const std::string data = pattern(256 * kKiB, 9);
  write_at(fd.get(), data, 0);
  const struct stat before = fstat_of(fd.get());
  ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 64 * kKiB, 128 * kKiB),
            0)
      << errno_text();
  const struct stat after = fstat_of(fd.get());
  EXPECT_EQ(after.st_size, before.st_size);
  EXPECT_EQ(after.st_blocks, before.st_blocks - 128 * kKiB / 512);
  EXPECT_EQ(read_at(fd.get(), 128 * kKiB, 64 * kKiB), std::string(128 * kKiB, '\0'));
  EXPECT_EQ(read_at(fd.get(), 64 * kKiB, 0), data.substr(0, 64 * kKiB));
  EXPECT_EQ(read_at(fd.get(), 64 * kKiB, 192 * kKiB), data.substr(192 * kKiB));
  EXPECT_EQ(vol.file_stats("t.ibd")["holes"], 1);
}

TEST(Fallocate, PunchHoleOnIdealZeroesPartialBlocksInPlace) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ideal");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("t").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  const std::string data = pattern(16 * kKiB, 4);
  write_at(fd.get(), data, 0);
  ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1000, 2000), 0)
      << errno_text();
  std::string expected = data;
  expected.replace(1000, 2000, std::string(2000, '\0'));
  EXPECT_EQ(read_at(fd.get(), 16 * kKiB, 0), expected);
  EXPECT_EQ(fstat_of(fd.get()).st_blocks, 16 * kKiB / 512);  // no whole block inside
}

TEST(Fallocate, ZeroRangeOnIdealReadsZerosAndKeepsBlocksAllocated) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ideal");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("t").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  const std::string data = pattern(64 * kKiB, 6);
  write_at(fd.get(), data, 0);
  ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_ZERO_RANGE, 6000, 30000), 0) << errno_text();
  std::string expected = data;
  expected.replace(6000, 30000, std::string(30000, '\0'));
  EXPECT_EQ(read_at(fd.get(), 64 * kKiB, 0), expected);
  EXPECT_EQ(fstat_of(fd.get()).st_size, 64 * kKiB);
  EXPECT_EQ(fstat_of(fd.get()).st_blocks, 64 * kKiB / 512);
  EXPECT_GT(vol.file_stats("t")["unwritten_extents"].get<uint64_t>(), 0u);

  // Past EOF without KEEP_SIZE it extends the file, as mode 0 does.
  ASSERT_EQ(fallocate(fd.get(), FALLOC_FL_ZERO_RANGE, 60 * kKiB, 68 * kKiB), 0) << errno_text();
  EXPECT_EQ(fstat_of(fd.get()).st_size, 128 * kKiB);
  EXPECT_EQ(read_at(fd.get(), 68 * kKiB, 60 * kKiB), std::string(68 * kKiB, '\0'));
}

// --- SEEK_DATA / SEEK_HOLE --------------------------------------------------------

TEST(Lseek, SeekDataAndSeekHoleFindTheOneDataBlockOfASparseFile) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ideal");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("sparse").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  ASSERT_EQ(ftruncate(fd.get(), 4 * kMiB), 0) << errno_text();
  write_at(fd.get(), std::string(4 * kKiB, 'x'), kMiB);
  EXPECT_EQ(lseek(fd.get(), 0, SEEK_DATA), kMiB) << errno_text();
  EXPECT_EQ(lseek(fd.get(), kMiB + 100, SEEK_DATA), kMiB + 100) << errno_text();
  EXPECT_EQ(lseek(fd.get(), 0, SEEK_HOLE), 0) << errno_text();
  EXPECT_EQ(lseek(fd.get(), kMiB, SEEK_HOLE), kMiB + 4 * kKiB) << errno_text();
  errno = 0;
  EXPECT_EQ(lseek(fd.get(), kMiB + 4 * kKiB, SEEK_DATA), -1);
  EXPECT_EQ(errno, ENXIO);
  errno = 0;
  EXPECT_EQ(lseek(fd.get(), 4 * kMiB, SEEK_HOLE), -1);  // at EOF
  EXPECT_EQ(errno, ENXIO);
}

// Unwritten extents read as zeros, so SEEK_DATA skips them as ext4 and xfs do.
TEST(Lseek, UnwrittenExtentsAreHolesToSeekData) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ideal");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("prealloc").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  ASSERT_EQ(fallocate(fd.get(), 0, 0, kMiB), 0) << errno_text();
  errno = 0;
  EXPECT_EQ(lseek(fd.get(), 0, SEEK_DATA), -1);
  EXPECT_EQ(errno, ENXIO);
  write_at(fd.get(), "x", 512 * kKiB + 10);
  EXPECT_EQ(lseek(fd.get(), 0, SEEK_DATA), 512 * kKiB);
  EXPECT_EQ(lseek(fd.get(), 512 * kKiB, SEEK_HOLE), 512 * kKiB + 4 * kKiB);
}

// --- namespace --------------------------------------------------------------------

TEST(Rename, RenameReplacesTheTarget) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  {
    Fd a(open(vol.file("a").c_str(), O_CREAT | O_WRONLY, 0644));
    Fd b(open(vol.file("b").c_str(), O_CREAT | O_WRONLY, 0644));
    write_at(a.get(), "new", 0);
    write_at(b.get(), "old", 0);
  }
  ASSERT_EQ(rename(vol.file("a").c_str(), vol.file("b").c_str()), 0) << errno_text();
  EXPECT_FALSE(std::filesystem::exists(vol.file("a")));
  Fd b(open(vol.file("b").c_str(), O_RDONLY));
  EXPECT_EQ(read_at(b.get(), 10, 0), "new");
}

TEST(Rename, NoReplaceOnExistingTargetFailsWithEexist) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  { Fd a(open(vol.file("a").c_str(), O_CREAT | O_WRONLY, 0644)); }
  { Fd b(open(vol.file("b").c_str(), O_CREAT | O_WRONLY, 0644)); }
  errno = 0;
  EXPECT_EQ(rename2(vol.file("a"), vol.file("b"), RENAME_NOREPLACE), -1);
  EXPECT_EQ(errno, EEXIST) << errno_text();
  EXPECT_TRUE(std::filesystem::exists(vol.file("a")));
  EXPECT_EQ(rename2(vol.file("a"), vol.file("c"), RENAME_NOREPLACE), 0) << errno_text();
  EXPECT_TRUE(std::filesystem::exists(vol.file("c")));
  EXPECT_FALSE(std::filesystem::exists(vol.file("a")));
}

TEST(Rename, ExchangeSwapsContents) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  {
    Fd a(open(vol.file("a").c_str(), O_CREAT | O_WRONLY, 0644));
    Fd b(open(vol.file("b").c_str(), O_CREAT | O_WRONLY, 0644));
    write_at(a.get(), "alpha", 0);
    write_at(b.get(), "bravo!", 0);
  }
  ASSERT_EQ(rename2(vol.file("a"), vol.file("b"), RENAME_EXCHANGE), 0) << errno_text();
  Fd a(open(vol.file("a").c_str(), O_RDONLY));
  Fd b(open(vol.file("b").c_str(), O_RDONLY));
  EXPECT_EQ(read_at(a.get(), 10, 0), "bravo!");
  EXPECT_EQ(read_at(b.get(), 10, 0), "alpha");
  EXPECT_EQ(fstat_of(a.get()).st_size, 6);
}

TEST(Links, HardLinkSharesDataAndCountsTwoLinks) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  {
    Fd fd(open(vol.file("a").c_str(), O_CREAT | O_WRONLY, 0644));
    write_at(fd.get(), "shared", 0);
  }
  ASSERT_EQ(link(vol.file("a").c_str(), vol.file("b").c_str()), 0) << errno_text();
  struct stat a {};
  struct stat b {};
  ASSERT_EQ(stat(vol.file("a").c_str(), &a), 0);
  ASSERT_EQ(stat(vol.file("b").c_str(), &b), 0);
  EXPECT_EQ(a.st_nlink, 2u);
  EXPECT_EQ(a.st_ino, b.st_ino);
  {
    Fd fd(open(vol.file("b").c_str(), O_WRONLY));
    write_at(fd.get(), "S", 0);
  }
  Fd fd(open(vol.file("a").c_str(), O_RDONLY));
  EXPECT_EQ(read_at(fd.get(), 10, 0), "Shared");
  ASSERT_EQ(unlink(vol.file("a").c_str()), 0);
  ASSERT_EQ(stat(vol.file("b").c_str(), &b), 0);
  EXPECT_EQ(b.st_nlink, 1u);
}

TEST(Links, SymlinkReadsBackItsTargetAndResolves) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  {
    Fd fd(open(vol.file("target").c_str(), O_CREAT | O_WRONLY, 0644));
    write_at(fd.get(), "via link", 0);
  }
  ASSERT_EQ(symlink("target", vol.file("link").c_str()), 0) << errno_text();
  char buffer[64] = {};
  EXPECT_EQ(readlink(vol.file("link").c_str(), buffer, sizeof buffer), 6) << errno_text();
  EXPECT_STREQ(buffer, "target");
  struct stat st {};
  ASSERT_EQ(lstat(vol.file("link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  Fd fd(open(vol.file("link").c_str(), O_RDONLY));
  EXPECT_EQ(read_at(fd.get(), 20, 0), "via link");
}

TEST(Directories, MkdirRmdirAndRmdirOfNonEmptyFailsWithEnotempty) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string dir = vol.file("db");
  ASSERT_EQ(mkdir(dir.c_str(), 0750), 0) << errno_text();
  { Fd fd(open((dir + "/t.ibd").c_str(), O_CREAT | O_WRONLY, 0644)); }
  errno = 0;
  EXPECT_EQ(rmdir(dir.c_str()), -1);
  EXPECT_EQ(errno, ENOTEMPTY) << errno_text();
  ASSERT_EQ(unlink((dir + "/t.ibd").c_str()), 0) << errno_text();
  EXPECT_EQ(rmdir(dir.c_str()), 0) << errno_text();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// A setgid directory (a shared project directory): what is created in it takes
// its group, and a new directory its setgid bit, through the kernel.
TEST(Directories, ASetgidDirectoryGivesNewEntriesItsGroup) {
  MIMICFS_REQUIRE_MOUNTABLE();
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the directory another group";
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string dir = vol.file("shared");
  ASSERT_EQ(mkdir(dir.c_str(), 0775), 0) << errno_text();
  ASSERT_EQ(chown(dir.c_str(), 0, 4242), 0) << errno_text();
  ASSERT_EQ(chmod(dir.c_str(), 02775), 0) << errno_text();
  { Fd fd(open((dir + "/f").c_str(), O_CREAT | O_WRONLY, 0644)); }
  ASSERT_EQ(mkdir((dir + "/sub").c_str(), 0755), 0) << errno_text();
  struct stat st {};
  ASSERT_EQ(stat((dir + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, 4242u);
  ASSERT_EQ(stat((dir + "/sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, 4242u);
  EXPECT_TRUE(st.st_mode & S_ISGID) << std::oct << st.st_mode;
  { Fd fd(open(vol.file("outside").c_str(), O_CREAT | O_WRONLY, 0644)); }
  ASSERT_EQ(stat(vol.file("outside").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, getegid());
}

TEST(Directories, ReaddirListsCreatedNamesAndNeverTheControlDirectory) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  ASSERT_EQ(mkdir(vol.file("db").c_str(), 0755), 0) << errno_text();
  { Fd fd(open(vol.file("ibdata1").c_str(), O_CREAT | O_WRONLY, 0644)); }
  { Fd fd(open(vol.file("db/t.ibd").c_str(), O_CREAT | O_WRONLY, 0644)); }
  EXPECT_EQ(list_directory(vol.path()), (std::set<std::string>{".", "..", "db", "ibdata1"}));
  EXPECT_EQ(list_directory(vol.file("db")), (std::set<std::string>{".", "..", "t.ibd"}));
}

// Enough entries that the kernel needs several READDIR calls, each resuming at the
// offset the previous one ended on.
TEST(Directories, ReaddirOfALargeDirectoryListsEveryNameOnce) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  std::set<std::string> expected = {".", ".."};
  for (int i = 0; i < 500; ++i) {
    const std::string name = "table_with_a_long_name_" + std::to_string(i) + ".ibd";
    Fd fd(open(vol.file(name).c_str(), O_CREAT | O_WRONLY, 0644));
    ASSERT_TRUE(fd.ok()) << name << ": " << errno_text();
    expected.insert(name);
  }
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(vol.path().c_str()), closedir);
  ASSERT_TRUE(dir) << errno_text();
  std::multiset<std::string> seen;
  while (const dirent* entry = readdir(dir.get())) seen.insert(entry->d_name);
  EXPECT_EQ(seen, std::multiset<std::string>(expected.begin(), expected.end()));
}

// --- the hidden control directory ----------------------------------------------------

TEST(ControlDirectory, IsReachableByPathThoughNeverListed) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  struct stat st {};
  ASSERT_EQ(stat(vol.file(".mimicfs").c_str(), &st), 0) << errno_text();
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  Fd fd(open(vol.file(".mimicfs/stats.json").c_str(), O_RDONLY));
  ASSERT_TRUE(fd.ok()) << errno_text();
  const std::string text = read_at(fd.get(), 1 << 20, 0);
  const nlohmann::json stats = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(stats.is_discarded()) << text;
  EXPECT_EQ(stats["profile"], "nfs");
  EXPECT_EQ(list_directory(vol.path()).count(".mimicfs"), 0u);
  EXPECT_EQ(list_directory(vol.file(".mimicfs")),
            (std::set<std::string>{".", "..", "ctl", "layout.json", "stats.json"}));
}

TEST(ControlDirectory, CannotBeCreatedRemovedOrRenamed) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  errno = 0;
  EXPECT_EQ(mkdir(vol.file(".mimicfs").c_str(), 0755), -1);
  EXPECT_EQ(errno, EEXIST) << errno_text();
  errno = 0;
  EXPECT_EQ(open(vol.file(".mimicfs").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644), -1);
  EXPECT_EQ(errno, EEXIST) << errno_text();
  EXPECT_EQ(rmdir(vol.file(".mimicfs").c_str()), -1);
  ASSERT_EQ(mkdir(vol.file("dir").c_str(), 0755), 0) << errno_text();
  EXPECT_EQ(rename(vol.file("dir").c_str(), vol.file(".mimicfs").c_str()), -1);
  EXPECT_EQ(rename(vol.file(".mimicfs").c_str(), vol.file("moved").c_str()), -1);
  EXPECT_EQ(open(vol.file(".mimicfs/new").c_str(), O_CREAT | O_WRONLY, 0644), -1);
  struct stat st {};
  EXPECT_EQ(stat(vol.file(".mimicfs/stats.json").c_str(), &st), 0) << errno_text();
}

TEST(ControlFile, ResetZeroesCountersAndUnknownCommandFailsWithEinval) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  {
    Fd fd(open(vol.file("f").c_str(), O_CREAT | O_RDWR, 0644));
    write_at(fd.get(), "data", 0);
    ASSERT_EQ(fsync(fd.get()), 0);
  }
  ASSERT_GT(op_count(vol.stats(), "write"), 0u);
  Fd ctl(open(vol.file(".mimicfs/ctl").c_str(), O_WRONLY));
  ASSERT_TRUE(ctl.ok()) << errno_text();
  ASSERT_EQ(write(ctl.get(), "reset\n", 6), 6) << errno_text();
  const nlohmann::json stats = vol.stats();
  EXPECT_EQ(op_count(stats, "write"), 0u);
  EXPECT_EQ(op_count(stats, "fsync"), 0u);
  EXPECT_EQ(stats["files"]["/f"]["size"], 4);  // the counters, not the volume
  errno = 0;
  EXPECT_EQ(write(ctl.get(), "bogus\n", 6), -1);
  EXPECT_EQ(errno, EINVAL) << errno_text();
}

// --- xattrs -----------------------------------------------------------------------

TEST(Xattrs, SetGetListRemoveWithCreateAndMissingErrors) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("f");
  { Fd fd(open(path.c_str(), O_CREAT | O_WRONLY, 0644)); }
  ASSERT_EQ(setxattr(path.c_str(), "user.a", "one", 3, XATTR_CREATE), 0) << errno_text();
  ASSERT_EQ(setxattr(path.c_str(), "user.b", "two!", 4, 0), 0) << errno_text();
  errno = 0;
  EXPECT_EQ(setxattr(path.c_str(), "user.a", "uno", 3, XATTR_CREATE), -1);
  EXPECT_EQ(errno, EEXIST) << errno_text();
  EXPECT_EQ(getxattr_string(path, "user.a"), "one");
  EXPECT_EQ(getxattr(path.c_str(), "user.b", nullptr, 0), 4);  // size probe
  EXPECT_EQ(getxattr_string(path, "user.b"), "two!");
  char small[2];
  errno = 0;
  EXPECT_EQ(getxattr(path.c_str(), "user.b", small, sizeof small), -1);
  EXPECT_EQ(errno, ERANGE) << errno_text();

  char names[256];
  const ssize_t n = listxattr(path.c_str(), names, sizeof names);
  ASSERT_GT(n, 0) << errno_text();
  EXPECT_EQ(std::string(names, n), std::string("user.a\0user.b\0", 14));

  ASSERT_EQ(removexattr(path.c_str(), "user.a"), 0) << errno_text();
  errno = 0;
  char value[16];
  EXPECT_EQ(getxattr(path.c_str(), "user.a", value, sizeof value), -1);
  EXPECT_EQ(errno, ENODATA) << errno_text();
  errno = 0;
  EXPECT_EQ(removexattr(path.c_str(), "user.a"), -1);
  EXPECT_EQ(errno, ENODATA) << errno_text();
}

// As on ext4, xfs and btrfs: a name outside user., trusted. and security. is
// EOPNOTSUPP (the kernel passes every name to a FUSE daemon).
TEST(Xattrs, AnUnknownNamespaceIsNotSupported) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("f");
  { Fd fd(open(path.c_str(), O_CREAT | O_WRONLY, 0644)); }
  errno = 0;
  EXPECT_EQ(setxattr(path.c_str(), "foo.bar", "v", 1, 0), -1);
  EXPECT_EQ(errno, EOPNOTSUPP) << errno_text();
  char value[8];
  errno = 0;
  EXPECT_EQ(getxattr(path.c_str(), "foo.bar", value, sizeof value), -1);
  EXPECT_EQ(errno, EOPNOTSUPP) << errno_text();
  EXPECT_EQ(setxattr(path.c_str(), "user.ok", "v", 1, 0), 0) << errno_text();
  if (geteuid() == 0) {
    EXPECT_EQ(setxattr(path.c_str(), "trusted.ok", "v", 1, 0), 0) << errno_text();
  }
}

TEST(Xattrs, MimicfsXattrsReportTheSameNumbersAsStats) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("t.ibd");
  {
    Fd fd(open(path.c_str(), O_CREAT | O_WRONLY, 0644));
    ASSERT_EQ(posix_fallocate(fd.get(), 0, 64 * kKiB), 0);  // one extent per 4 KiB
    write_at(fd.get(), std::string(1000, 'z'), 200 * kKiB);
  }
  const nlohmann::json file = vol.file_stats("t.ibd");
  EXPECT_EQ(file["extents"], 17);
  for (const std::string key :
       {"extents", "allocated_bytes", "fragments", "holes", "unwritten_extents"}) {
    EXPECT_EQ(getxattr_string(path, "user.mimicfs." + key),
              std::to_string(file[key].get<uint64_t>()))
        << key;
  }
  errno = 0;
  EXPECT_EQ(getxattr(path.c_str(), "user.mimicfs.nonsense", nullptr, 0), -1);
  EXPECT_EQ(errno, ENODATA) << errno_text();
  errno = 0;
  EXPECT_EQ(setxattr(path.c_str(), "user.mimicfs.extents", "0", 1, 0), -1);
  EXPECT_EQ(errno, EPERM) << errno_text();
}

// --- copy_file_range ----------------------------------------------------------------

// Served by the daemon: one request copies the range (no read or write per
// chunk), counted as copy_file_range with its bytes; short at the source's end;
// EINVAL for overlapping ranges of one file.
TEST(CopyFileRange, OneRequestCopiesTheRangeAndIsCounted) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  std::string data(100'000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 23);
  Fd in(open(vol.file("src").c_str(), O_CREAT | O_RDWR, 0644));
  write_at(in.get(), data, 0);
  ASSERT_EQ(fsync(in.get()), 0);
  Fd out(open(vol.file("dst").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_EQ(vol.ctl("reset"), 0);
  loff_t in_offset = 1000, out_offset = 0;
  ASSERT_EQ(copy_file_range(in.get(), &in_offset, out.get(), &out_offset, 50'000, 0), 50'000)
      << errno_text();
  EXPECT_EQ(in_offset, 51'000);
  const nlohmann::json ops = vol.stats()["ops"];
  EXPECT_EQ(ops["copy_file_range"]["count"], 1) << ops.dump();
  EXPECT_EQ(ops["copy_file_range"]["bytes"], 50'000) << ops.dump();
  EXPECT_FALSE(ops.contains("write")) << ops.dump();
  std::string copy(50'000, '\0');
  ASSERT_EQ(pread(out.get(), copy.data(), copy.size(), 0), 50'000) << errno_text();
  EXPECT_EQ(copy, data.substr(1000, 50'000));
  in_offset = 90'000;
  out_offset = 50'000;
  EXPECT_EQ(copy_file_range(in.get(), &in_offset, out.get(), &out_offset, 1 << 20, 0), 10'000)
      << "up to the source's end";
  EXPECT_EQ(copy_file_range(in.get(), &in_offset, out.get(), &out_offset, 4096, 0), 0);
  in_offset = 0;
  out_offset = 4096;
  errno = 0;
  EXPECT_EQ(copy_file_range(in.get(), &in_offset, in.get(), &out_offset, 8192, 0), -1);
  EXPECT_EQ(errno, EINVAL) << errno_text();
  EXPECT_EQ(vol.file_stats("dst")["size"], 60'000);
}

// --- statfs -----------------------------------------------------------------------

TEST(Statfs, NfsReportsTheWsizeAsBlockAndFragmentSize) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  struct statfs by_path {};
  ASSERT_EQ(statfs(vol.path().c_str(), &by_path), 0) << errno_text();
  EXPECT_EQ(by_path.f_bsize, 1048576);
  EXPECT_EQ(by_path.f_frsize, 1048576);
  EXPECT_EQ(by_path.f_blocks, 1048576u);  // 1 TiB export in 1 MiB fragments
  Fd fd(open(vol.file("f").c_str(), O_CREAT | O_RDWR, 0644));
  struct statfs by_fd {};
  ASSERT_EQ(fstatfs(fd.get(), &by_fd), 0) << errno_text();
  EXPECT_EQ(by_fd.f_bsize, 1048576);
  EXPECT_EQ(by_fd.f_frsize, 1048576);
  EXPECT_EQ(fstat_of(fd.get()).st_blksize, 1048576);
}

// --- locks --------------------------------------------------------------------------

// A local profile leaves POSIX and BSD locks to the kernel, so they work as on
// a local filesystem: apart from each other. (An NFS client sends them to its
// server, where flock is a whole-file fcntl lock: nfs_locks_test.cc.)
TEST(Locks, FcntlWriteLockAndFlockSucceed) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("ext4");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("ibdata1").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = 0;
  lock.l_len = 0;
  ASSERT_EQ(fcntl(fd.get(), F_SETLK, &lock), 0) << errno_text();
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  ASSERT_EQ(fcntl(fd.get(), F_GETLK, &probe), 0) << errno_text();
  EXPECT_EQ(probe.l_type, F_UNLCK);  // a process never conflicts with itself
  EXPECT_EQ(flock(fd.get(), LOCK_EX | LOCK_NB), 0) << errno_text();
  Fd other(open(vol.file("ibdata1").c_str(), O_RDWR));
  errno = 0;
  EXPECT_EQ(flock(other.get(), LOCK_EX | LOCK_NB), -1);  // another open file description
  EXPECT_EQ(errno, EWOULDBLOCK) << errno_text();
  EXPECT_EQ(flock(fd.get(), LOCK_UN), 0) << errno_text();
  EXPECT_EQ(flock(other.get(), LOCK_EX | LOCK_NB), 0) << errno_text();
}

// --- unlink -------------------------------------------------------------------------

// A file removed while open lives on with no name until its last close, as
// on a local filesystem (on NFS with the client's silly rename off: the
// server's side; nfs_client_test.cc has the client's).
TEST(Unlink, OpenFileStaysReadableUntilClosed) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs", {"--set", "client.silly_rename=false"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("#sql-ib123.ibd");
  Fd fd(open(path.c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  const std::string data = pattern(32 * kKiB, 8);
  write_at(fd.get(), data, 0);
  ASSERT_EQ(unlink(path.c_str()), 0) << errno_text();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(vol.stats()["files"].size(), 0u);
  EXPECT_EQ(read_at(fd.get(), data.size(), 0), data);
  write_at(fd.get(), "more", data.size());
  EXPECT_EQ(read_at(fd.get(), 4, data.size()), "more");
  EXPECT_EQ(fstat_of(fd.get()).st_nlink, 0u);
  EXPECT_GT(vol.stats()["device"]["allocated_bytes"].get<uint64_t>(), 0u);
  const nlohmann::json open = vol.stats()["open"];
  EXPECT_EQ(open["handles"], 1);
  EXPECT_EQ(open["unlinked_files"], 1);
  EXPECT_EQ(open["unlinked_bytes"], vol.stats()["device"]["allocated_bytes"]);
  ASSERT_EQ(fd.close(), 0);
  EXPECT_TRUE(vol.wait_for_releases());
  // The last release of an unlinked file frees its blocks (the kernel sends it
  // after close(2) has returned).
  EXPECT_EQ(vol.stats()["open"]["unlinked_files"], 0);
  EXPECT_EQ(vol.stats()["device"]["allocated_bytes"], 0);
}

// --- running out of space -------------------------------------------------------------

TEST(NoSpace, FullDeviceFailsTheNextWriteWithEnospcAndKeepsEarlierData) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string dir = make_temp_dir();
  const std::string profile_path = dir + "/tiny.toml";
  {
    std::ofstream out(profile_path);
    out << "base = \"ideal\"\nname = \"tiny\"\n[device]\ncapacity_bytes = 1048576\n";
  }
  MountedVolume vol(ProfileFile{profile_path});
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(vol.mounted()) << vol.error();
  Fd fd(open(vol.file("fill").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok()) << errno_text();
  std::string written;
  int error = 0;
  for (int i = 0; i < 1000 && error == 0; ++i) {
    const std::string chunk = pattern(4 * kKiB, static_cast<char>(i));
    const ssize_t n = pwrite(fd.get(), chunk.data(), chunk.size(), written.size());
    if (n < 0) {
      error = errno;
    } else {
      written += chunk.substr(0, n);
    }
  }
  EXPECT_EQ(error, ENOSPC) << std::strerror(error);
  EXPECT_EQ(written.size(), 1048576u);
  EXPECT_EQ(vol.stats()["device"]["free_bytes"], 0);
  struct statfs fs {};
  ASSERT_EQ(fstatfs(fd.get(), &fs), 0);
  EXPECT_EQ(fs.f_bfree, 0u);
  EXPECT_EQ(fstat_of(fd.get()).st_size, static_cast<off_t>(written.size()));
  EXPECT_EQ(read_at(fd.get(), written.size(), 0), written);
  // Space comes back when a file is cut.
  ASSERT_EQ(ftruncate(fd.get(), 512 * kKiB), 0) << errno_text();
  write_at(fd.get(), "again", 512 * kKiB);
}

}  // namespace
