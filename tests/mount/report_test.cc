// SPDX-License-Identifier: Apache-2.0
// `mimicfs report`: the SVG shows each file's extents along the device, and
// seed 003's interleaving is visible as alternating runs.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "tests/support/mounted_volume.h"

namespace mimicfs::testing {
namespace {

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(Report, InterleavedWritersShowAsAlternatingRuns) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("xfs", {"--set", "allocation.speculative_preallocation=false"});
  ASSERT_TRUE(vol.mounted()) << vol.error();
  // Two files grown in turns, each write made durable at once (seed 003); the
  // second writer starts after the first's first write (writers that start
  // together begin in different groups: allocation.group_trylock).
  const std::vector<char> chunk(32 << 10, 'z');
  const int a = open(vol.file("datafile0").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(a, 0);
  ASSERT_EQ(pwrite(a, chunk.data(), chunk.size(), 0), 32 << 10);
  ASSERT_EQ(fdatasync(a), 0);
  const int b = open(vol.file("datafile1").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(b, 0);
  for (int i = 0; i < 64; ++i) {
    ASSERT_EQ(pwrite(b, chunk.data(), chunk.size(), i * chunk.size()), 32 << 10);
    ASSERT_EQ(fdatasync(b), 0);
    if (i + 1 == 64) break;
    ASSERT_EQ(pwrite(a, chunk.data(), chunk.size(), (i + 1) * chunk.size()), 32 << 10);
    ASSERT_EQ(fdatasync(a), 0);
  }
  close(a);
  close(b);

  const std::string out = make_temp_dir() + "/layout.svg";
  auto r = run_command({mimicfs_binary(), "report", vol.path(), "--out", out});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  std::stringstream svg;
  svg << std::ifstream(out).rdbuf();
  const std::string text = svg.str();
  EXPECT_TRUE(text.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"")) << text.substr(0, 80);
  EXPECT_TRUE(text.ends_with("</svg>\n"));
  EXPECT_NE(text.find("profile xfs"), std::string::npos);
  EXPECT_NE(text.find("/datafile0: 2.0 MiB, 2.0 MiB, 64 extents, 64 fragments"), std::string::npos);
  EXPECT_NE(text.find("/datafile1: 2.0 MiB, 2.0 MiB, 64 extents, 64 fragments"), std::string::npos);
  // Each 32 KiB write is its own run on the device, alternating between the files.
  EXPECT_GE(count(text, "data-file=\"/datafile0\""), 64u);
  EXPECT_GE(count(text, "data-file=\"/datafile1\""), 64u);
  std::filesystem::remove_all(std::filesystem::path(out).parent_path());
}

// With many files the first 20 by rank have colours of their own and a legend
// line each; the rest are one colour, "other", summed on one line.
TEST(Report, ManyFilesRankTwentyAndGroupTheRest) {
  MIMICFS_REQUIRE_MOUNTABLE();
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  // File i has i+1 extents: a posix_fallocate-like byte every 4 KiB on nfs.
  for (int i = 0; i < 30; ++i) {
    const int fd = open(vol.file("f" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    for (int b = 0; b <= i; ++b) ASSERT_EQ(pwrite(fd, "x", 1, b * 4096 + 4095), 1);
    close(fd);
  }
  const std::string dir = make_temp_dir();
  for (const std::string rank : {"extents", "allocated"}) {
    SCOPED_TRACE(rank);
    const std::string out = dir + "/" + rank + ".svg";
    auto r = run_command({mimicfs_binary(), "report", vol.path(), "--out", out, "--rank", rank});
    ASSERT_EQ(r.exit_status, 0) << r.err;
    std::stringstream svg;
    svg << std::ifstream(out).rdbuf();
    const std::string text = svg.str();
    EXPECT_NE(text.find("/f29: 120.0 KiB, 15.0 KiB, 30 extents"), std::string::npos) << text;
    EXPECT_NE(text.find("/f10: 44.0 KiB, 5.5 KiB, 11 extents"), std::string::npos);
    EXPECT_EQ(text.find("/f9: "), std::string::npos) << "ranked 21st: among the others";
    EXPECT_NE(text.find("10 other files: "), std::string::npos);
    EXPECT_GT(count(text, "data-file=\"other\""), 0u);
    EXPECT_EQ(count(text, "data-file=\"/f9\""), 0u);
    // The ranked files' colours are all different.
    std::set<std::string> colours;
    for (int i = 10; i < 30; ++i) {
      const size_t line = text.find(">/f" + std::to_string(i) + ": ");
      ASSERT_NE(line, std::string::npos) << i;
      const size_t fill = text.rfind("fill=\"", line);
      colours.insert(text.substr(fill + 6, 7));
    }
    EXPECT_EQ(colours.size(), 20u);
  }
  std::filesystem::remove_all(dir);
}

TEST(Report, BadInputIsAUsageError) {
  MIMICFS_REQUIRE_MOUNTABLE();
  const std::string dir = make_temp_dir();
  auto not_mount = run_command({mimicfs_binary(), "report", dir, "--out", dir + "/x.svg"});
  EXPECT_EQ(not_mount.exit_status, 2);
  EXPECT_NE(not_mount.err.find("is not a mimicfs mount"), std::string::npos) << not_mount.err;
  MountedVolume vol("nfs");
  ASSERT_TRUE(vol.mounted()) << vol.error();
  auto png = run_command({mimicfs_binary(), "report", vol.path(), "--out", dir + "/x.png"});
  EXPECT_EQ(png.exit_status, 2);
  EXPECT_NE(png.err.find("--out must name a .svg file"), std::string::npos) << png.err;
  auto empty = run_command({mimicfs_binary(), "report", vol.path(), "--out", dir + "/empty.svg"});
  EXPECT_EQ(empty.exit_status, 0) << empty.err << ": an empty volume is a picture too";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mimicfs::testing
