// SPDX-License-Identifier: Apache-2.0
// include/mimicfs/scoped_mount.h, as a downstream test suite uses it: a mount for
// the object's lifetime, its stats, and nothing left behind.
#include "mimicfs/scoped_mount.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/support/mounted_volume.h"

namespace mimicfs::testing {
namespace {

class ScopedMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MIMICFS_REQUIRE_MOUNTABLE();
    setenv("MIMICFS_BINARY", mimicfs_binary().c_str(), 1);
  }
  void TearDown() override { unsetenv("MIMICFS_BINARY"); }
};

TEST_F(ScopedMountTest, MountsReadsStatsAndUnmounts) {
  std::string path;
  {
    mimicfs::ScopedMount nas("nfs");
    path = nas.path();
    ASSERT_TRUE(is_mounted(path));
    const int fd = open(nas.file("ibdata1").c_str(), O_CREAT | O_RDWR, 0644);
    ASSERT_GE(fd, 0);
    nas.reset_counters();
    ASSERT_EQ(posix_fallocate(fd, 0, 1 << 20), 0);
    close(fd);
    EXPECT_EQ(nas.stats()["ops"]["fallocate"]["errors"]["EOPNOTSUPP"], 1);
    EXPECT_EQ(nas.file_stats("ibdata1")["extents"], 256);
    EXPECT_TRUE(nas.file_stats("missing").is_null());
  }
  EXPECT_FALSE(is_mounted(path));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(ScopedMountTest, MountsUnderTmpdir) {
  const std::string tmpdir = make_temp_dir();
  const char* before = getenv("TMPDIR");
  const std::string saved = before != nullptr ? before : "";
  setenv("TMPDIR", tmpdir.c_str(), 1);
  {
    mimicfs::ScopedMount nas("ideal");
    EXPECT_EQ(nas.path().rfind(tmpdir + "/mimicfs-scoped.", 0), 0u) << nas.path();
    EXPECT_TRUE(is_mounted(nas.path()));
  }
  if (before != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  EXPECT_TRUE(std::filesystem::is_empty(tmpdir));
  std::filesystem::remove_all(tmpdir);
}

TEST_F(ScopedMountTest, OverridesAndBadProfiles) {
  {
    mimicfs::ScopedMount xfs("xfs", {"allocation.speculative_preallocation=false"});
    EXPECT_EQ(xfs.stats()["profile"], "xfs");
  }
  EXPECT_THROW(mimicfs::ScopedMount("zfs"), std::runtime_error);
  EXPECT_THROW(mimicfs::ScopedMount("nfs", {"device.capacity_bytes=7"}), std::runtime_error);
}

}  // namespace
}  // namespace mimicfs::testing
