// SPDX-License-Identifier: Apache-2.0
// Locks on NFS clients of one emulated server, through real mounts
// (docs/nfs.md, "Locks"): fcntl and OFD locks held through one client
// conflict with another's; flock() is a whole-file fcntl lock (local_lock=none,
// nfs_flock); a lock waits for its holder and a signal ends the wait; a lock
// taken revalidates the file (do_setlk); local_lock keeps kinds on the client.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "tests/support/mounted_volume.h"
#include "tests/support/two_clients.h"

namespace {

using mimicfs::testing::ClientOf;
using mimicfs::testing::MountedVolume;

std::string errno_text() { return std::strerror(errno); }

int open_file(const MountedVolume& volume, const std::string& name, int flags = O_RDWR) {
  return open(volume.file(name).c_str(), flags | O_CREAT | O_CLOEXEC, 0644);
}

struct flock range(short type, off_t start, off_t length) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = start;
  lock.l_len = length;
  return lock;
}

int lock(int fd, short type, off_t start, off_t length, int command = F_SETLK) {
  struct flock request = range(type, start, length);
  return fcntl(fd, command, &request);
}

// What F_GETLK reports for a write lock of the range.
struct flock holder(int fd, off_t start, off_t length) {
  struct flock probe = range(F_WRLCK, start, length);
  EXPECT_EQ(fcntl(fd, F_GETLK, &probe), 0) << errno_text();
  return probe;
}

// Whether `condition` holds within 5 s: a close's RELEASE, which gives back
// OFD and flock locks, reaches the daemon after close(2) returned.
bool eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 500; ++i) {
    if (condition()) return true;
    usleep(10'000);
  }
  return condition();
}

class NfsLocks : public mimicfs::testing::TwoClients {};

// A's write lock keeps B out of its bytes, not out of the rest; B's F_GETLK
// shows it with no pid (another client's: decode_lock_denied), A's own
// process's lock shows its pid.
TEST_P(NfsLocks, AFcntlLockOnOneClientConflictsOnAnother) {
  const int a = open_file(this->a(), "db");
  const int b = open_file(this->b(), "db");
  ASSERT_GE(a, 0) << errno_text();
  ASSERT_GE(b, 0) << errno_text();
  ASSERT_EQ(lock(a, F_WRLCK, 0, 100), 0) << errno_text();

  EXPECT_EQ(lock(b, F_WRLCK, 50, 10), -1);
  EXPECT_EQ(errno, EAGAIN) << errno_text();
  EXPECT_EQ(lock(b, F_RDLCK, 99, 1), -1);
  EXPECT_EQ(lock(b, F_WRLCK, 100, 100), 0) << errno_text();
  const struct flock seen = holder(b, 0, 10);
  EXPECT_EQ(seen.l_type, F_WRLCK);
  EXPECT_EQ(seen.l_start, 0);
  EXPECT_EQ(seen.l_len, 100);
  EXPECT_EQ(seen.l_pid, 0);
  // Another process on A sees this one's pid.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    struct flock probe = range(F_WRLCK, 0, 1);
    const int fd = open_file(this->a(), "db");
    _exit(fcntl(fd, F_GETLK, &probe) == 0 && probe.l_pid == getppid() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the holder's pid on its client";
  EXPECT_GE(this->b().stats()["client"]["lock_conflicts"], 2);

  // Unlocking the middle leaves two locks.
  ASSERT_EQ(lock(a, F_UNLCK, 10, 10), 0) << errno_text();
  EXPECT_EQ(lock(b, F_WRLCK, 10, 10), 0) << errno_text();
  EXPECT_EQ(lock(b, F_WRLCK, 20, 1), -1);
  close(b);
  close(a);
}

// POSIX: any close of the file by the process gives back its locks (the
// kernel's FLUSH carries the owner).
TEST_P(NfsLocks, AnyCloseGivesBackTheProcesssLocks) {
  const int a = open_file(this->a(), "db");
  const int other = open_file(this->a(), "db");
  const int b = open_file(this->b(), "db");
  ASSERT_EQ(lock(a, F_WRLCK, 0, 0), 0) << errno_text();
  ASSERT_EQ(lock(b, F_RDLCK, 0, 1), -1);
  close(other);
  EXPECT_EQ(lock(b, F_RDLCK, 0, 1), 0) << errno_text();
  close(b);
  close(a);
}

// An OFD lock is the open file's: another descriptor's close keeps it, its
// own last close gives it back.
TEST_P(NfsLocks, AnOfdLockLastsUntilItsFileCloses) {
  const int a = open_file(this->a(), "db");
  const int b = open_file(this->b(), "db");
  ASSERT_EQ(lock(a, F_WRLCK, 0, 0, F_OFD_SETLK), 0) << errno_text();
  close(open_file(this->a(), "db"));
  EXPECT_EQ(lock(b, F_WRLCK, 0, 1), -1);
  close(a);
  EXPECT_TRUE(eventually([b] { return lock(b, F_WRLCK, 0, 1) == 0; })) << errno_text();
  close(b);
}

// local_lock=none: flock() is a whole-file fcntl lock of the open file, so it
// conflicts with the same process's fcntl lock through another descriptor
// (a local filesystem keeps the two apart), with another client's flock, and
// needs a descriptor open for writing for LOCK_EX.
TEST_P(NfsLocks, FlockIsAWholeFileFcntlLock) {
  const int a = open_file(this->a(), "lock");
  const int other = open_file(this->a(), "lock");
  const int b = open_file(this->b(), "lock");
  ASSERT_EQ(flock(a, LOCK_EX | LOCK_NB), 0) << errno_text();
  EXPECT_EQ(lock(other, F_RDLCK, 1000, 1), -1);
  EXPECT_EQ(errno, EAGAIN) << errno_text();
  EXPECT_EQ(flock(b, LOCK_SH | LOCK_NB), -1);
  EXPECT_EQ(errno, EWOULDBLOCK) << errno_text();
  ASSERT_EQ(flock(a, LOCK_UN), 0) << errno_text();
  EXPECT_EQ(flock(b, LOCK_SH | LOCK_NB), 0) << errno_text();

  const int reader = open_file(this->a(), "lock", O_RDONLY);
  EXPECT_EQ(flock(reader, LOCK_EX | LOCK_NB), -1);
  EXPECT_EQ(errno, EBADF) << errno_text();
  EXPECT_EQ(flock(reader, LOCK_SH | LOCK_NB), 0) << errno_text();
  close(reader);
  close(b);
  close(other);
  close(a);
}

// F_SETLKW on B waits until A gives the lock back.
TEST_P(NfsLocks, AWaitingLockIsGrantedWhenTheHolderUnlocks) {
  const int a = open_file(this->a(), "db");
  const int b = open_file(this->b(), "db");
  ASSERT_EQ(lock(a, F_WRLCK, 0, 0), 0) << errno_text();
  std::atomic<int> result{1};
  std::thread waiter([&] { result = lock(b, F_WRLCK, 0, 1, F_SETLKW); });
  usleep(200'000);
  EXPECT_EQ(result.load(), 1) << "granted while A held it";
  ASSERT_EQ(lock(a, F_UNLCK, 0, 0), 0) << errno_text();
  waiter.join();
  EXPECT_EQ(result.load(), 0) << errno_text();
  EXPECT_EQ(lock(a, F_WRLCK, 0, 1), -1) << "B holds it now";
  close(b);
  close(a);
}

void on_signal(int) {}

// A signal ends a wait (EINTR: the kernel's FUSE_INTERRUPT), and a killed
// waiter goes at once: nothing stays in D state.
TEST_P(NfsLocks, ASignalEndsAWait) {
  const int a = open_file(this->a(), "db");
  const int b = open_file(this->b(), "db");
  ASSERT_EQ(lock(a, F_WRLCK, 0, 0), 0) << errno_text();

  struct sigaction action {};
  struct sigaction previous {};
  action.sa_handler = on_signal;  // no SA_RESTART: the wait returns EINTR
  ASSERT_EQ(sigaction(SIGUSR1, &action, &previous), 0);
  std::atomic<bool> done{false};
  int result = 0;
  int error = 0;
  std::thread waiter([&] {
    result = lock(b, F_WRLCK, 0, 1, F_SETLKW);
    error = errno;
    done = true;
  });
  // Until it ends: a signal before the wait began ends nothing.
  for (int i = 0; i < 100 && !done; ++i) {
    usleep(50'000);
    pthread_kill(waiter.native_handle(), SIGUSR1);
  }
  waiter.join();
  sigaction(SIGUSR1, &previous, nullptr);
  EXPECT_EQ(result, -1);
  EXPECT_EQ(error, EINTR) << std::strerror(error);

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(lock(b, F_WRLCK, 0, 1, F_SETLKW) == 0 ? 0 : 1);
  // In fcntl(2) (/proc/PID/syscall names it while it blocks), then waiting.
  const std::string syscall = "/proc/" + std::to_string(child) + "/syscall";
  EXPECT_TRUE(eventually([&] {
    std::ifstream in(syscall);
    std::string number;
    return in >> number && number == std::to_string(SYS_fcntl);
  }));
  usleep(100'000);
  kill(child, SIGKILL);
  int status = 0;
  EXPECT_TRUE(eventually([&] { return waitpid(child, &status, WNOHANG) == child; }))
      << "a killed waiter did not end";
  EXPECT_TRUE(WIFSIGNALED(status));
  close(b);
  close(a);
}

// Taking a lock is a cache coherency point (do_setlk): B's pages of a file A
// changed meanwhile are dropped, so what B reads under the lock is A's.
TEST_P(NfsLocks, TakingALockReadsWhatAnotherClientWrote) {
  const int b = open_file(this->b(), "db");
  ASSERT_EQ(pwrite(b, "page 1", 6, 0), 6) << errno_text();
  char seen[7] = {};
  ASSERT_EQ(pread(b, seen, 6, 0), 6);
  const int a = open_file(this->a(), "db");
  ASSERT_EQ(pwrite(a, "page 2", 6, 0), 6) << errno_text();
  ASSERT_EQ(close(a), 0) << errno_text();
  ASSERT_EQ(pread(b, seen, 6, 0), 6);
  EXPECT_STREQ(seen, "page 1") << "B's page cache, not revalidated yet";
  ASSERT_EQ(lock(b, F_RDLCK, 0, 0), 0) << errno_text();
  ASSERT_EQ(pread(b, seen, 6, 0), 6);
  EXPECT_STREQ(seen, "page 2");
  close(b);
}

// A lock on a file another client removed gets ESTALE, as every request
// with its file handle does.
TEST_P(NfsLocks, ALockOnAFileRemovedElsewhereIsStale) {
  const int a = open_file(this->a(), "db");
  ASSERT_GE(a, 0) << errno_text();
  ASSERT_EQ(unlink(this->b().file("db").c_str()), 0) << errno_text();
  EXPECT_EQ(lock(a, F_WRLCK, 0, 0), -1);
  EXPECT_EQ(errno, ESTALE) << errno_text();
  close(a);
}

INSTANTIATE_TEST_SUITE_P(Nfs, NfsLocks, ::testing::Values("nfs", "nfs42"),
                         [](const auto& info) { return info.param; });

// local_lock keeps a kind of lock on the client: no conflict across clients,
// and flock and fcntl locks apart, as on a local filesystem.
TEST(NfsLocksLocal, LocalLockKeepsThatKindOnTheClient) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume a("nfs", {"--set", "client.local_lock=flock"});
  ASSERT_TRUE(a.mounted()) << a.error();
  MountedVolume b(ClientOf{a});
  ASSERT_TRUE(b.mounted()) << b.error();
  const int on_a = open_file(a, "db", O_RDONLY);
  const int on_b = open_file(b, "db", O_RDWR);
  EXPECT_EQ(flock(on_a, LOCK_EX | LOCK_NB), 0) << "local flock: any descriptor";
  EXPECT_EQ(flock(on_b, LOCK_EX | LOCK_NB), 0) << errno_text();
  EXPECT_EQ(lock(on_b, F_WRLCK, 0, 0), 0) << "fcntl and flock apart: " << errno_text();
  EXPECT_EQ(lock(on_a, F_RDLCK, 0, 0), -1) << "fcntl locks still the server's";
  close(on_b);
  close(on_a);

  MountedVolume all("nfs", {"--set", "client.local_lock=all"});
  ASSERT_TRUE(all.mounted()) << all.error();
  MountedVolume other(ClientOf{all});
  ASSERT_TRUE(other.mounted()) << other.error();
  const int first = open_file(all, "db");
  const int second = open_file(other, "db");
  EXPECT_EQ(lock(first, F_WRLCK, 0, 0), 0) << errno_text();
  EXPECT_EQ(lock(second, F_WRLCK, 0, 0), 0) << "each client's own: " << errno_text();
  close(second);
  close(first);
}

}  // namespace
