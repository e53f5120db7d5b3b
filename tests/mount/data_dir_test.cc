// SPDX-License-Identifier: Apache-2.0
// `mimicfs mount --data-dir DIR`: file contents in sparse host files through a
// real mount. Holes, zeros and punched ranges take no host block, a full host
// filesystem fails the write with ENOSPC and loses nothing written before, and
// the host files go with the volume.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mount.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/mounted_volume.h"

namespace mimicfs::testing {
namespace {

namespace fs = std::filesystem;
constexpr off_t kKiB = 1024;
constexpr off_t kMiB = 1024 * kKiB;

std::vector<char> pattern(size_t length, unsigned seed) {
  std::vector<char> out(length);
  for (size_t i = 0; i < length; ++i) out[i] = static_cast<char>(1 + (seed + i * 7) % 251);
  return out;
}

// Bytes of host blocks under DIR/files.
uint64_t host_bytes(const std::string& data_dir) {
  uint64_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(data_dir + "/files")) {
    struct stat st {};
    if (stat(entry.path().c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return bytes;
}

size_t host_files(const std::string& data_dir) {
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(data_dir + "/files")) ++count;
  return count;
}

std::vector<char> read_at(int fd, size_t length, off_t offset) {
  std::vector<char> out(length);
  EXPECT_EQ(pread(fd, out.data(), length, offset), static_cast<ssize_t>(length));
  return out;
}

TEST(DataDirectory, ContentsLiveInSparseHostFilesAndGoWithTheVolume) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string data_dir = make_temp_dir();
  {
    MountedVolume volume("ext4", {"--data-dir", data_dir});
    ASSERT_TRUE(volume.mounted()) << volume.error();
    const int fd = open(volume.file("table.ibd").c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const auto first = pattern(kMiB, 1), second = pattern(kMiB, 2);
    const std::vector<char> zeros(4 * kMiB, 0);
    ASSERT_EQ(pwrite(fd, first.data(), first.size(), 0), kMiB);
    ASSERT_EQ(pwrite(fd, zeros.data(), zeros.size(), kMiB), 4 * kMiB);  // written zeros
    ASSERT_EQ(pwrite(fd, second.data(), second.size(), 64 * kMiB), kMiB);  // past a hole
    ASSERT_EQ(fsync(fd), 0);
    // Only the 2 MiB of data takes host blocks (an extent-tree block aside).
    EXPECT_GE(host_bytes(data_dir), uint64_t(2 * kMiB));
    EXPECT_LE(host_bytes(data_dir), uint64_t(2 * kMiB + 64 * kKiB));
    ASSERT_EQ(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 256 * kKiB, 512 * kKiB), 0)
        << std::strerror(errno);
    EXPECT_LE(host_bytes(data_dir), uint64_t(1536 * kKiB + 64 * kKiB)) << "the punch frees host blocks";
    // Read back through a cold page cache: the bytes come from the host file.
    ASSERT_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    auto expected = first;
    std::fill(expected.begin() + 256 * kKiB, expected.begin() + 768 * kKiB, 0);
    EXPECT_EQ(read_at(fd, kMiB, 0), expected);
    EXPECT_EQ(read_at(fd, 4 * kMiB, kMiB), zeros);
    EXPECT_EQ(read_at(fd, kMiB, 64 * kMiB), second);
    close(fd);
    EXPECT_EQ(host_files(data_dir), 1u);
  }
  EXPECT_EQ(host_files(data_dir), 1u) << "the saved volume keeps its host file";
  EXPECT_TRUE(fs::exists(data_dir + "/volume.meta"));
  EXPECT_FALSE(fs::exists(data_dir + "/mounted"));
  {
    MountedVolume again("ext4", {"--data-dir", data_dir});
    ASSERT_TRUE(again.mounted()) << again.error();
    ASSERT_EQ(unlink(again.file("table.ibd").c_str()), 0);
  }
  EXPECT_EQ(host_files(data_dir), 0u) << "a file removed takes its host file with it";
  fs::remove_all(data_dir);
}

// Every regular file under `dir`, by path, with its contents.
std::map<std::string, std::string> contents_under(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.is_symlink()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    out[fs::relative(entry.path(), dir).string()] = text.str();
  }
  return out;
}

// A database's files: a tablespace written, punched and grown, a preallocated
// log, directories, xattrs, a symlink and a hard link, a removed file.
void database_files(const MountedVolume& volume) {
  ASSERT_EQ(mkdir(volume.file("db").c_str(), 0750), 0);
  const int t = open(volume.file("db/t1.ibd").c_str(), O_RDWR | O_CREAT, 0640);
  ASSERT_GE(t, 0);
  for (int i = 0; i < 64; ++i) {
    const auto page = pattern(16 * kKiB, i);
    ASSERT_EQ(pwrite(t, page.data(), page.size(), i * 48 * kKiB), 16 * kKiB);
  }
  (void)fallocate(t, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4 * kKiB, 100 * kKiB);
  ASSERT_EQ(fsetxattr(t, "user.engine", "InnoDB", 6, 0), 0);
  ASSERT_EQ(fsync(t), 0);
  close(t);
  const int log = open(volume.file("db/redo.log").c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(log, 0);
  (void)posix_fallocate(log, 0, 2 * kMiB);
  const auto entry = pattern(5000, 7);
  ASSERT_EQ(pwrite(log, entry.data(), entry.size(), 0), 5000);
  close(log);
  ASSERT_EQ(symlink("db/t1.ibd", volume.file("latest").c_str()), 0);
  ASSERT_EQ(link(volume.file("db/t1.ibd").c_str(), volume.file("backup.ibd").c_str()), 0);
  const int gone = open(volume.file("gone").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_EQ(pwrite(gone, entry.data(), entry.size(), 0), 5000);
  close(gone);
  ASSERT_EQ(unlink(volume.file("gone").c_str()), 0);
}

TEST(DataDirectory, AVolumeSurvivesItsUnmountWithTheSameStatsAndContents) {
  MIMICFS_REQUIRE_MOUNTABLE();
  for (const std::string profile : {"xfs", "btrfs", "nfs"}) {
    SCOPED_TRACE(profile);
    const std::string data_dir = make_temp_dir();
    nlohmann::json before;
    std::map<std::string, std::string> files_before;
    {
      MountedVolume volume(profile, {"--data-dir", data_dir});
      ASSERT_TRUE(volume.mounted()) << volume.error();
      database_files(volume);
      ASSERT_EQ(volume.ctl("sync"), 0);  // what the unmount would do
      files_before = contents_under(volume.path());  // reads count: before the stats
      ASSERT_TRUE(volume.wait_for_releases());  // the kernel sends them after close(2)
      before = volume.stats();
    }
    {
      MountedVolume volume(profile, {"--data-dir", data_dir});
      ASSERT_TRUE(volume.mounted()) << volume.error();
      nlohmann::json after = volume.stats();
      // The new mount's own look at its root (the kernel's GETATTR at mount)
      // is an operation of this mount: one or two more getattr.
      const uint64_t getattr_before = before["ops"]["getattr"]["count"].get<uint64_t>();
      const uint64_t getattr_after = after["ops"]["getattr"]["count"].get<uint64_t>();
      EXPECT_GE(getattr_after, getattr_before);
      EXPECT_LE(getattr_after, getattr_before + 2);
      after["ops"]["getattr"]["count"] = getattr_before;
      // The daemon's transport counters are this mount's, not the volume's.
      before.erase("fuse");
      after.erase("fuse");
      EXPECT_EQ(after, before) << nlohmann::json::diff(before, after).dump();
      EXPECT_EQ(contents_under(volume.path()), files_before);
      char target[64] = {};
      EXPECT_EQ(readlink(volume.file("latest").c_str(), target, sizeof target - 1), 9);
      EXPECT_STREQ(target, "db/t1.ibd");
      char value[16] = {};
      EXPECT_EQ(getxattr(volume.file("db/t1.ibd").c_str(), "user.engine", value, sizeof value), 6);
      struct stat st {};
      ASSERT_EQ(stat(volume.file("backup.ibd").c_str(), &st), 0);
      EXPECT_EQ(st.st_nlink, 2u);
      // And it goes on: a write lands and is there the next time.
      const auto more = pattern(kMiB, 3);
      const int t = open(volume.file("db/t1.ibd").c_str(), O_RDWR);
      ASSERT_EQ(pwrite(t, more.data(), more.size(), 8 * kMiB), kMiB);
      close(t);
    }
    {
      MountedVolume volume(profile, {"--data-dir", data_dir});
      ASSERT_TRUE(volume.mounted()) << volume.error();
      const int t = open(volume.file("db/t1.ibd").c_str(), O_RDONLY);
      EXPECT_EQ(read_at(t, kMiB, 8 * kMiB), pattern(kMiB, 3));
      close(t);
    }
    fs::remove_all(data_dir);
  }
}

TEST(DataDirectory, AfterACrashTheNextMountHasTheDurableStateOnly) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string data_dir = make_temp_dir();
  {
    MountedVolume volume("ext4", {"--data-dir", data_dir});
    ASSERT_TRUE(volume.mounted()) << volume.error();
    const auto data = pattern(64 * kKiB, 1);
    const int synced = open(volume.file("synced").c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_EQ(pwrite(synced, data.data(), data.size(), 0), 64 * kKiB);
    ASSERT_EQ(fsync(synced), 0);
    ASSERT_EQ(pwrite(synced, data.data(), data.size(), 64 * kKiB), 64 * kKiB);  // not synced
    close(synced);
    const int root = open(volume.path().c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_EQ(fsync(root), 0);  // "synced" is durable by name too
    close(root);
    const int lost = open(volume.file("lost").c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_EQ(pwrite(lost, data.data(), data.size(), 0), 64 * kKiB);
    close(lost);
    ASSERT_EQ(volume.ctl("crash"), 0);
  }
  MountedVolume volume("ext4", {"--data-dir", data_dir});
  ASSERT_TRUE(volume.mounted()) << volume.error();
  struct stat st {};
  ASSERT_EQ(stat(volume.file("synced").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 64 * kKiB);
  const auto data = pattern(64 * kKiB, 1);
  EXPECT_EQ(contents_under(volume.path())["synced"], std::string(data.begin(), data.end()));
  EXPECT_NE(stat(volume.file("lost").c_str(), &st), 0) << "created after the last commit";
  fs::remove_all(data_dir);
}

TEST(DataDirectory, ASavedVolumeIsRefusedToAnotherProfileOrWhenItsFileIsBad) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string data_dir = make_temp_dir();
  {
    MountedVolume volume("xfs", {"--data-dir", data_dir});
    ASSERT_TRUE(volume.mounted()) << volume.error();
  }
  const std::string mountpoint = make_temp_dir();
  auto r = run_command({mimicfs_binary(), "mount", "--profile", "ext4", "--data-dir", data_dir,
                        mountpoint});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_EQ(r.err, "mimicfs: --data-dir " + data_dir +
                       ": holds a volume made with profile xfs; it cannot be mounted as ext4 "
                       "(give --profile xfs, or an empty directory)\n");
  r = run_command({mimicfs_binary(), "mount", "--profile", "xfs", "--set",
                   "allocation.speculative_preallocation=false", "--data-dir", data_dir,
                   mountpoint});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.err.find("other settings than this mount's"), std::string::npos) << r.err;
  std::ofstream(data_dir + "/volume.meta", std::ios::trunc) << "not cbor";
  r = run_command({mimicfs_binary(), "mount", "--profile", "xfs", "--data-dir", data_dir,
                   mountpoint});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_EQ(r.err, "mimicfs: --data-dir " + data_dir +
                       ": volume.meta is not a saved mimicfs volume (corrupt?)\n");
  EXPECT_FALSE(is_mounted(mountpoint));
  fs::remove(mountpoint);
  fs::remove_all(data_dir);
}

// The daemon serving `mountpoint`: the process with /dev/fuse open whose
// command line names it.
pid_t daemon_of(const std::string& mountpoint) {
  for (const auto& proc : fs::directory_iterator("/proc")) {
    const std::string pid = proc.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline(proc.path() / "cmdline");
    std::string arg;
    bool names = false;
    while (std::getline(cmdline, arg, '\0')) names = names || arg == mountpoint;
    if (!names) continue;
    std::error_code ec;
    for (const auto& fd : fs::directory_iterator(proc.path() / "fd", ec)) {
      if (fs::read_symlink(fd.path(), ec) == "/dev/fuse") return std::stoi(pid);
    }
  }
  return -1;
}

TEST(DataDirectory, ADaemonKilledWhileServingLeavesADirectoryThatIsRefused) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string data_dir = make_temp_dir();
  const std::string mountpoint = make_temp_dir();
  auto r = run_command({mimicfs_binary(), "mount", "--profile", "nfs", "--data-dir", data_dir,
                        mountpoint});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  const auto data = pattern(100 * kKiB, 4);
  const int fd = open((mountpoint + "/f").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_EQ(pwrite(fd, data.data(), data.size(), 0), 100 * kKiB);
  close(fd);
  const pid_t daemon = daemon_of(mountpoint);
  ASSERT_GT(daemon, 0);
  ASSERT_EQ(kill(daemon, SIGKILL), 0);
  for (int i = 0; i < 100 && kill(daemon, 0) == 0; ++i) usleep(20'000);
  run_command({"fusermount3", "-u", "-q", mountpoint});
  r = run_command({mimicfs_binary(), "mount", "--profile", "nfs", "--data-dir", data_dir,
                   mountpoint});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_EQ(r.err, "mimicfs: --data-dir " + data_dir +
                       ": the mimicfs that served it last did not unmount (killed?), so its files "
                       "no longer match its saved volume; empty the directory to start afresh\n");
  EXPECT_FALSE(is_mounted(mountpoint));
  fs::remove(mountpoint);
  fs::remove_all(data_dir);
}

TEST(DataDirectory, ADirectoryInUseOrMissingIsRefusedWithOneLine) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string data_dir = make_temp_dir();
  const std::string second = make_temp_dir();
  {
    MountedVolume volume("nfs", {"--data-dir", data_dir});
    ASSERT_TRUE(volume.mounted()) << volume.error();
    auto r = run_command({mimicfs_binary(), "mount", "--data-dir", data_dir, second});
    EXPECT_EQ(r.exit_status, 2);
    EXPECT_EQ(r.err, "mimicfs: --data-dir " + data_dir + ": in use by another mimicfs mount\n");
    EXPECT_FALSE(is_mounted(second));
    r = run_command({mimicfs_binary(), "mount", "--data-dir", data_dir + "/missing", second});
    EXPECT_EQ(r.exit_status, 2);
    EXPECT_EQ(r.err, "mimicfs: --data-dir " + data_dir + "/missing: No such file or directory\n");
    r = run_command({mimicfs_binary(), "mount", "--data-dir", second, second});
    EXPECT_EQ(r.exit_status, 2);
    EXPECT_EQ(r.err, "mimicfs: --data-dir " + second + ": inside the mountpoint " + second + "\n");
    EXPECT_TRUE(fs::is_empty(second)) << "nothing made in a refused directory";
    r = run_command({mimicfs_binary(), "run", "--data-dir", data_dir, "--", "true"});
    EXPECT_EQ(r.exit_status, 2);
    EXPECT_EQ(r.err, "mimicfs: --data-dir " + data_dir + ": in use by another mimicfs mount\n");
  }
  fs::remove(second);
  fs::remove_all(data_dir);
}

// A directory on a read-only filesystem (a tmpfs mounted read-only: root
// passes every permission check, so a mode would not do).
TEST(DataDirectory, AnUnwritableDirectoryIsRefusedWithOneLine) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string data_dir = make_temp_dir();
  if (geteuid() != 0 || mount("tmpfs", data_dir.c_str(), "tmpfs", MS_RDONLY, "size=1m") != 0) {
    fs::remove(data_dir);
    GTEST_SKIP() << "needs root to mount a read-only tmpfs";
  }
  const std::string mountpoint = make_temp_dir();
  auto r = run_command({mimicfs_binary(), "mount", "--data-dir", data_dir, mountpoint});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_EQ(r.err, "mimicfs: --data-dir " + data_dir + ": not writable (Read-only file system)\n");
  EXPECT_FALSE(is_mounted(mountpoint));
  EXPECT_EQ(umount(data_dir.c_str()), 0);
  fs::remove(data_dir);
  fs::remove(mountpoint);
}

TEST(DataDirectory, RunKeepsTheVolumeInTheDirectoryFromOneCommandToTheNext) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string data_dir = make_temp_dir();
  auto r = run_command({mimicfs_binary(), "run", "--profile", "xfs", "--data-dir", data_dir, "--",
                        "sh", "-c",
                        "head -c 300000 /dev/urandom > \"$MIMICFS_MOUNT/f\" && sync && "
                        "ls \"$0/files\" | wc -l && stat -c %s \"$0\"/files/*",
                        data_dir});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out, "1\n300000\n");
  r = run_command({mimicfs_binary(), "run", "--profile", "xfs", "--data-dir", data_dir, "--",
                   "sh", "-c", "wc -c < \"$MIMICFS_MOUNT/f\""});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out, "300000\n");
  fs::remove_all(data_dir);
}

// A host filesystem of 8 MiB (a tmpfs) under a volume of 256 GiB: the host
// fills first.
TEST(DataDirectory, AFullHostFailsTheWriteWithEnospcAndLosesNothing) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string data_dir = make_temp_dir();
  if (geteuid() != 0 || mount("tmpfs", data_dir.c_str(), "tmpfs", 0, "size=8m") != 0) {
    fs::remove(data_dir);
    GTEST_SKIP() << "needs root to mount a small tmpfs";
  }
  {
    MountedVolume volume("ideal", {"--data-dir", data_dir});
    ASSERT_TRUE(volume.mounted()) << volume.error();
    const auto kept = pattern(3 * kMiB, 5);
    const int a = open(volume.file("kept").c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_EQ(pwrite(a, kept.data(), kept.size(), 0), 3 * kMiB);
    ASSERT_EQ(fsync(a), 0);
    const int b = open(volume.file("filler").c_str(), O_RDWR | O_CREAT, 0644);
    const auto chunk = pattern(256 * kKiB, 9);
    off_t written = 0;
    int error = 0;
    while (written < 16 * kMiB) {
      if (pwrite(b, chunk.data(), chunk.size(), written) != static_cast<ssize_t>(chunk.size())) {
        error = errno;
        break;
      }
      written += chunk.size();
    }
    EXPECT_EQ(error, ENOSPC) << "wrote " << written << " bytes";
    EXPECT_LT(written, 8 * kMiB);
    struct stat st {};
    ASSERT_EQ(fstat(b, &st), 0);
    EXPECT_EQ(st.st_size, written) << "the refused write changed nothing";
    ASSERT_EQ(posix_fadvise(a, 0, 0, POSIX_FADV_DONTNEED), 0);
    EXPECT_EQ(read_at(a, kept.size(), 0), kept);
    ASSERT_EQ(posix_fadvise(b, 0, 0, POSIX_FADV_DONTNEED), 0);
    for (off_t at = 0; at < written; at += chunk.size()) {
      ASSERT_EQ(read_at(b, chunk.size(), at), chunk) << "at " << at;
    }
    // The daemon serves on, and freeing host space lets writes go on.
    close(b);
    ASSERT_EQ(unlink(volume.file("filler").c_str()), 0);
    // Until the removal is committed a crash could bring the file back, so its
    // contents stay (docs/architecture.md); a volume sync commits it.
    ASSERT_EQ(volume.ctl("sync"), 0);
    EXPECT_EQ(pwrite(a, chunk.data(), chunk.size(), 3 * kMiB), static_cast<ssize_t>(chunk.size()))
        << std::strerror(errno);
    close(a);
  }
  EXPECT_EQ(umount(data_dir.c_str()), 0);
  fs::remove(data_dir);
}

}  // namespace
}  // namespace mimicfs::testing
