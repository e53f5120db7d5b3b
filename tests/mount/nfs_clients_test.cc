// SPDX-License-Identifier: Apache-2.0
// Several NFS clients of one emulated server, through real mounts
// (`mimicfs mount --client-of`, docs/nfs.md): one daemon serves them all,
// each client has its own open files and silly renames, and a file one client
// removes is stale on another that has it open (ESTALE), as on Linux.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/mounted_volume.h"
#include "tests/support/two_clients.h"

namespace {

using mimicfs::testing::ClientOf;
using mimicfs::testing::make_temp_dir;
using mimicfs::testing::mimicfs_binary;
using mimicfs::testing::MountedVolume;
using mimicfs::testing::names_in;
using mimicfs::testing::run_command;

std::string errno_text() { return std::strerror(errno); }


bool write_file(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  return close(fd) == 0 && ok;
}

// stats.json of `volume` once it lists no other client: an unmounted
// client leaves the daemon's list after its loop ended, a little after
// fusermount3 returned.
nlohmann::json stats_once_alone(const MountedVolume& volume) {
  nlohmann::json stats = volume.stats();
  for (int i = 0; i < 500 && stats.contains("clients"); ++i) {
    usleep(10'000);
    stats = volume.stats();
  }
  return stats;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// db/t.ibd, holding "rows".
bool make_table(const MountedVolume& volume) {
  return mkdir(volume.file("db").c_str(), 0755) == 0 && write_file(volume.file("db/t.ibd"), "rows");
}

// A mount of the profile (A) and a second client of its server (B).
class NfsClients : public mimicfs::testing::TwoClients {};

// What A writes and closes, B opens and reads; stats.json lists both clients.
TEST_P(NfsClients, ASecondClientSeesTheSameServer) {
  MountedVolume& a = this->a();
  MountedVolume& b = this->b();
  ASSERT_TRUE(write_file(a.file("shared"), "from A")) << errno_text();
  EXPECT_EQ(read_file(b.file("shared")), "from A");
  ASSERT_TRUE(write_file(b.file("back"), "from B")) << errno_text();
  EXPECT_EQ(read_file(a.file("back")), "from B");

  const auto stats = b.stats();
  EXPECT_EQ(stats["profile"], GetParam());
  ASSERT_EQ(stats["clients"].size(), 2u);
  EXPECT_EQ(stats["clients"][0]["mount"], a.path());
  EXPECT_EQ(stats["clients"][1]["mount"], b.path());
  // One server: one set of counters for both clients' requests.
  EXPECT_EQ(a.stats()["ops"]["write"]["count"], stats["ops"]["write"]["count"]);
}

// Close-to-open: B's pages of a file stay B's until B opens it again after A
// changed it; that open drops them (nfs_open -> nfs_revalidate_inode).
TEST_P(NfsClients, AnOpenAfterAnotherClientsChangeReadsTheNewData) {
  MountedVolume& a = this->a();
  MountedVolume& b = this->b();
  ASSERT_TRUE(write_file(a.file("f"), "version 1"));
  EXPECT_EQ(read_file(b.file("f")), "version 1");  // now in B's page cache
  EXPECT_EQ(read_file(b.file("f")), "version 1");
  ASSERT_TRUE(write_file(a.file("f"), "version 2"));  // the same size
  EXPECT_EQ(read_file(b.file("f")), "version 2");
  // B's own change does not make B drop its pages; A's next open sees it.
  ASSERT_TRUE(write_file(b.file("f"), "version 3"));
  EXPECT_EQ(read_file(a.file("f")), "version 3");
  EXPECT_EQ(read_file(b.file("f")), "version 3");
}

// Unmounting either client leaves the other serving, the first one included.
TEST_P(NfsClients, UnmountingOneClientLeavesTheOtherServing) {
  ASSERT_TRUE(write_file(b().file("one"), "1"));
  b_.reset();
  EXPECT_EQ(read_file(a().file("one")), "1");
  EXPECT_FALSE(stats_once_alone(a()).contains("clients")) << "one client left";

  b_.emplace(ClientOf{a()});
  ASSERT_TRUE(b().mounted()) << b().error();
  a_.reset();  // the mount the daemon was started for
  ASSERT_TRUE(write_file(b().file("two"), "2")) << errno_text();
  EXPECT_EQ(read_file(b().file("one")), "1");
  EXPECT_EQ(b().stats()["clients"].size(), 2u) << "the first client stays the server's";
}

// Linux removes a file at once when the client removing it does not have it
// open (nfs_unlink): a reader on another client is left with a stale handle.
TEST_P(NfsClients, AFileRemovedByAnotherClientIsStaleWhereItIsOpen) {
  MountedVolume& a = this->a();
  MountedVolume& b = this->b();
  ASSERT_TRUE(make_table(a));
  const int fd = open(b.file("db/t.ibd").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << errno_text();

  ASSERT_EQ(unlink(a.file("db/t.ibd").c_str()), 0) << errno_text();
  EXPECT_TRUE(names_in(a.file("db")).empty()) << "no silly rename: A has it not open";
  EXPECT_EQ(rmdir(a.file("db").c_str()), 0) << errno_text();

  char buffer[4];
  EXPECT_EQ(pread(fd, buffer, sizeof buffer, 0), -1);
  EXPECT_EQ(errno, ESTALE) << errno_text();
  // Into B's page cache, lost at its writeback: close(2) reports it.
  EXPECT_EQ(pwrite(fd, "lost", 4, 0), 4) << errno_text();
  EXPECT_EQ(close(fd), -1);
  EXPECT_EQ(errno, ESTALE) << errno_text();
  EXPECT_GE(b.stats()["client"]["stale_handles"], 2);
  EXPECT_EQ(a.stats()["client"]["stale_handles"], 0);
}

// A's silly-renamed file is an ordinary file to B, which may remove it: A's
// descriptor is stale then, and B's rmdir of the directory succeeds.
TEST_P(NfsClients, ASillyRenameIsOneClientsOwn) {
  MountedVolume& a = this->a();
  MountedVolume& b = this->b();
  ASSERT_TRUE(make_table(a));
  const int fd = open(a.file("db/t.ibd").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << errno_text();
  ASSERT_EQ(unlink(a.file("db/t.ibd").c_str()), 0);
  const auto on_b = names_in(b.file("db"));
  ASSERT_EQ(on_b.size(), 1u);
  EXPECT_TRUE(on_b[0].starts_with(".nfs")) << on_b[0];
  EXPECT_EQ(rmdir(b.file("db").c_str()), -1);
  EXPECT_EQ(errno, ENOTEMPTY) << errno_text();

  EXPECT_EQ(unlink(b.file("db/" + on_b[0]).c_str()), 0) << errno_text();
  EXPECT_EQ(rmdir(b.file("db").c_str()), 0) << errno_text();
  // A chmod always reaches the server (a stat may be answered from A's cache).
  EXPECT_EQ(fchmod(fd, 0600), -1);
  EXPECT_EQ(errno, ESTALE) << errno_text();
  close(fd);
}

off_t size_of(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

// B's attribute cache (nfs_attribute_cache_expired): a stat on B shows the
// size B last had from the server until acregmin (3 s of emulated time) has
// passed; `ctl time advance` lets that time pass.
TEST_P(NfsClients, AStatOnAnotherClientIsStaleUntilItsAttributeCacheExpires) {
  MountedVolume& a = this->a();
  MountedVolume& b = this->b();
  ASSERT_TRUE(write_file(a.file("log"), "1"));
  EXPECT_EQ(size_of(b.file("log")), 1);
  ASSERT_TRUE(write_file(a.file("log"), "12345"));
  EXPECT_EQ(size_of(a.file("log")), 5) << "the writer sees its own write";
  EXPECT_EQ(size_of(b.file("log")), 1) << "B's cache of it is younger than acregmin";
  ASSERT_EQ(a.ctl("time advance 2s"), 0);
  EXPECT_EQ(size_of(b.file("log")), 1) << "2 s later";
  ASSERT_EQ(b.ctl("time advance 1s"), 0);
  EXPECT_EQ(size_of(b.file("log")), 5) << "3 s later: B asked the server";
  EXPECT_GE(b.stats()["client"]["stale_attributes"], 2);
  EXPECT_EQ(a.stats()["client"]["stale_attributes"], 0);
}

// A reader that keeps the file open reads its cached pages until a
// revalidation finds a new mtime and drops them (nfs_update_inode's
// NFS_INO_INVALID_DATA): no reopen needed.
TEST_P(NfsClients, AnOpenReaderSeesNewDataOnceItsAttributeCacheExpires) {
  MountedVolume& a = this->a();
  MountedVolume& b = this->b();
  ASSERT_TRUE(write_file(a.file("f"), "version 1"));
  const int fd = open(b.file("f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << errno_text();
  char buffer[16] = {};
  ASSERT_EQ(pread(fd, buffer, sizeof buffer, 0), 9);
  ASSERT_TRUE(write_file(a.file("f"), "version 2"));
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  ASSERT_EQ(pread(fd, buffer, sizeof buffer, 0), 9);
  EXPECT_EQ(std::string(buffer, 9), "version 1") << "B's pages, younger than acregmin";
  ASSERT_EQ(a.ctl("time advance 3s"), 0);
  ASSERT_EQ(fstat(fd, &st), 0);
  ASSERT_EQ(pread(fd, buffer, sizeof buffer, 0), 9);
  EXPECT_EQ(std::string(buffer, 9), "version 2");
  close(fd);
}

// A directory another client removed, where a program still works through a
// descriptor (or its working directory): ESTALE, "Stale file handle", where a
// local filesystem says ENOENT. Its attributes stay cached for acdirmin.
TEST_P(NfsClients, ADirectoryRemovedByAnotherClientIsStaleWhereItIsInUse) {
  MountedVolume& a = this->a();
  MountedVolume& b = this->b();
  ASSERT_EQ(mkdir(a.file("build").c_str(), 0755), 0) << errno_text();
  const int dir = open(b.file("build").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir, 0) << errno_text();
  ASSERT_EQ(rmdir(a.file("build").c_str()), 0) << errno_text();
  EXPECT_EQ(openat(dir, "out.o", O_CREAT | O_WRONLY | O_CLOEXEC, 0644), -1);
  EXPECT_EQ(errno, ESTALE) << errno_text();
  struct stat st {};
  EXPECT_EQ(fstat(dir, &st), 0) << "B's attribute cache: " << errno_text();
  ASSERT_EQ(a.ctl("time advance 30s"), 0);  // acdirmin
  EXPECT_EQ(fstat(dir, &st), -1);
  EXPECT_EQ(errno, ESTALE) << errno_text();
  close(dir);
  EXPECT_GE(b.stats()["client"]["stale_handles"], 2);
}

// A file another client removed, which B's kernel still has (an O_PATH
// descriptor, a cached name): its cached attributes, then ESTALE; by name,
// the VFS looks a stale handle's name up again: ENOENT.
TEST_P(NfsClients, AFileRemovedByAnotherClientIsStaleOnceTheCacheExpires) {
  MountedVolume& a = this->a();
  MountedVolume& b = this->b();
  ASSERT_TRUE(write_file(a.file("old.log"), "12345"));
  const int path = open(b.file("old.log").c_str(), O_PATH | O_CLOEXEC);
  ASSERT_GE(path, 0) << errno_text();
  ASSERT_EQ(unlink(a.file("old.log").c_str()), 0) << errno_text();
  struct stat st {};
  ASSERT_EQ(fstat(path, &st), 0) << errno_text();
  EXPECT_EQ(st.st_size, 5) << "B's attribute cache";
  ASSERT_EQ(a.ctl("time advance 3s"), 0);
  EXPECT_EQ(fstat(path, &st), -1);
  EXPECT_EQ(errno, ESTALE) << errno_text();
  close(path);
  EXPECT_EQ(size_of(b.file("old.log")), -1);
  EXPECT_EQ(errno, ENOENT) << errno_text();
}

INSTANTIATE_TEST_SUITE_P(Nfs, NfsClients, ::testing::Values("nfs", "nfs42"),
                         [](const auto& info) { return info.param; });

// noac: no attribute cache, so B's stat shows A's change at once.
TEST(NfsClientsNoac, AStatAsksTheServerEveryTime) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume a("nfs", {"--set", "client.noac=true"});
  ASSERT_TRUE(a.mounted()) << a.error();
  MountedVolume b(ClientOf{a});
  ASSERT_TRUE(b.mounted()) << b.error();
  ASSERT_TRUE(write_file(a.file("log"), "1"));
  EXPECT_EQ(size_of(b.file("log")), 1);
  ASSERT_TRUE(write_file(a.file("log"), "12345"));
  EXPECT_EQ(size_of(b.file("log")), 5);
  EXPECT_EQ(b.stats()["client"]["stale_attributes"], 0);
}

// One line and status 2 for what cannot be a client; `run --client-of` runs
// a command on a temporary client.
TEST(NfsClientsCommandLine, RefusesWhatCannotBeAClient) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume local("ext4");
  ASSERT_TRUE(local.mounted()) << local.error();
  const std::string dir = make_temp_dir();
  auto refused = run_command({mimicfs_binary(), "mount", "--client-of", local.path(), dir});
  EXPECT_EQ(refused.exit_status, 2);
  EXPECT_NE(refused.err.find("local filesystem"), std::string::npos) << refused.err;
  refused = run_command({mimicfs_binary(), "mount", "--client-of", dir, dir});
  EXPECT_EQ(refused.exit_status, 2);
  EXPECT_NE(refused.err.find("not a mimicfs mount"), std::string::npos) << refused.err;

  MountedVolume nfs("nfs");
  ASSERT_TRUE(nfs.mounted()) << nfs.error();
  refused = run_command(
      {mimicfs_binary(), "mount", "--client-of", nfs.path(), "--set", "client.nfs=false", dir});
  EXPECT_EQ(refused.exit_status, 2);
  EXPECT_NE(refused.err.find("--set cannot be given with --client-of"), std::string::npos)
      << refused.err;
  refused = run_command({mimicfs_binary(), "mount", "--client-of", nfs.path(), nfs.path()});
  EXPECT_EQ(refused.exit_status, 2);
  EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
  rmdir(dir.c_str());

  ASSERT_TRUE(write_file(nfs.file("x"), "on the server"));
  const auto ran = run_command(
      {mimicfs_binary(), "run", "--client-of", nfs.path(), "--", "sh", "-c", "cat \"$MIMICFS_MOUNT/x\""});
  EXPECT_EQ(ran.exit_status, 0) << ran.err;
  EXPECT_EQ(ran.out, "on the server");
  EXPECT_FALSE(stats_once_alone(nfs).contains("clients")) << "run's client is gone";
}

}  // namespace
