// SPDX-License-Identifier: Apache-2.0
// A volume saved into its data directory and loaded into a new engine is the
// same volume: stats, device layout and contents as saved, and what is done
// to it afterwards gives what it would have given had it never been unmounted.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/host_data_store.h"
#include "engine/data/memory_data_store.h"
#include "engine/engine.h"
#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

namespace fs = std::filesystem;
using namespace volume_fixture;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "mimicfs-image.XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// An engine whose contents live in a data directory.
struct Stored {
  Stored(const std::string& profile, const std::string& dir)
      : store(open_store(dir)), raw(store.get()), engine(builtin(profile), std::move(store), clock) {}
  static std::unique_ptr<HostDataStore> open_store(const std::string& dir) {
    auto store = HostDataStore::open(dir);
    if (!store) throw std::runtime_error(store.error());
    return std::move(*store);
  }
  FixedWallClock clock;
  std::unique_ptr<HostDataStore> store;
  HostDataStore* raw;
  Engine engine;
  FileSystem& fs = engine.fs();
};

uint64_t check(Result<Attributes> r, const char* what) {
  EXPECT_TRUE(r.has_value()) << what;
  return r ? r->inode : 0;
}

// Part one: directories, links, xattrs, sparse and punched files, a
// preallocated one, a removal; everything synced (the image is taken after a sync).
void first_part(FileSystem& fs) {
  const uint64_t db = check(fs.mkdir(kRoot, "db", 0750, Owner{999, 999}), "mkdir");
  const uint64_t table =
      check(fs.create(db, "t1.ibd", S_IFREG | 0640, 0, Owner{999, 999}, true), "create");
  const std::string page = pattern(16 * kKiB, 'a');
  for (uint64_t i = 0; i < 64; ++i) {
    ASSERT_TRUE(fs.write(table, i * 3 * page.size(), as_bytes(page)).has_value());
  }
  ASSERT_TRUE(fs.fallocate(table, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 8 * kKiB,
                           200 * kKiB)
                  .has_value() ||
              fs.profile().name == "nfs");
  ASSERT_TRUE(fs.setxattr(table, "user.engine", "InnoDB", 0).has_value());
  ASSERT_TRUE(fs.fsync(table, false).has_value());
  fs.release(table);
  const uint64_t log =
      check(fs.create(db, "redo.log", S_IFREG | 0600, 0, Owner{999, 999}, true), "create");
  if (fs.fallocate(log, 0, 0, 4 * kMiB).has_value()) {
    ASSERT_TRUE(fs.write(log, 0, as_bytes(pattern(5000, 'r'))).has_value());
  }
  fs.release(log);
  check(fs.link(table, kRoot, "hard-link"), "link");
  check(fs.symlink(kRoot, "latest", "db/t1.ibd", Owner{0, 0}), "symlink");
  const uint64_t gone = check(fs.create(kRoot, "gone", S_IFREG | 0644, 0, Owner{0, 0}), "create");
  ASSERT_TRUE(fs.write(gone, 0, as_bytes(pattern(64 * kKiB, 'g'))).has_value());
  ASSERT_TRUE(fs.unlink(kRoot, "gone").has_value());
  fs.forget(gone, 1);
  check(fs.create(kRoot, "empty", S_IFREG | 0644, 0, Owner{0, 0}), "create");
}

// Part two: more writes into the same files, new ones, an unlink.
void second_part(FileSystem& fs) {
  const uint64_t db = check(fs.lookup(kRoot, "db"), "lookup");
  const uint64_t table = check(fs.lookup(db, "t1.ibd"), "lookup");
  ASSERT_TRUE(fs.open(table, O_RDWR).has_value());
  ASSERT_TRUE(fs.write(table, 10 * kKiB, as_bytes(pattern(40 * kKiB, 'b'))).has_value());
  ASSERT_TRUE(fs.write(table, 4 * kMiB, as_bytes(pattern(kMiB, 'c'))).has_value());
  ASSERT_TRUE(fs.fsync(table, false).has_value());
  ASSERT_TRUE(fs.flush(table, true).has_value());
  fs.release(table);
  const uint64_t t2 =
      check(fs.create(db, "t2.ibd", S_IFREG | 0640, 0, Owner{999, 999}, true), "create");
  ASSERT_TRUE(fs.write(t2, 0, as_bytes(pattern(2 * kMiB, 'd'))).has_value());
  ASSERT_TRUE(fs.fsync(t2, false).has_value());
  fs.release(t2);
  ASSERT_TRUE(fs.unlink(kRoot, "hard-link").has_value());
  ASSERT_TRUE(fs.rename(kRoot, "empty", db, "empty", 0).has_value());
  // A file empty at the save gets a host file of its own now.
  const uint64_t empty = check(fs.lookup(db, "empty"), "lookup");
  ASSERT_TRUE(fs.write(empty, 0, as_bytes(pattern(3000, 'e'))).has_value());
}

std::string contents(FileSystem& fs, const std::string& dir, const std::string& name) {
  const uint64_t parent = dir.empty() ? kRoot : check(fs.lookup(kRoot, dir), "lookup");
  const uint64_t inode = check(fs.lookup(parent, name), "lookup");
  std::string out(8 * kMiB, '\0');
  auto n = fs.read(inode, 0, std::as_writable_bytes(std::span(out.data(), out.size())));
  EXPECT_TRUE(n.has_value());
  out.resize(n.value_or(0));
  return out;
}

class VolumeImage : public ::testing::TestWithParam<std::string> {};

TEST_P(VolumeImage, ALoadedVolumeIsTheSavedOneAndGoesOnAsIfNeverUnmounted) {
  const std::string profile = GetParam();
  TempDir dir;
  ImageJson image;
  nlohmann::json saved_stats, saved_layout;
  {
    Stored first(profile, dir.path());
    first_part(first.fs);
    image = first.engine.save_image();
    saved_stats = to_json(first.fs.snapshot());
    saved_layout = to_json(first.fs.layout());
    // As the mount does after the unmount: the image into volume.meta.
    ASSERT_TRUE(first.raw->save_volume(image).has_value());
  }
  Stored second(profile, dir.path());
  auto loaded = second.raw->load_volume();
  ASSERT_TRUE(loaded.has_value()) << loaded.error();
  ASSERT_TRUE(loaded->has_value());
  second.engine.load_image(**loaded);
  EXPECT_EQ(to_json(second.fs.snapshot()), saved_stats);
  EXPECT_EQ(to_json(second.fs.layout()), saved_layout);

  // The same work on a volume that was never unmounted (save_image() syncs,
  // as the unmount did).
  Fs control(profile);
  first_part(control.volume);
  (void)control.engine.save_image();
  ASSERT_EQ(to_json(control.volume.snapshot()), saved_stats);
  second_part(second.fs);
  second_part(control.volume);
  EXPECT_EQ(to_json(second.fs.snapshot()), to_json(control.volume.snapshot()));
  EXPECT_EQ(to_json(second.fs.layout()), to_json(control.volume.layout()));
  for (const auto& [directory, name] : std::vector<std::pair<std::string, std::string>>{
           {"db", "t1.ibd"}, {"db", "t2.ibd"}, {"db", "redo.log"}, {"db", "empty"}}) {
    EXPECT_EQ(contents(second.fs, directory, name), contents(control.volume, directory, name))
        << directory << "/" << name;
  }
  const uint64_t link = check(second.fs.lookup(kRoot, "latest"), "lookup");
  EXPECT_EQ(second.fs.readlink(link).value_or(""), "db/t1.ibd");
  const uint64_t table = check(second.fs.lookup(check(second.fs.lookup(kRoot, "db"), "lookup"),
                                                "t1.ibd"),
                               "lookup");
  EXPECT_EQ(second.fs.getxattr(table, "user.engine").value_or(""), "InnoDB");
}

// A volume whose host file is missing is refused, and the other host files
// stay (the directory keeps the volume as saved).
TEST(VolumeImageLoad, AMissingHostFileIsRefusedAndTheOthersStay) {
  TempDir dir;
  {
    Stored first("ext4", dir.path());
    for (const char* name : {"a", "b", "c"}) {
      const uint64_t inode = check(first.fs.create(kRoot, name, S_IFREG | 0644, 0, Owner{0, 0}),
                                   "create");
      ASSERT_TRUE(first.fs.write(inode, 0, as_bytes(pattern(10000, name[0]))).has_value());
    }
    ASSERT_TRUE(first.raw->save_volume(first.engine.save_image()).has_value());
  }
  fs::remove(fs::path(dir.path()) / "files" / "2");
  Stored second("ext4", dir.path());
  auto loaded = second.raw->load_volume();
  ASSERT_TRUE(loaded.has_value() && loaded->has_value());
  EXPECT_THROW(second.engine.load_image(**loaded), ImageError);
  EXPECT_TRUE(fs::exists(fs::path(dir.path()) / "files" / "1"));
  EXPECT_TRUE(fs::exists(fs::path(dir.path()) / "files" / "3"));
}

// Malformed trees and devices are refused at load, never served.
TEST(VolumeImageLoad, AnInconsistentImageIsRefused) {
  TempDir dir;
  ImageJson image;
  {
    Stored first("xfs", dir.path());
    const uint64_t d = check(first.fs.mkdir(kRoot, "d", 0755, Owner{0, 0}), "mkdir");
    const uint64_t f = check(first.fs.create(d, "f", S_IFREG | 0644, 0, Owner{0, 0}), "create");
    // Zeros: blocks on the device, no host file (each case loads into a new directory).
    ASSERT_TRUE(first.fs.write(f, 0, as_bytes(zeros(10000))).has_value());
    image = first.engine.save_image();
  }
  auto refused = [&](const std::function<void(ImageJson&)>& damage) {
    ImageJson bad = image;
    damage(bad);
    TempDir other;
    Stored second("xfs", other.path());
    try {
      second.engine.load_image(bad);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  auto inode = [](ImageJson& bad, const char* name) -> ImageJson& {
    for (ImageJson& i : bad["volume"]["namespace"]["inodes"]) {
      if (unpack_bytes(i["name"]) == name) return i;
    }
    throw std::runtime_error("no such inode");
  };
  EXPECT_EQ(refused([&](ImageJson& bad) { inode(bad, "f")["nlink"] = 2; }),
            "an inode's link count is not its entries'");
  EXPECT_EQ(refused([&](ImageJson& bad) {
              inode(bad, "d")["entries"].push_back({pack_bytes("loop"), kRoot});
            }),
            "an entry names the root");
  EXPECT_EQ(refused([&](ImageJson& bad) {
              inode(bad, "d")["entries"].push_back(
                  {pack_bytes("again"), inode(bad, "d")["number"]});
            }),
            "a directory is reached twice (a cycle, or two parents)");
  EXPECT_EQ(refused([&](ImageJson& bad) {
              auto extents = unpack_numbers(inode(bad, "f")["file"]["space"]["extents"], 4);
              ASSERT_EQ(extents.size(), 4u);
              extents[1] = 1;  // into the first group's metadata
              inode(bad, "f")["file"]["space"]["extents"] = pack_numbers(extents);
            }),
            "a file's block lies in a group's metadata");
}

INSTANTIATE_TEST_SUITE_P(Profiles, VolumeImage,
                         ::testing::Values("nfs", "ideal", "ext4", "xfs", "btrfs"));

}  // namespace
}  // namespace mimicfs
