// SPDX-License-Identifier: Apache-2.0
#include "control/control_layer.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using namespace volume_fixture;

// A mount's stack without FUSE: the control layer over the engine's top.
struct Mount {
  explicit Mount(std::string_view profile) : fs(profile), files(fs.engine, fs.engine.fs()) {}
  Fs fs;
  ControlFiles files;
  ControlLayer layer{fs.engine.fs(), files};
};

std::string read_all(FileSystem& fs, uint64_t inode, uint64_t handle) {
  std::vector<std::byte> buffer(1 << 20);
  Work work;
  auto n = fs.run(ops::Read{inode, 0, buffer, O_RDONLY, handle}, work);
  EXPECT_TRUE(n.has_value());
  return n ? std::string(reinterpret_cast<const char*>(buffer.data()), *n) : "";
}

TEST(ControlLayer, AnswersTheControlFilesAndPassesTheRest) {
  Mount m("ideal");
  FileSystem& fs = m.layer;
  const auto dir = fs.lookup(kRoot, ".mimicfs");
  ASSERT_TRUE(dir.has_value());
  EXPECT_EQ(dir->inode, ControlFiles::kDirectoryInode);
  EXPECT_EQ(fs.lookup(kRoot, "f").error(), Errno{ENOENT});  // the volume's answer
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  ASSERT_EQ(fs.write(f, 0, as_bytes("abc")), 3u);
  const auto stats = fs.lookup(ControlFiles::kDirectoryInode, "stats.json");
  ASSERT_TRUE(stats.has_value());
  Work work;
  ASSERT_TRUE(fs.run(ops::Open{stats->inode, O_RDONLY, 7}, work).has_value());
  const auto json = nlohmann::json::parse(read_all(fs, stats->inode, 7));
  EXPECT_EQ(json["ops"]["create"]["count"], 1);
  EXPECT_EQ(json["ops"]["write"]["count"], 1);
  EXPECT_EQ(json["ops"]["lookup"]["count"], 1);  // "f"'s; not ".mimicfs" nor "stats.json"
  (void)fs.run(ops::Release{stats->inode, 7}, work);
  EXPECT_EQ(error_of(fs.run(ops::Read{stats->inode, 0, {}, O_RDONLY, 7}, work)), Errno{EBADF});
}

TEST(ControlLayer, EachReaderKeepsWhatItsOpenSaw) {
  Mount m("ideal");
  FileSystem& fs = m.layer;
  const uint64_t stats = ControlFiles::kStatsInode;
  Work work;
  ASSERT_TRUE(fs.run(ops::Open{stats, O_RDONLY, 1}, work).has_value());
  (void)fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{});
  ASSERT_TRUE(fs.run(ops::Open{stats, O_RDONLY, 2}, work).has_value());
  const auto before = nlohmann::json::parse(read_all(fs, stats, 1));
  const auto after = nlohmann::json::parse(read_all(fs, stats, 2));
  EXPECT_FALSE(before["ops"].contains("create"));
  EXPECT_EQ(after["ops"]["create"]["count"], 1);
}

TEST(ControlLayer, RefusesWhatADirectoryOfSpecialFilesRefuses) {
  Mount m("ideal");
  FileSystem& fs = m.layer;
  const uint64_t dir = ControlFiles::kDirectoryInode;
  EXPECT_EQ(error_of(fs.create(kRoot, ".mimicfs", S_IFREG | 0644, 0, Owner{})), Errno{EEXIST});
  EXPECT_EQ(error_of(fs.mkdir(dir, "d", 0755, Owner{})), Errno{EPERM});
  EXPECT_EQ(error_of(fs.tmpfile(dir, 0600, Owner{})), Errno{EOPNOTSUPP});
  EXPECT_EQ(error_of(fs.unlink(kRoot, ".mimicfs")), Errno{EISDIR});
  EXPECT_EQ(error_of(fs.rmdir(kRoot, ".mimicfs")), Errno{EPERM});
  EXPECT_EQ(error_of(fs.rename(dir, "stats.json", kRoot, "s", 0)), Errno{EPERM});
  EXPECT_EQ(error_of(fs.setattr(ControlFiles::kStatsInode, AttributeChanges{})), Errno{EPERM});
  EXPECT_EQ(error_of(fs.fallocate(ControlFiles::kStatsInode, 0, 0, 1)), Errno{EOPNOTSUPP});
  EXPECT_EQ(error_of(fs.write(ControlFiles::kStatsInode, 0, as_bytes("x"))), Errno{EBADF});
  EXPECT_EQ(error_of(fs.write(ControlFiles::kCtlInode, 0, as_bytes("no such command"))),
            Errno{EINVAL});
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  EXPECT_EQ(error_of(fs.setxattr(f, "user.mimicfs.extents", "1", 0)), Errno{EPERM});
  EXPECT_EQ(fs.getxattr(f, "user.mimicfs.extents"), "0");
  // Nothing reached the volume but the create.
  const StatsSnapshot counted = m.fs.engine.fs().snapshot();
  EXPECT_EQ(counted.ops.size(), 1u);  // the create: the rest stopped at the layer
  EXPECT_EQ(counted.ops.at("create").count, 1u);
}

}  // namespace
}  // namespace mimicfs
