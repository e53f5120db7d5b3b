// SPDX-License-Identifier: Apache-2.0
// Seed 004 (InnoDB page compression with hole punching, MariaDB 10.1): each
// 16 KiB page is written whole, then the part its compressed image does not need
// (here the last 8 KiB) is punched with fallocate(PUNCH_HOLE | KEEP_SIZE).
//
// Expected, on every profile that can punch, and measured on real ext4, xfs and
// btrfs on this kind of machine:
//   - one FIEMAP record per page: each hole ends an extent;
//   - the file's allocated bytes halve;
//   - filefrag's fragment count stays tiny, because a hole that keeps the
//     file-to-device offset does not start a fragment (real ext4: 1 for 64 MiB);
//   - ext4, xfs and an NFS 4.2 server give the punched space back to the device;
//     btrfs does not: a data extent stays allocated, as a bookend, until no part
//     of it is referenced, so the device keeps every byte until the file goes.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/support/mounted_volume.h"
#include "workloads/seed_workloads.h"

namespace mimicfs::testing {
namespace {

constexpr off_t kPage = 16 << 10;
constexpr off_t kPunched = 8 << 10;  // the tail of every page
constexpr off_t kFileSize = 64 << 20;
constexpr uint64_t kPages = kFileSize / kPage;

struct PunchCase {
  std::string profile;
  bool device_gets_space_back;
};

void PrintTo(const PunchCase& c, std::ostream* os) { *os << c.profile; }

class PageCompression : public ::testing::TestWithParam<PunchCase> {};

TEST_P(PageCompression, PunchingHalfOfEveryPage) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const PunchCase& c = GetParam();
  MountedVolume vol(c.profile);
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const std::string path = vol.file("t1.ibd");

  // The table is written and closed (so no preallocation past EOF remains).
  {
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    const auto written = workloads::write_range(fd, 0, kFileSize, 1 << 20, 'p');
    ASSERT_TRUE(written) << written.error();
    ASSERT_EQ(close(fd), 0);
  }
  const nlohmann::json before = vol.stats();
  const auto& file_before = before["files"]["/t1.ibd"];
  ASSERT_EQ(file_before["allocated_bytes"], kFileSize);
  ASSERT_LE(file_before["extents"].get<uint64_t>(), 2u) << "written sequentially";

  const int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const auto punched = workloads::punch_page_tails(fd, kFileSize, kPage, kPunched);
  ASSERT_TRUE(punched) << punched.error();
  ASSERT_EQ(fsync(fd), 0);

  // SEEK_HOLE and SEEK_DATA see the same map.
  EXPECT_EQ(lseek(fd, 0, SEEK_HOLE), kPage - kPunched);
  EXPECT_EQ(lseek(fd, kPage - kPunched, SEEK_DATA), kPage);
  EXPECT_EQ(lseek(fd, 5 * kPage + 100, SEEK_HOLE), 6 * kPage - kPunched);
  // The data that stayed is intact, the punched bytes read as zeros.
  std::vector<char> page(kPage);
  ASSERT_EQ(pread(fd, page.data(), page.size(), 7 * kPage), kPage);
  EXPECT_EQ(std::string(page.data(), kPage - kPunched), std::string(kPage - kPunched, 'p'));
  EXPECT_EQ(std::string(page.data() + kPage - kPunched, kPunched), std::string(kPunched, '\0'));
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, kFileSize) << "KEEP_SIZE";
  EXPECT_EQ(st.st_blocks * 512, kFileSize / 2) << "st_blocks halves with the punches";
  ASSERT_EQ(close(fd), 0);
  ASSERT_TRUE(vol.wait_for_releases());

  const nlohmann::json after = vol.stats();
  const auto& file = after["files"]["/t1.ibd"];
  EXPECT_EQ(file["extents"], kPages) << "one FIEMAP record per page";
  EXPECT_EQ(file["holes"], kPages);
  EXPECT_EQ(file["allocated_bytes"], kFileSize / 2);
  EXPECT_LE(file["fragments"].get<uint64_t>(), 3u) << "holes keep the file-to-device offset";
  EXPECT_EQ(after["ops"]["punch"]["count"], kPages);
  EXPECT_EQ(after["ops"]["punch"]["bytes"], kPages * kPunched);

  const int64_t device_before = before["device"]["allocated_bytes"].get<int64_t>();
  const int64_t device_after = after["device"]["allocated_bytes"].get<int64_t>();
  if (c.device_gets_space_back) {
    EXPECT_EQ(device_before - device_after, kFileSize / 2) << "the punched space is free again";
    EXPECT_EQ(after["device"]["unreferenced_bytes"], 0);
  } else {
    EXPECT_EQ(device_after, device_before) << "bookend extents keep every byte allocated";
    EXPECT_EQ(after["device"]["unreferenced_bytes"], kFileSize / 2);
  }

  // Dropping the table gives everything back on every backend (on xfs once its
  // background reclaim is done).
  ASSERT_EQ(unlink(path.c_str()), 0);
  ASSERT_EQ(vol.ctl("settle"), 0);
  const nlohmann::json dropped = vol.stats();
  EXPECT_EQ(dropped["device"]["allocated_bytes"].get<int64_t>(), device_before - kFileSize);
  EXPECT_EQ(dropped["device"]["unreferenced_bytes"], 0);
}

INSTANTIATE_TEST_SUITE_P(Seed004, PageCompression,
                         ::testing::Values(PunchCase{"ext4", true}, PunchCase{"xfs", true},
                                           PunchCase{"btrfs", false}, PunchCase{"nfs42", true},
                                           PunchCase{"ideal", true}),
                         [](const ::testing::TestParamInfo<PunchCase>& info) {
                           return info.param.profile;
                         });

// NFS before 4.2 has no DEALLOCATE: the punch is refused and nothing changes.
TEST(PageCompression, NfsRefusesThePunch) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  const int fd = open(vol.file("t1.ibd").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  const std::vector<char> data(kPage, 'p');
  ASSERT_EQ(pwrite(fd, data.data(), data.size(), 0), kPage);
  errno = 0;
  EXPECT_EQ(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, kPunched, kPunched), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  close(fd);
  EXPECT_EQ(vol.file_stats("t1.ibd")["allocated_bytes"], kPage);
}

}  // namespace
}  // namespace mimicfs::testing
