// SPDX-License-Identifier: Apache-2.0
// Sessions are objects (fusefs/fuse_session.h): one process mounts two
// volumes and serves both, each through its own session, channel and loop,
// and unmounting one leaves the other serving. The test process is the
// daemon here: what each session negotiated at INIT (O_TMPFILE, the kernel's
// set-ID clearing flags) and which volume answers are checked through real
// syscalls on each mount.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "engine/data/memory_data_store.h"
#include "engine/profile/profile.h"
#include "engine/time/wall_clock.h"
#include "fusefs/fuse_adapter.h"
#include "fusefs/fuse_session.h"
#include "tests/support/mounted_volume.h"

namespace mimicfs {
namespace {

// A volume of `profile` mounted on a directory of its own and served on a
// thread of the test process until unmounted.
class ServedVolume {
 public:
  ServedVolume(const std::string& profile, IoUring io_uring)
      : directory_{testing::make_temp_dir()},
        engine_(load_builtin_profile(profile).value(), std::make_unique<MemoryDataStore>(),
                clock_),
        adapter_(engine_, engine_.fs(), AdapterOptions{}),
        session_(adapter_, path(), profile, io_uring) {
    if (session_.error().empty()) {
      adapter_.start();
      server_ = std::thread([this] { status_ = session_.serve(); });
    }
  }
  ~ServedVolume() {
    if (server_.joinable()) {
      // A test that failed half-way may have left the mount busy: the
      // connection's abort ends the loop whatever holds the mount.
      abort_connection();
      (void)umount2(path().c_str(), MNT_DETACH);
      server_.join();
    }
    // The session unmounts what is left when it goes, then the directory goes.
  }
  ServedVolume(const ServedVolume&) = delete;
  ServedVolume& operator=(const ServedVolume&) = delete;

  bool serving() const { return server_.joinable(); }
  std::string error() const { return session_.error(); }
  std::string file(const std::string& name) const { return path() + "/" + name; }
  const std::string& path() const { return directory_.path; }
  // Unmounts as fusermount3 -u does and waits for the loop: its result.
  int unmount() {
    if (umount2(path().c_str(), 0) != 0) {
      ADD_FAILURE() << "umount " << path() << ": " << std::strerror(errno);
      abort_connection();
      (void)umount2(path().c_str(), MNT_DETACH);
    }
    server_.join();
    return status_;
  }

 private:
  // /sys/fs/fuse/connections/N/abort, N the mount's device minor: every read
  // of its /dev/fuse then fails (ENODEV) and the loop ends.
  void abort_connection() const {
    struct stat st {};
    if (stat(path().c_str(), &st) != 0) return;
    std::ofstream(fmt::format("/sys/fs/fuse/connections/{}/abort", minor(st.st_dev))) << "1";
  }

  struct Directory {
    std::string path;
    ~Directory() { (void)rmdir(path.c_str()); }
  };
  Directory directory_;  // first: it goes last
  SystemWallClock clock_;
  Engine engine_;
  FuseAdapter adapter_;
  FuseSession session_;
  std::thread server_;
  int status_ = -1;
};

// Writes `text` to `path` and reads it back.
std::string write_and_read(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  if (fd < 0) return std::string("open: ") + std::strerror(errno);
  std::string back(text.size(), '\0');
  const bool ok = pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()) &&
                  fsync(fd) == 0 &&
                  pread(fd, back.data(), back.size(), 0) == static_cast<ssize_t>(back.size());
  close(fd);
  return ok ? back : std::string("I/O failed: ") + std::strerror(errno);
}

// An O_TMPFILE open: FUSE_TMPFILE, which only a session whose channel serves
// it answers (libfuse 3.14 would say ENOSYS and the kernel EOPNOTSUPP). 0, or
// the errno.
int tmpfile_error(const std::string& directory) {
  const int fd = open(directory.c_str(), O_TMPFILE | O_RDWR, 0600);
  if (fd < 0) return errno;
  const int error = write(fd, "t", 1) == 1 ? 0 : errno;
  close(fd);
  return error;
}

// chown of a set-user-ID file: the kernel asks the session to clear the bit
// (FATTR_KILL_SUIDGID, a flag each session's channel passes on by itself).
mode_t mode_after_chown_of_setuid_file(const std::string& path) {
  const int fd = open(path.c_str(), O_CREAT | O_RDWR, 0755);
  if (fd < 0) return 0;
  mode_t mode = 0;
  struct stat st {};
  if (fchmod(fd, 04755) == 0 && fchown(fd, 0, 0) == 0 && fstat(fd, &st) == 0) mode = st.st_mode;
  close(fd);
  return mode & 07777;
}

TEST(FuseSession, OneProcessServesTwoVolumesEachThroughItsOwnSession) {
  MIMICFS_REQUIRE_MOUNTABLE();
  if (geteuid() != 0) GTEST_SKIP() << "the set-ID checks chown to root";
  ServedVolume nfs("nfs", IoUring::kOff);
  ASSERT_TRUE(nfs.serving()) << nfs.error();
  ServedVolume ext4("ext4", IoUring::kAuto);
  ASSERT_TRUE(ext4.serving()) << ext4.error();

  // Each mount answers from its own volume.
  EXPECT_EQ(write_and_read(nfs.file("a"), "on nfs"), "on nfs");
  EXPECT_EQ(write_and_read(ext4.file("a"), "on ext4!"), "on ext4!");
  struct stat st {};
  ASSERT_EQ(stat(nfs.file("a").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 6);
  ASSERT_EQ(stat(ext4.file("a").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8);
  struct statfs nfs_fs {}, ext4_fs {};
  ASSERT_EQ(statfs(nfs.path().c_str(), &nfs_fs), 0);
  ASSERT_EQ(statfs(ext4.path().c_str(), &ext4_fs), 0);
  EXPECT_EQ(nfs_fs.f_bsize, load_builtin_profile("nfs")->statfs_block_size);
  EXPECT_EQ(ext4_fs.f_bsize, load_builtin_profile("ext4")->statfs_block_size);
  EXPECT_NE(nfs_fs.f_bsize, ext4_fs.f_bsize);

  // What each session negotiated with the kernel at its own INIT.
  // (NFS has no O_TMPFILE: the nfs volume refuses it, where ext4 serves it.)
  EXPECT_EQ(tmpfile_error(nfs.path()), EOPNOTSUPP);
  EXPECT_EQ(tmpfile_error(ext4.path()), 0);
  EXPECT_EQ(mode_after_chown_of_setuid_file(nfs.file("suid")), 0755u);
  EXPECT_EQ(mode_after_chown_of_setuid_file(ext4.file("suid")), 0755u);

  // One unmounted, the other serves on.
  EXPECT_EQ(nfs.unmount(), 0);
  EXPECT_EQ(write_and_read(ext4.file("b"), "still here"), "still here");
  EXPECT_EQ(tmpfile_error(ext4.path()), 0);
  EXPECT_EQ(ext4.unmount(), 0);
}

}  // namespace
}  // namespace mimicfs
